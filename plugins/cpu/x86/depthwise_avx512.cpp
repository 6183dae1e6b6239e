// depthwise.h's channel function for AVX-512, written with intrinsics. The loops of
// depthwise_rows.inc copy each plane into a zero-padded scratch first (for stride 2 that copy
// costs more than the arithmetic) and gather stride-2 taps. Here the taps are read straight
// from the input (x86/window_avx512.h), each input row once for a group of output rows.
// 3x3 and 5x5, stride 1 or 2; other shapes (dilation, other kernels) run the AVX2 loops.
// Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "fast/depthwise.h"
#include "gemm/sgemm.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl,fma")
// GCC 12 reports the _mm512_undefined_ps inside its own masked max/min intrinsics as maybe
// uninitialized (a known false positive at -O3).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::depthwise {

namespace {

#include "x86/activation_lanes_avx512.h"
#include "x86/window_avx512.h"

// Output rows are computed kRows at a time (for_each_group_tap): a 3x3 stride-1 group loads 27
// vectors for its 63 FMAs where a row at a time loaded 63 (the loads, not the FMAs, bounded
// that loop). Seven divides every plane height of the MobileNet and EfficientNet families (7,
// 14, 28, 56, 112), and 7 accumulators + 9 weights + 3 taps of a 3x3 kernel fit 32 registers.
constexpr int kRows = 7;

// The tap function of a row group (for_each_group_tap): each input row's K taps are summed
// apart, then added to the accumulator of the output row. Adding every tap straight into the
// accumulator made each row's sum one chain of K x K dependent FMAs, and with at most K rows
// taking taps from any one input row the core had too few chains to fill its FMA units: this
// costs one add per input row and output row and ran the 3x3 kernels 15-25% faster.
template <int K>
struct RowSums {
  const __m512* wv;
  __m512* acc;
  __m512 row[kRows];
  __attribute__((always_inline)) void operator()(int r, int ky, int kx, __m512 v) {
    const __m512 w = wv[ky * K + kx];
    row[r] = kx == 0 ? _mm512_mul_ps(w, v) : _mm512_fmadd_ps(w, v, row[r]);
    if (kx == K - 1) acc[r] = _mm512_add_ps(acc[r], row[r]);
  }
};

// acc[r] = bias + the window sums of output row oy0 + r, for the 16 outputs whose tap 0 is
// input column c0; kInterior: every load lies inside the row (BlockMasks::interior).
template <int K, int S, bool kInterior>
__attribute__((always_inline)) inline void row_group(const Geometry& g, const float* x, const __m512* wv,
                                                     __m512 bias, int64_t oy0, int64_t c0, const BlockMasks& m,
                                                     __m512* acc) {
#pragma GCC unroll 7
  for (int r = 0; r < kRows; ++r) acc[r] = bias;
  for_each_group_tap<K, S, kRows, kInterior>(x, g.in_h, g.in_w, oy0 * S - g.pad_top, c0, m, _mm512_setzero_ps(),
                                             RowSums<K>{wv, acc, {}});
}

// Activations with a register form (x86/activation_lanes_avx512.h: Relu, Clip, HardSwish,
// Sigmoid, SiLU) are applied before the one store, rounding as the activation rows do; the
// others run over the finished plane.
template <int K, int S, ActivationKind A>
void direct_plane(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                  const Activation& activation) {
  __m512 wv[K * K];
#pragma GCC unroll 25
  for (int t = 0; t < K * K; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 bv = _mm512_set1_ps(bias);
  const int64_t ow = g.out_w;
  // Masks for up to kChunk blocks at a time, computed once for all rows of the plane.
  constexpr int64_t kChunk = 16;
  BlockMasks masks[kChunk];
  for (int64_t first = 0; first < ow; first += 16 * kChunk) {
    const int64_t blocks = std::min<int64_t>(kChunk, (ow - first + 15) / 16);
    for (int64_t b = 0; b < blocks; ++b) masks[b] = block_masks<K, S>(g.in_w, ow, g.pad_left, first + 16 * b);
    for (int64_t oy0 = 0; oy0 < g.out_h; oy0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, g.out_h - oy0);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t ox = first + 16 * b;
        const BlockMasks m = masks[b];  // a copy: its masks stay in mask registers
        __m512 acc[kRows];
        if (m.interior) {
          row_group<K, S, true>(g, x, wv, bv, oy0, ox * S - g.pad_left, m, acc);
        } else {
          row_group<K, S, false>(g, x, wv, bv, oy0, ox * S - g.pad_left, m, acc);
        }
#pragma GCC unroll 7
        for (int r = 0; r < kRows; ++r) {  // unrolled, so acc stays in registers
          if (r >= rows) continue;
          const int64_t at = (oy0 + r) * ow + ox;
          __m512 sum = acc[r];
          if (z) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m.out, z + at));  // z may be y: read first
          sum = activate_lanes(sum, A, activation.p0, activation.p1);          // A is a constant: no switch
          store_lanes(y + at, m.out, sum);
        }
      }
    }
  }
}

