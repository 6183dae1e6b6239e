// The AVX-512 INT8 depthwise plane (fast/qdepthwise.h): the plane is copied, less its zero
// point, as floats into its column phases (16 pixels a vector; stride 2 splits even and odd
// bytes as the two halves of 16-bit lanes), then the outputs are summed in blocks of up to 4
// vectors of 16 (4 rows of one vector on planes 16 wide or less), one FMA chain each, the tap's
// weight broadcast once for all, and requantised as the reference rounds.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "fast/qdepthwise.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::qdepthwise {

namespace {

inline __mmask16 lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u);
}

inline __m512 to_float(__m512i bytes_as_int32, __m512i zero_point) {
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(bytes_as_int32, zero_point));
}

void fill_phases(const Plan& plan, const uint8_t* x, int32_t x_zero_point, float* scratch) {
  const Geometry& g = plan.g;
  const int64_t cols = plan.cols, plane = plan.plane;
  const __m512i zp = _mm512_set1_epi32(x_zero_point);
  for (int64_t iy = 0; iy < g.in_h; ++iy) {
    const uint8_t* src = x + iy * g.in_w;
    const int64_t row = (iy + g.pad_top) * cols;
    if (g.stride_w == 1) {
      float* dst = scratch + row + g.pad_left;
      for (int64_t ix = 0; ix < g.in_w; ix += 16) {
        const __mmask16 m = lanes16(g.in_w - ix);
        _mm512_mask_storeu_ps(dst + ix, m, to_float(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src + ix)), zp));
      }
      continue;
    }
    // Stride 2: input column ix lands at padded column ix + pad_left, phase (ix + pad_left) % 2.
    const int64_t even_phase = g.pad_left % 2, odd_phase = (g.pad_left + 1) % 2;
    float* even = scratch + even_phase * plane + row + g.pad_left / 2;
    float* odd = scratch + odd_phase * plane + row + (g.pad_left + 1) / 2;
    for (int64_t ix = 0; ix < g.in_w; ix += 32) {
      const int64_t left = std::min<int64_t>(32, g.in_w - ix);
      const __mmask32 load = left >= 32 ? ~0u : ((1u << left) - 1u);
      const __m512i pairs = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8(load, src + ix));
      const __m512i lo = _mm512_and_si512(pairs, _mm512_set1_epi32(0xFF)), hi = _mm512_srli_epi32(pairs, 8);
      _mm512_mask_storeu_ps(even + ix / 2, lanes16((left + 1) / 2), to_float(lo, zp));
      _mm512_mask_storeu_ps(odd + ix / 2, lanes16(left / 2), to_float(hi, zp));
    }
  }
}

// R rows from oy times V vectors of 16 outputs from column ox0: R x V independent FMA chains, so
// narrow planes (a 14-wide row is one vector) do not wait on one chain's latency.
template <int R, int V>
void row_block(const Plan& plan, const float* scratch, const float* w, int64_t oy, int64_t ox0, int32_t bias,
               float multiplier, int32_t y_zero_point, uint8_t* y) {
  const Geometry& g = plan.g;
  __m512 acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t row_step = g.stride_h * plan.cols;
  const float* corner = scratch + oy * row_step + ox0;
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = corner + plan.tap_offsets[t];
    const __m512 wv = _mm512_set1_ps(w[t]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_fmadd_ps(_mm512_loadu_ps(src + r * row_step + 16 * v), wv, acc[r][v]);
  }
  const __m512i b = _mm512_set1_epi32(bias), zp = _mm512_set1_epi32(y_zero_point);
  const __m512 scale = _mm512_set1_ps(multiplier);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(-y_zero_point));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(255 - y_zero_point));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      // The float sum is a whole number: converting it back is exact, then the reference's int32
      // accumulator and its requantisation (see x86/qgemm_avx512vnni.cpp).
      const __m512i sum = _mm512_add_epi32(_mm512_cvtps_epi32(acc[r][v]), b);
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), scale);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      _mm512_mask_cvtusepi32_storeu_epi8(y + (oy + r) * g.out_w + ox0 + 16 * v, lanes16(g.out_w - ox0 - 16 * v),
                                         _mm512_add_epi32(_mm512_cvtps_epi32(f), zp));
    }
}

}  // namespace

void channel_avx512(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                    float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch) {
  const Geometry& g = plan.g;
  fill_phases(plan, x, x_zero_point, scratch);
  const int64_t wide = g.out_w / 64 * 64, tail = (g.out_w - wide + 15) / 16;
  for (int64_t oy = 0; oy < g.out_h; ++oy)
    for (int64_t ox = 0; ox < wide; ox += 64)
      row_block<1, 4>(plan, scratch, w, oy, ox, bias, multiplier, y_zero_point, y);
  int64_t oy = 0;
  if (tail == 1)
    for (; oy + 4 <= g.out_h; oy += 4) row_block<4, 1>(plan, scratch, w, oy, wide, bias, multiplier, y_zero_point, y);
  if (tail == 2)
    for (; oy + 2 <= g.out_h; oy += 2) row_block<2, 2>(plan, scratch, w, oy, wide, bias, multiplier, y_zero_point, y);
  for (; oy < g.out_h; ++oy) {
    switch (tail) {
      case 4: row_block<1, 4>(plan, scratch, w, oy, wide, bias, multiplier, y_zero_point, y); break;
      case 3: row_block<1, 3>(plan, scratch, w, oy, wide, bias, multiplier, y_zero_point, y); break;
      case 2: row_block<1, 2>(plan, scratch, w, oy, wide, bias, multiplier, y_zero_point, y); break;
      case 1: row_block<1, 1>(plan, scratch, w, oy, wide, bias, multiplier, y_zero_point, y); break;
      default: break;
    }
  }
}

}  // namespace edgert::cpu::qdepthwise

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
