// The AVX-512 VNNI tile of qgemm: 12 rows x 32 output channels in 24 zmm accumulators. Each
// step broadcasts 4 bytes of one row of A (4 consecutive k) against a packed weight group, 16
// channels x 4 k per vector; vpdpbusd multiplies u8 by s8 and adds the 4 products to each int32
// lane without saturating, so the sums are exact as the reference's (modulo 2^32). The epilogue
// runs on the accumulators in registers. Compiled for AVX-512 VNNI through the target pragma
// only; qgemm calls it only when the CPU reports avx512vnni.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "gemm/qgemm.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vnni")
// GCC 12 takes the masked intrinsics' undefined pass-through operand for an uninitialized read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::gemm {

namespace {

inline __m512i broadcast_4_bytes(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// The first `bytes` (0 to 3) bytes at p, the others zero: a row's last, partial k group,
// without reading past the row (the weights of the missing k are zero in the packing).
inline __m512i broadcast_partial(const uint8_t* p, int64_t bytes) {
  int32_t v = 0;
  std::memcpy(&v, p, static_cast<size_t>(bytes));
  return _mm512_set1_epi32(v);
}

inline __mmask16 lanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// R rows x V vectors of 16 channels. Every loop over r and v is unrolled, the epilogue's too: with
// one index not constant GCC kept acc[][] in memory and copied all 24 accumulators to the stack
// on every k step (at 40% of the speed).
template <int R, int V>
void tile(const PackedQWeights& w, const QActivations& a, int64_t i0, int64_t j0, int64_t cols, const QOutput& y) {
  __mmask16 mask[V];
  __m512i init[V];
  const __m512i neg_zero_point = _mm512_set1_epi32(-a.zero_point);
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    mask[v] = lanes(cols - 16 * v);
    const __m512i sums = _mm512_loadu_si512(w.column_sums.data() + j0 + 16 * v);
    const __m512i bias = y.bias ? _mm512_maskz_loadu_epi32(mask[v], y.bias + j0 + 16 * v) : _mm512_setzero_si512();
    init[v] = _mm512_add_epi32(bias, _mm512_mullo_epi32(neg_zero_point, sums));
  }
  __m512i acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = init[v];

  const uint8_t* rows = a.data + i0 * a.row_stride;
  const int64_t lda = a.row_stride, full_groups = w.k / 4, tail = w.k % 4;
  const int8_t* panel = w.data.data() + (j0 / kQgemmPanelColumns) * w.panel_bytes();
  for (int64_t g = 0; g < full_groups; ++g) {
    __m512i b[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512(panel + g * 4 * kQgemmPanelColumns + 64 * v);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512i av = broadcast_4_bytes(rows + r * lda + 4 * g);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, b[v]);
    }
  }
  if (tail) {
    __m512i b[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512(panel + full_groups * 4 * kQgemmPanelColumns + 64 * v);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512i av = broadcast_partial(rows + r * lda + 4 * full_groups, tail);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, b[v]);
    }
  }

  switch (y.kind) {
    case QOutput::Kind::Int32: {
      int32_t* out = static_cast<int32_t*>(y.data) + i0 * y.row_stride + j0;
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) _mm512_mask_storeu_epi32(out + r * y.row_stride + 16 * v, mask[v], acc[r][v]);
      return;
    }
    case QOutput::Kind::Float32: {
      float* out = static_cast<float*>(y.data) + i0 * y.row_stride + j0;
      const __m512 lo = _mm512_set1_ps(y.f_min), hi = _mm512_set1_ps(y.f_max);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        const __m512 scale = _mm512_maskz_loadu_ps(mask[v], y.scale + j0 + 16 * v);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
          __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), scale);
          f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
          _mm512_mask_storeu_ps(out + r * y.row_stride + 16 * v, mask[v], f);
        }
      }
      return;
    }
    case QOutput::Kind::Uint8: {
      uint8_t* out = static_cast<uint8_t*>(y.data) + i0 * y.row_stride + j0;
      // As the reference: clamp to whole-number bounds, round half to even (the default MXCSR
      // mode of vcvtps2dq), add the zero point; the result is in [q_min, q_max], so the
      // saturating narrowing store changes nothing.
      const __m512 lo = _mm512_set1_ps(static_cast<float>(y.q_min - y.zero_point));
      const __m512 hi = _mm512_set1_ps(static_cast<float>(y.q_max - y.zero_point));
      const __m512i zero_point = _mm512_set1_epi32(y.zero_point);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        const __m512 scale = _mm512_maskz_loadu_ps(mask[v], y.scale + j0 + 16 * v);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
          __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), scale);
          f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
          const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zero_point);
          _mm512_mask_cvtusepi32_storeu_epi8(out + r * y.row_stride + 16 * v, mask[v], q);
        }
      }
      return;
    }
  }
}

using TileFn = void (*)(const PackedQWeights&, const QActivations&, int64_t, int64_t, int64_t, const QOutput&);

}  // namespace

void qgemm_u8s8_12x32_avx512vnni(const PackedQWeights& w, const QActivations& a, int64_t i0, int64_t rows,
                                  int64_t j0, int64_t cols, const QOutput& y) {
  // Edge tiles (rows of M past the last multiple of 12, a last panel of 16 channels or fewer)
  // get their own unrolled instance: a row loop not known at compile time would keep the
  // accumulators in memory.
  static constexpr TileFn kTiles[kQgemmTileRows][2] = {
      {tile<1, 1>, tile<1, 2>},   {tile<2, 1>, tile<2, 2>},   {tile<3, 1>, tile<3, 2>},
      {tile<4, 1>, tile<4, 2>},   {tile<5, 1>, tile<5, 2>},   {tile<6, 1>, tile<6, 2>},
      {tile<7, 1>, tile<7, 2>},   {tile<8, 1>, tile<8, 2>},   {tile<9, 1>, tile<9, 2>},
      {tile<10, 1>, tile<10, 2>}, {tile<11, 1>, tile<11, 2>}, {tile<12, 1>, tile<12, 2>}};
  kTiles[rows - 1][cols > 16 ? 1 : 0](w, a, i0, j0, cols, y);
}

}  // namespace edgert::cpu::gemm

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
