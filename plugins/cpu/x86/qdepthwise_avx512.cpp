// The AVX-512 INT8 depthwise plane (fast/qdepthwise.h): the plane is copied, less its zero
// point, as floats into its column phases (16 pixels a vector; stride 2 splits even and odd
// bytes as the two halves of 16-bit lanes), then each output row is summed in up to 4 vectors
// of 16 outputs at once (one FMA chain each, the tap's weight broadcast once for all four) and
// requantised as the reference rounds.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "fast/qdepthwise.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")
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

void fill_phases(const Geometry& g, const uint8_t* x, int32_t x_zero_point, float* scratch) {
  const int64_t cols = phase_cols(g), plane = phase_rows(g) * cols;
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

// V vectors of 16 outputs of row oy from column ox0.
template <int V>
void row_vectors(const Geometry& g, const float* scratch, const float* w, int64_t oy, int64_t ox0, int32_t bias,
                 float multiplier, int32_t y_zero_point, uint8_t* y_row) {
  const int64_t cols = phase_cols(g), plane = phase_rows(g) * cols;
  __m512 acc[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const float* row = scratch + (oy * g.stride_h + ky * g.dilation_h) * cols + ox0;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t offset = kx * g.dilation_w;
      const float* src = row + (offset % g.stride_w) * plane + offset / g.stride_w;
      const __m512 wv = _mm512_set1_ps(w[ky * g.kernel_w + kx]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[v] = _mm512_fmadd_ps(_mm512_loadu_ps(src + 16 * v), wv, acc[v]);
    }
  }
  const __m512i b = _mm512_set1_epi32(bias), zp = _mm512_set1_epi32(y_zero_point);
  const __m512 scale = _mm512_set1_ps(multiplier);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(-y_zero_point));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(255 - y_zero_point));
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    // The float sum is a whole number: converting it back is exact, then the reference's int32
    // accumulator and its requantisation (see x86/qgemm_avx512vnni.cpp).
    const __m512i sum = _mm512_add_epi32(_mm512_cvtps_epi32(acc[v]), b);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), scale);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    _mm512_mask_cvtusepi32_storeu_epi8(y_row + ox0 + 16 * v, lanes16(g.out_w - ox0 - 16 * v),
                                       _mm512_add_epi32(_mm512_cvtps_epi32(f), zp));
  }
}

}  // namespace

void channel_avx512(const Geometry& g, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                    float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch) {
  fill_phases(g, x, x_zero_point, scratch);
  for (int64_t oy = 0; oy < g.out_h; ++oy) {
    uint8_t* y_row = y + oy * g.out_w;
    int64_t ox = 0;
    for (; ox + 64 <= g.out_w; ox += 64) row_vectors<4>(g, scratch, w, oy, ox, bias, multiplier, y_zero_point, y_row);
    switch ((g.out_w - ox + 15) / 16) {
      case 3: row_vectors<3>(g, scratch, w, oy, ox, bias, multiplier, y_zero_point, y_row); break;
      case 2: row_vectors<2>(g, scratch, w, oy, ox, bias, multiplier, y_zero_point, y_row); break;
      case 1: row_vectors<1>(g, scratch, w, oy, ox, bias, multiplier, y_zero_point, y_row); break;
      default: break;
    }
  }
}

}  // namespace edgert::cpu::qdepthwise

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
