// MaxPool over NCHW planes for AVX-512 (tactic f32-max-pool-direct-avx512): square 2x2, 3x3 or
// 5x5 windows, stride 1 or 2, no dilation, the shapes of CNN stems and downsampling (ceil_mode
// and pads included). Taps are read straight from the input (x86/window_avx512.h); lanes outside
// it read as the lowest float, the reference's starting value. `v > m ? v : m` per tap, which is
// what vmaxps(v, m) computes, so NaN inputs are skipped as the reference skips them.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <limits>

#include "fast/pool_rows.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl")
// GCC 12's false positive on its own masked max intrinsic (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu {

namespace {

#include "x86/window_avx512.h"

// Output rows kRows at a time, each input row loaded once for all of them (for_each_group_tap).
constexpr int kRows = 7;

template <int K, int S>
void max_plane(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, int64_t pad_top,
               int64_t pad_left) {
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  constexpr int64_t kChunk = 16;
  BlockMasks masks[kChunk];
  for (int64_t first = 0; first < out_w; first += 16 * kChunk) {
    const int64_t blocks = std::min<int64_t>(kChunk, (out_w - first + 15) / 16);
    for (int64_t b = 0; b < blocks; ++b) masks[b] = block_masks<K, S>(in_w, out_w, pad_left, first + 16 * b);
    for (int64_t oy0 = 0; oy0 < out_h; oy0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, out_h - oy0);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t ox = first + 16 * b;
        const BlockMasks m = masks[b];  // a copy: its masks stay in mask registers
        __m512 acc[kRows];
#pragma GCC unroll 7
        for (int r = 0; r < kRows; ++r) acc[r] = lowest;
        // Each input row's taps are reduced apart first (see depthwise_avx512.cpp's RowSums).
        const auto group = [&](auto interior) __attribute__((always_inline)) {
          __m512 row[kRows];
          for_each_group_tap<K, S, kRows, decltype(interior)::value>(
              x, in_h, in_w, oy0 * S - pad_top, ox * S - pad_left, m, lowest,
              [&](int r, int, int kx, __m512 v) __attribute__((always_inline)) {
                row[r] = kx == 0 ? v : _mm512_max_ps(v, row[r]);
                if (kx == K - 1) acc[r] = _mm512_max_ps(row[r], acc[r]);
              });
        };
        if (m.interior) {
          group(std::true_type{});
        } else {
          group(std::false_type{});
        }
#pragma GCC unroll 7
        for (int r = 0; r < kRows; ++r) {  // unrolled, so acc stays in registers
          if (r >= rows) break;
          store_lanes(y + (oy0 + r) * out_w + ox, m.out, acc[r]);
        }
      }
    }
  }
}

