// Shared by the AVX-512 window kernels (x86/depthwise_avx512.cpp, x86/max_pool_avx512.cpp,
// x86/conv_direct_avx512.cpp, x86/winograd_avx512.cpp): 16 outputs of one output row of a
// K x K window, stride 1 or 2, dilation 1, read straight from an NCHW plane. Lanes outside the
// input are the lanes a masked load leaves out (they read as the padding value), and stride-2
// taps are the even or odd lanes of two loads, picked by a permute. Include only inside
// `#pragma GCC target("avx512f,...")`, in an unnamed namespace (after <type_traits> and
// <utility>).
#pragma once

// The lanes of a 16-float load starting at input column c that lie inside the row [0, w).
inline __mmask16 column_mask(int64_t c, int64_t w) {
  const int64_t lo = c < 0 ? -c : 0, hi = w - c < 16 ? w - c : 16;
  if (hi <= lo) return 0;
  const uint32_t below_hi = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  return static_cast<__mmask16>(below_hi & (0xFFFFu << lo));
}

// A masked load at row + c: lanes outside the row read as `pad` and, being masked, are never
// touched, even where row + c lies before the row.
inline __m512 load_columns(const float* row, int64_t c, __mmask16 mask, __m512 pad) {
  return _mm512_mask_loadu_ps(pad, mask, reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + c * 4));
}

// Stores the lanes of `mask`. A masked store is much slower than a plain one on some cores
// (AMD Zen 4 among them), so a full mask takes a plain store.
inline void store_lanes(float* dst, __mmask16 mask, __m512 v) {
  if (mask == 0xFFFF) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm512_mask_storeu_ps(dst, mask, v);
  }
}

// The load masks of one block of 16 outputs; the same for every output row of a plane.
// Stride 1: tap kx loads from c0 + kx. Stride 2: lane l of tap kx reads column c0 + kx + 2l,
// the even (kx even) or odd lanes of the 32 columns from c0 + kx - kx % 2: two loads (masks
// 2p and 2p + 1 for the pair p = kx / 2) and one permute, shared by taps 2p and 2p + 1.
struct BlockMasks {
  __mmask16 load[8];
  __mmask16 out;
  bool interior;  // every load mask full: the loads need no mask
};

template <int K, int S>
BlockMasks block_masks(int64_t in_w, int64_t out_w, int64_t pad_left, int64_t ox) {
  static_assert(K <= 7 && (S == 1 || S == 2), "kernels up to 7 wide, stride 1 or 2");
  BlockMasks m{};
  const int64_t c0 = ox * S - pad_left;  // input column of tap 0, lane 0
  if (S == 1) {
    for (int kx = 0; kx < K; ++kx) m.load[kx] = column_mask(c0 + kx, in_w);
  } else {
    for (int p = 0; p < (K + 1) / 2; ++p) {
      m.load[2 * p] = column_mask(c0 + 2 * p, in_w);
      m.load[2 * p + 1] = column_mask(c0 + 2 * p + 16, in_w);
    }
  }
  m.out = out_w - ox >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (out_w - ox)) - 1);
  m.interior = true;
  for (int i = 0; i < (S == 1 ? K : (K + 1) / 2 * 2); ++i) m.interior = m.interior && m.load[i] == 0xFFFF;
  return m;
}

// The K tap vectors of one input row for the 16 outputs whose tap 0 is input column c0:
// v[kx] holds, in lane l, input column c0 + kx + S * l (the padding value outside the row).
template <int K, int S, bool kInterior = false>
__attribute__((always_inline)) inline void row_taps(const float* row, int64_t c0, const BlockMasks& m, __m512 pad,
                                                    __m512* v) {
  const auto load = [&](int64_t c, __mmask16 mask) __attribute__((always_inline)) {
    return kInterior ? _mm512_loadu_ps(row + c) : load_columns(row, c, mask, pad);
  };
  if (S == 1) {
#pragma GCC unroll 7
    for (int kx = 0; kx < K; ++kx) v[kx] = load(c0 + kx, m.load[kx]);
  } else {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#pragma GCC unroll 4
    for (int p = 0; p < (K + 1) / 2; ++p) {
      const __m512 lo = load(c0 + 2 * p, m.load[2 * p]);
      const __m512 hi = load(c0 + 2 * p + 16, m.load[2 * p + 1]);
      v[2 * p] = _mm512_permutex2var_ps(lo, even, hi);
      if (2 * p + 1 < K) v[2 * p + 1] = _mm512_permutex2var_ps(lo, odd, hi);
    }
  }
}

