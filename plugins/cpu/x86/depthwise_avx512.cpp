// depthwise.h's channel function for AVX-512, written with intrinsics. The loops of
// depthwise_rows.inc copy each plane into a zero-padded scratch first (for stride 2 that copy
// costs more than the arithmetic) and gather stride-2 taps. Here the taps are read straight
// from the input: the zero padding is the lanes a masked load leaves out, and stride-2 taps are
// the even or odd lanes of two loads, picked by a permute. One FMA chain per kernel row.
// 3x3 and 5x5, stride 1 or 2; other shapes (dilation, other kernels) run the AVX2 loops.
// Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "fast/depthwise.h"
#include "gemm/sgemm.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")
// GCC 12 reports the _mm512_undefined_ps inside its own masked max/min intrinsics as maybe
// uninitialized (a known false positive at -O3).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::depthwise {

namespace {

// The lanes of a 16-float load starting at input column c that lie inside the row [0, w).
inline __mmask16 column_mask(int64_t c, int64_t w) {
  const int64_t lo = c < 0 ? -c : 0, hi = w - c < 16 ? w - c : 16;
  if (hi <= lo) return 0;
  const uint32_t below_hi = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  return static_cast<__mmask16>(below_hi & (0xFFFFu << lo));
}

// A masked load at row + c: lanes outside the row read as zero (the padding) and, being masked,
// are never touched, even where row + c lies before the row.
inline __m512 load_columns(const float* row, int64_t c, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + c * 4));
}

// The load masks of one block of 16 outputs; the same for every output row of a plane.
// Stride 1: tap kx loads from c0 + kx. Stride 2: lane l of tap kx reads column c0 + kx + 2l,
// the even (kx even) or odd lanes of the 32 columns from c0 + kx - kx % 2: two loads (masks
// 2p and 2p + 1 for the pair p = kx / 2) and one permute, shared by taps 2p and 2p + 1.
struct BlockMasks {
  __mmask16 load[6];
  __mmask16 out;
};

template <int K, int S>
BlockMasks block_masks(const Geometry& g, int64_t ox) {
  BlockMasks m{};
  const int64_t c0 = ox * S - g.pad_left;  // input column of tap 0, lane 0
  if (S == 1) {
    for (int kx = 0; kx < K; ++kx) m.load[kx] = column_mask(c0 + kx, g.in_w);
  } else {
    for (int p = 0; p < (K + 1) / 2; ++p) {
      m.load[2 * p] = column_mask(c0 + 2 * p, g.in_w);
      m.load[2 * p + 1] = column_mask(c0 + 2 * p + 16, g.in_w);
    }
  }
  m.out = g.out_w - ox >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (g.out_w - ox)) - 1);
  return m;
}

// Sixteen outputs from column ox of one output row (rows: its K input rows, null where the
// kernel row falls on the padding), one FMA chain per kernel row.
template <int K, int S>
__attribute__((always_inline)) inline __m512 block(const float* const* rows, const __m512* wv, __m512 bias,
                                                   int64_t c0, const BlockMasks& m) {
  __m512 acc[K];
  acc[0] = bias;
#pragma GCC unroll 5
  for (int ky = 1; ky < K; ++ky) acc[ky] = _mm512_setzero_ps();
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    if (!rows[ky]) continue;
    if (S == 1) {
#pragma GCC unroll 5
      for (int kx = 0; kx < K; ++kx)
        acc[ky] = _mm512_fmadd_ps(wv[ky * K + kx], load_columns(rows[ky], c0 + kx, m.load[kx]), acc[ky]);
    } else {
#pragma GCC unroll 3
      for (int p = 0; p < (K + 1) / 2; ++p) {
        const __m512 lo = load_columns(rows[ky], c0 + 2 * p, m.load[2 * p]);
        const __m512 hi = load_columns(rows[ky], c0 + 2 * p + 16, m.load[2 * p + 1]);
        acc[ky] = _mm512_fmadd_ps(wv[ky * K + 2 * p], _mm512_permutex2var_ps(lo, even, hi), acc[ky]);
        if (2 * p + 1 < K)
          acc[ky] = _mm512_fmadd_ps(wv[ky * K + 2 * p + 1], _mm512_permutex2var_ps(lo, odd, hi), acc[ky]);
      }
    }
  }
#pragma GCC unroll 5
  for (int ky = 1; ky < K; ++ky) acc[0] = _mm512_add_ps(acc[0], acc[ky]);
  return acc[0];
}

// Relu and Clip (ReLU6) are applied in registers, rounding as activation.h does (max/min
// with the operands in this order keep a NaN and the sign of a zero as its comparisons do);
// the others run over the finished plane.
enum class InRegister { None, Relu, Clip };

template <int K, int S, InRegister A>
void direct_plane(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                  const Activation& activation) {
  __m512 wv[K * K];
#pragma GCC unroll 25
  for (int t = 0; t < K * K; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 bv = _mm512_set1_ps(bias);
  const __m512 lo = _mm512_set1_ps(A == InRegister::Clip ? activation.p0 : 0.0f);
  const __m512 hi = _mm512_set1_ps(activation.p1);
  const int64_t ow = g.out_w;
  // Masks for up to kChunk blocks at a time, computed once for all rows of the plane.
  constexpr int64_t kChunk = 16;
  BlockMasks masks[kChunk];
  for (int64_t first = 0; first < ow; first += 16 * kChunk) {
    const int64_t blocks = std::min<int64_t>(kChunk, (ow - first + 15) / 16);
    for (int64_t b = 0; b < blocks; ++b) masks[b] = block_masks<K, S>(g, first + 16 * b);
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const float* rows[K];
#pragma GCC unroll 5
      for (int ky = 0; ky < K; ++ky) {
        const int64_t iy = oy * S - g.pad_top + ky;
        rows[ky] = iy >= 0 && iy < g.in_h ? x + iy * g.in_w : nullptr;
      }
      float* yr = y + oy * ow;
      const float* zr = z ? z + oy * ow : nullptr;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t ox = first + 16 * b;
        const BlockMasks& m = masks[b];
        __m512 sum = block<K, S>(rows, wv, bv, ox * S - g.pad_left, m);
        if (zr) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m.out, zr + ox));  // z may be y: read first
        if (A != InRegister::None) sum = _mm512_max_ps(lo, sum);
        if (A == InRegister::Clip) sum = _mm512_min_ps(hi, sum);
        _mm512_mask_storeu_ps(yr + ox, m.out, sum);
      }
    }
  }
}

template <int K, int S>
void plane(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
           const Activation& activation) {
  switch (activation.kind) {
    case ActivationKind::None: return direct_plane<K, S, InRegister::None>(g, x, w, bias, z, y, activation);
    case ActivationKind::Relu: return direct_plane<K, S, InRegister::Relu>(g, x, w, bias, z, y, activation);
    case ActivationKind::Clip: return direct_plane<K, S, InRegister::Clip>(g, x, w, bias, z, y, activation);
    default:
      direct_plane<K, S, InRegister::None>(g, x, w, bias, z, y, activation);
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

}  // namespace edgert::cpu::depthwise

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