// 3x3 stride 2, the CNN downsampling pool, separably: the column maxima of an output row's three
// input rows (plain loads, no permutes), then for each 16 outputs the even, odd and next-even
// lanes of those maxima (three permutes; the window's left padding, 0-2 columns, shifts the
// vectors by an alignr). The generic kernel above permutes every tap of every input row and
// keeps 14 vectors live across a 7-row group. First used only on planes already in L2 (the band
// buffer of FusedConv's pooled stem: squeezenet's fused stem 532 -> 491 us): with a loop over
// the window's rows it was slower on planes streamed from L3 (squeezenet's unfused first pool
// 148 -> 248 us). With the rows' loads straight-line it is faster there too (squeezenet's
// 128- and 256-plane pools 18-22%). The column maxima stay in registers: stored to a row buffer
// and read back at other offsets, they stalled on store-to-load forwarding.
template <int kPadLeft>
void max_plane_3x3s2(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                     int64_t pad_top) {
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const int64_t out_blocks = (out_w + 15) / 16;
  const __mmask16 last_out = static_cast<__mmask16>(out_w % 16 == 0 ? 0xFFFF : (1u << (out_w % 16)) - 1);
  for (int64_t oy = 0; oy < out_h; ++oy) {
    const float* rows[3];
    int count = 0;
    for (int64_t ky = 0; ky < 3; ++ky) {
      const int64_t iy = oy * 2 - pad_top + ky;
      if (iy >= 0 && iy < in_h) rows[count++] = x + iy * in_w;
    }
    // Columns [16 i, 16 i + 16) of the column maxima, lowest() outside the input. `v > m ? v :
    // m` from lowest(): NaN inputs are skipped, as the reference skips them, and the maxima hold
    // no NaN, so the horizontal maxima may take any order.
    // The window's rows as three pointers, the last repeated where it has fewer (max(v, v) = v):
    // straight-line loads instead of a loop over `count` (the squeezenet stem's pool 8% faster).
    // A window wholly in the bottom padding (count 0) gives lowest().
    const float* r0 = count > 0 ? rows[0] : nullptr;
    const float* r1 = count > 1 ? rows[1] : r0;
    const float* r2 = count > 2 ? rows[2] : r1;
    const auto column_max = [&](int64_t i) __attribute__((always_inline)) {
      if (count == 0) return lowest;
      const __mmask16 mask = column_mask(16 * i, in_w);
      __m512 m = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mask, r0 + 16 * i), lowest);
      m = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mask, r1 + 16 * i), m);
      return _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mask, r2 + 16 * i), m);
    };
    __m512 before = lowest, w0 = column_max(0);  // columns 32 b - 16 and 32 b
    float* out = y + oy * out_w;
    for (int64_t b = 0; b < out_blocks; ++b) {
      const __m512 w1 = column_max(2 * b + 1), w2 = column_max(2 * b + 2);
      // Output 16 b + l covers columns 32 b + 2 l - kPadLeft + {0, 1, 2}.
      __m512 lo = w0, hi = w1, lo2 = w0, hi2 = w1;  // columns 32 b - kPadLeft (+ 16, + 2, + 18)
      if constexpr (kPadLeft > 0) {
        lo = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(w0), _mm512_castps_si512(before), 16 - kPadLeft));
        hi = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(w1), _mm512_castps_si512(w0), 16 - kPadLeft));
      }
      if constexpr (kPadLeft < 2) {
        lo2 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(w1), _mm512_castps_si512(w0), 2 - kPadLeft));
        hi2 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(w2), _mm512_castps_si512(w1), 2 - kPadLeft));
      }
      __m512 v = _mm512_max_ps(_mm512_permutex2var_ps(lo, odd, hi), _mm512_permutex2var_ps(lo, even, hi));
      v = _mm512_max_ps(_mm512_permutex2var_ps(lo2, even, hi2), v);
      store_lanes(out + 16 * b, b + 1 == out_blocks ? last_out : 0xFFFF, v);
      before = w1;
      w0 = w2;
    }
  }
}

}  // namespace

bool max_pool_avx512_applies(int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w,
                             int64_t dilation_h, int64_t dilation_w) {
  return kernel_h == kernel_w && (kernel_h == 2 || kernel_h == 3 || kernel_h == 5) && stride_h == stride_w &&
         (stride_h == 1 || stride_h == 2) && dilation_h == 1 && dilation_w == 1;
}

void max_pool_plane_avx512(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           int64_t kernel, int64_t stride, int64_t pad_top, int64_t pad_left) {
  if (kernel == 3 && stride == 2) {
    if (pad_left == 0) return max_plane_3x3s2<0>(x, y, in_h, in_w, out_h, out_w, pad_top);
    if (pad_left == 1) return max_plane_3x3s2<1>(x, y, in_h, in_w, out_h, out_w, pad_top);
    if (pad_left == 2) return max_plane_3x3s2<2>(x, y, in_h, in_w, out_h, out_w, pad_top);
  }
  const auto run = [&](auto plane) { plane(x, y, in_h, in_w, out_h, out_w, pad_top, pad_left); };
  if (kernel == 2) return stride == 1 ? run(max_plane<2, 1>) : run(max_plane<2, 2>);
  if (kernel == 3) return stride == 1 ? run(max_plane<3, 1>) : run(max_plane<3, 2>);
  return stride == 1 ? run(max_plane<5, 1>) : run(max_plane<5, 2>);
}

}  // namespace edgert::cpu

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