// Calls tap(ky, kx, values) for every tap of the 16 outputs whose tap 0 is input column c0 (rows:
// the window's K input rows, null where a kernel row falls on the padding, which is skipped).
template <int K, int S, typename Tap>
__attribute__((always_inline)) inline void for_each_tap(const float* const* rows, int64_t c0, const BlockMasks& m,
                                                        __m512 pad, Tap&& tap) {
#pragma GCC unroll 7
  for (int ky = 0; ky < K; ++ky) {
    if (!rows[ky]) continue;
    __m512 v[K];
    row_taps<K, S>(rows[ky], c0, m, pad, v);
#pragma GCC unroll 7
    for (int kx = 0; kx < K; ++kx) tap(ky, kx, v[kx]);
  }
}

namespace group_tap_detail {

// Input row J of the group: its taps feed output rows r with ky = J - r S in [0, K). Rows, taps
// and kernel columns are template constants (index sequences, not unrolled loops), so the
// callers' accumulator arrays are indexed by constants from the start and stay in registers:
// with `#pragma GCC unroll` the indices became constant only after GCC had put the arrays in
// memory, and every FMA of the depthwise kernel read and wrote the stack.
template <int K, int S, int J, typename Tap, int... R, int... KX>
__attribute__((always_inline)) inline void input_row(const __m512* v, Tap& tap, std::integer_sequence<int, R...>,
                                                     std::integer_sequence<int, KX...>) {
  const auto row = [&](auto r) __attribute__((always_inline)) {
    constexpr int ky = J - decltype(r)::value * S;
    if constexpr (ky >= 0 && ky < K) (tap(decltype(r)::value, ky, KX, v[KX]), ...);
  };
  (row(std::integral_constant<int, R>{}), ...);
}

template <int K, int S, int R, typename Load, typename Tap, int... J>
__attribute__((always_inline)) inline void group(int64_t in_h, int64_t iy0, Load& load, Tap& tap,
                                                 std::integer_sequence<int, J...>) {
  const auto one = [&](auto j) __attribute__((always_inline)) {
    constexpr int kJ = decltype(j)::value;
    const int64_t iy = iy0 + kJ;
    if (iy < 0 || iy >= in_h) return;
    __m512 v[K];
    load(iy, v);
    input_row<K, S, kJ>(v, tap, std::make_integer_sequence<int, R>{}, std::make_integer_sequence<int, K>{});
  };
  (one(std::integral_constant<int, J>{}), ...);
}

}  // namespace group_tap_detail

// for_each_group_tap with the tap vectors of input row iy loaded by load(iy, v) (v: K vectors).
template <int K, int S, int R, typename Load, typename Tap>
__attribute__((always_inline)) inline void for_each_group_row(int64_t in_h, int64_t iy0, Load&& load, Tap&& tap) {
  group_tap_detail::group<K, S, R>(in_h, iy0, load, tap, std::make_integer_sequence<int, (R - 1) * S + K>{});
}

// Calls tap(r, ky, kx, values) for every tap of output rows oy0 + r, r < R, 16 outputs each from
// input column c0 (iy0 = oy0 * S - pad_top: the input row of the group's first window row);
// r, ky and kx are compile-time constants in each call. Each input row's taps are loaded once
// and feed every row of the group whose window covers it (per output row, a 3x3 stride-1
// window then costs about 3 loads instead of 9); rows outside the input are the padding,
// skipped. Rows past the output's end are visited as well: the caller does not store them.
template <int K, int S, int R, bool kInterior = false, typename Tap>
__attribute__((always_inline)) inline void for_each_group_tap(const float* x, int64_t in_h, int64_t in_w, int64_t iy0,
                                                              int64_t c0, const BlockMasks& m, __m512 pad, Tap&& tap) {
  for_each_group_row<K, S, R>(
      in_h, iy0,
      [&](int64_t iy, __m512* v) __attribute__((always_inline)) {
        row_taps<K, S, kInterior>(x + iy * in_w, c0, m, pad, v);
      },
      tap);
}

// The K input rows of output row oy (null where they fall outside the input).
template <int K, int S>
inline void window_rows(const float* x, int64_t in_h, int64_t in_w, int64_t pad_top, int64_t oy, const float** rows) {
#pragma GCC unroll 7
  for (int ky = 0; ky < K; ++ky) {
    const int64_t iy = oy * S - pad_top + ky;
    rows[ky] = iy >= 0 && iy < in_h ? x + iy * in_w : nullptr;
  }
}