// One output row of two channels per vector (pairs_apply: out_w <= 8): lanes 0-7 channel a,
// lanes 8-15 channel b. Stride 1 merges two masked loads (b's shifted 8 lanes along); stride 2
// takes the even/odd lanes of 16 columns of a and 16 of b with the same permutes as a 16-wide
// row. A 7x7 plane used 7 of 16 lanes; this uses 14.
inline float* at_lane(float* row, int64_t offset) {
  return reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(offset * 4));
}

template <int K, int S, ActivationKind A>
void pair_planes(const Geometry& g, const PlaneRef& a, const PlaneRef& b, const Activation& activation) {
  constexpr __mmask16 kLow = 0x00FF;
  __m512 wv[K * K];
#pragma GCC unroll 25
  for (int t = 0; t < K * K; ++t) wv[t] = _mm512_mask_blend_ps(kLow, _mm512_set1_ps(b.w[t]), _mm512_set1_ps(a.w[t]));
  const __m512 bv = _mm512_mask_blend_ps(kLow, _mm512_set1_ps(b.bias), _mm512_set1_ps(a.bias));
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const int64_t ow = g.out_w, c0 = -g.pad_left;
  // Stride 1: tap kx, lanes 0-7 from a at c0 + kx, lanes 8-15 from b at c0 + kx - 8. Stride 2:
  // pair p, 16 columns from c0 + 2p of each channel.
  __mmask16 first[K], second[K];
  for (int k = 0; k < K; ++k) {
    if (S == 1) {
      first[k] = column_mask(c0 + k, g.in_w) & kLow;
      second[k] = column_mask(c0 + k - 8, g.in_w) & static_cast<__mmask16>(~kLow);
    } else {
      first[k] = second[k] = column_mask(c0 + 2 * k, g.in_w);
    }
  }
  const auto load = [&](int64_t iy, __m512* v) __attribute__((always_inline)) {
    const float* ra = a.x + iy * g.in_w;
    const float* rb = b.x + iy * g.in_w;
    if (S == 1) {
#pragma GCC unroll 5
      for (int kx = 0; kx < K; ++kx)
        v[kx] = load_columns(ra, c0 + kx, first[kx], load_columns(rb, c0 + kx - 8, second[kx], _mm512_setzero_ps()));
    } else {
#pragma GCC unroll 3
      for (int p = 0; p < (K + 1) / 2; ++p) {
        const __m512 lo = load_columns(ra, c0 + 2 * p, first[p], _mm512_setzero_ps());
        const __m512 hi = load_columns(rb, c0 + 2 * p, second[p], _mm512_setzero_ps());
        v[2 * p] = _mm512_permutex2var_ps(lo, even, hi);
        if (2 * p + 1 < K) v[2 * p + 1] = _mm512_permutex2var_ps(lo, odd, hi);
      }
    }
  };
  const __mmask16 out_a = static_cast<__mmask16>((1u << ow) - 1u), out_b = static_cast<__mmask16>(out_a << 8);
  for (int64_t oy0 = 0; oy0 < g.out_h; oy0 += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, g.out_h - oy0);
    __m512 acc[kRows];
#pragma GCC unroll 7
    for (int r = 0; r < kRows; ++r) acc[r] = bv;
    for_each_group_row<K, S, kRows>(g.in_h, oy0 * S - g.pad_top, load, RowSums<K>{wv, acc, {}});
#pragma GCC unroll 7
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) continue;
      const int64_t row = (oy0 + r) * ow;
      __m512 sum = acc[r];
      if (a.z) {  // z may be y: read first
        const __m512 z = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(out_a, a.z + row), out_b,
                                              at_lane(const_cast<float*>(b.z) + row, -8));
        sum = _mm512_add_ps(sum, z);
      }
      sum = activate_lanes(sum, A, activation.p0, activation.p1);
      _mm512_mask_storeu_ps(a.y + row, out_a, sum);
      _mm512_mask_storeu_ps(at_lane(b.y + row, -8), out_b, sum);
    }
  }
}

