// The AVX2 INT8 depthwise plane (fast/qdepthwise.h), the AVX-512 design on vectors of 8: the
// plane is copied, less its zero point, as floats into its column phases (stride 2 splits even
// and odd bytes as the two halves of 16-bit lanes), then the outputs are summed in blocks of up
// to 2 rows x 4 vectors of 8, one FMA chain each (exact: the sums are integers below 2^24), the
// tap's weight broadcast once for all, and requantised as the reference rounds.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "fast/qdepthwise.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx2,fma")

namespace edgert::cpu::qdepthwise {

namespace {

constexpr int64_t kLanes = 8;

inline __m256 to_float(__m256i bytes_as_int32, __m256i zero_point) {
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(bytes_as_int32, zero_point));
}

void fill_phases(const Plan& plan, const uint8_t* x, int32_t x_zero_point, float* scratch) {
  const Geometry& g = plan.g;
  const int64_t cols = plan.cols, plane = plan.plane;
  const __m256i zp = _mm256_set1_epi32(x_zero_point);
  for (int64_t iy = 0; iy < g.in_h; ++iy) {
    const uint8_t* src = x + iy * g.in_w;
    const int64_t row = (iy + g.pad_top) * cols;
    if (g.stride_w == 1) {
      float* dst = scratch + row + g.pad_left;
      int64_t ix = 0;
      for (; ix + 8 <= g.in_w; ix += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + ix));
        _mm256_storeu_ps(dst + ix, to_float(_mm256_cvtepu8_epi32(bytes), zp));
      }
      for (; ix < g.in_w; ++ix) dst[ix] = static_cast<float>(static_cast<int32_t>(src[ix]) - x_zero_point);
      continue;
    }
    // Stride 2: input column ix lands at padded column ix + pad_left, phase (ix + pad_left) % 2.
    const int64_t even_phase = g.pad_left % 2, odd_phase = (g.pad_left + 1) % 2;
    float* even = scratch + even_phase * plane + row + g.pad_left / 2;
    float* odd = scratch + odd_phase * plane + row + (g.pad_left + 1) / 2;
    int64_t ix = 0;
    for (; ix + 16 <= g.in_w; ix += 16) {
      const __m256i pairs = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + ix)));
      _mm256_storeu_ps(even + ix / 2, to_float(_mm256_and_si256(pairs, _mm256_set1_epi32(0xFF)), zp));
      _mm256_storeu_ps(odd + ix / 2, to_float(_mm256_srli_epi32(pairs, 8), zp));
    }
    for (; ix < g.in_w; ++ix)
      (ix % 2 ? odd : even)[ix / 2] = static_cast<float>(static_cast<int32_t>(src[ix]) - x_zero_point);
  }
}

// `count` (1 to 8) bytes of 8 int32 within [0, 255].
inline void store_bytes(__m256i v, uint8_t* y, int64_t count) {
  const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i bytes = _mm_packus_epi16(words, words);
  if (count >= kLanes) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y), bytes);
    return;
  }
  alignas(16) uint8_t tail[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(tail), bytes);
  std::memcpy(y, tail, static_cast<size_t>(count));
}

// R rows from oy times V vectors of 8 outputs from column ox0: R x V independent FMA chains.
template <int R, int V>
void row_block(const Plan& plan, const float* scratch, const float* w, int64_t oy, int64_t ox0, int32_t bias,
               float multiplier, int32_t y_zero_point, uint8_t* y) {
  const Geometry& g = plan.g;
  __m256 acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  const int64_t row_step = g.stride_h * plan.cols;
  const float* corner = scratch + oy * row_step + ox0;
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = corner + plan.tap_offsets[t];
    const __m256 wv = _mm256_broadcast_ss(w + t);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm256_fmadd_ps(_mm256_loadu_ps(src + r * row_step + kLanes * v), wv, acc[r][v]);
  }
  const __m256i b = _mm256_set1_epi32(bias), zp = _mm256_set1_epi32(y_zero_point);
  const __m256 scale = _mm256_set1_ps(multiplier);
  const __m256 lo = _mm256_set1_ps(static_cast<float>(-y_zero_point));
  const __m256 hi = _mm256_set1_ps(static_cast<float>(255 - y_zero_point));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      // The float sum is a whole number: converting it back is exact, then the reference's int32
      // accumulator and its requantisation (a NaN product becomes the lower bound: vmaxps returns
      // its second operand then).
      const __m256i sum = _mm256_add_epi32(_mm256_cvtps_epi32(acc[r][v]), b);
      __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), scale);
      f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
      const int64_t column = ox0 + kLanes * v;
      store_bytes(_mm256_add_epi32(_mm256_cvtps_epi32(f), zp), y + (oy + r) * g.out_w + column, g.out_w - column);
    }
}

}  // namespace

void channel_avx2(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                  float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch) {
  const Geometry& g = plan.g;
  fill_phases(plan, x, x_zero_point, scratch);
  constexpr int64_t kWide = 4 * kLanes;
  const int64_t wide = g.out_w / kWide * kWide, tail = (g.out_w - wide + kLanes - 1) / kLanes;
  if (wide > 0) {
    int64_t oy = 0;
    for (; oy + 2 <= g.out_h; oy += 2)
      for (int64_t ox = 0; ox < wide; ox += kWide)
        row_block<2, 4>(plan, scratch, w, oy, ox, bias, multiplier, y_zero_point, y);
    for (; oy < g.out_h; ++oy)
      for (int64_t ox = 0; ox < wide; ox += kWide)
        row_block<1, 4>(plan, scratch, w, oy, ox, bias, multiplier, y_zero_point, y);
  }
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

EDGERT_ISA_REGION_END
#endif