template <int K, int S>
void pair(const Geometry& g, const PlaneRef& a, const PlaneRef& b, const Activation& activation) {
  switch (activation.kind) {
    case ActivationKind::None: return pair_planes<K, S, ActivationKind::None>(g, a, b, activation);
    case ActivationKind::Relu: return pair_planes<K, S, ActivationKind::Relu>(g, a, b, activation);
    case ActivationKind::Clip: return pair_planes<K, S, ActivationKind::Clip>(g, a, b, activation);
    case ActivationKind::HardSwish: return pair_planes<K, S, ActivationKind::HardSwish>(g, a, b, activation);
    case ActivationKind::Sigmoid: return pair_planes<K, S, ActivationKind::Sigmoid>(g, a, b, activation);
    case ActivationKind::SiLU: return pair_planes<K, S, ActivationKind::SiLU>(g, a, b, activation);
    default:
      pair_planes<K, S, ActivationKind::None>(g, a, b, activation);
      gemm::apply_activation(a.y, g.out_h * g.out_w, activation);  // the planes are contiguous
      gemm::apply_activation(b.y, g.out_h * g.out_w, activation);
  }
}

template <int K, int S>
void plane(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
           const Activation& activation) {
  switch (activation.kind) {
    case ActivationKind::None: return direct_plane<K, S, ActivationKind::None>(g, x, w, bias, z, y, activation);
    case ActivationKind::Relu: return direct_plane<K, S, ActivationKind::Relu>(g, x, w, bias, z, y, activation);
    case ActivationKind::Clip: return direct_plane<K, S, ActivationKind::Clip>(g, x, w, bias, z, y, activation);
    case ActivationKind::HardSwish:
      return direct_plane<K, S, ActivationKind::HardSwish>(g, x, w, bias, z, y, activation);
    case ActivationKind::Sigmoid: return direct_plane<K, S, ActivationKind::Sigmoid>(g, x, w, bias, z, y, activation);
    case ActivationKind::SiLU: return direct_plane<K, S, ActivationKind::SiLU>(g, x, w, bias, z, y, activation);
    default:
      direct_plane<K, S, ActivationKind::None>(g, x, w, bias, z, y, activation);
      gemm::apply_activation(y, g.out_h * g.out_w, activation);  // the plane is contiguous
  }
}

}  // namespace

void channel_avx512(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                    const Activation& activation, float* scratch) {
  if (!uses_padded_plane(g)) return channel_avx2(g, x, w, bias, z, y, activation, scratch);
  const int64_t k = g.kernel_h, s = g.stride_h;
  if (k == 3 && s == 1) return plane<3, 1>(g, x, w, bias, z, y, activation);
  if (k == 3 && s == 2) return plane<3, 2>(g, x, w, bias, z, y, activation);
  if (k == 5 && s == 1) return plane<5, 1>(g, x, w, bias, z, y, activation);
  return plane<5, 2>(g, x, w, bias, z, y, activation);
}

void channel_pair_avx512(const Geometry& g, const PlaneRef& a, const PlaneRef& b, const Activation& activation,
                         float* scratch) {
  if (!pairs_apply(g)) {
    channel_avx512(g, a.x, a.w, a.bias, a.z, a.y, activation, scratch);
    return channel_avx512(g, b.x, b.w, b.bias, b.z, b.y, activation, scratch);
  }
  const int64_t k = g.kernel_h, s = g.stride_h;
  if (k == 3 && s == 1) return pair<3, 1>(g, a, b, activation);
  if (k == 3 && s == 2) return pair<3, 2>(g, a, b, activation);
  if (k == 5 && s == 1) return pair<5, 1>(g, a, b, activation);
  return pair<5, 2>(g, a, b, activation);
}

}  // namespace edgert::cpu::depthwise

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
