// The Advanced SIMD INT8 depthwise plane (fast/qdepthwise.h), the AVX-512 design on vectors of
// 4: the plane is copied, less its zero point, as floats into its column phases (stride 2
// deinterleaved by ld2), then the outputs are summed in blocks of up to 2 rows x 4 vectors of 4,
// one fmla chain each (exact: the sums are integers below 2^24), and requantised as the
// reference rounds (fcvtns: half to even).
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>

#include "fast/qdepthwise.h"

namespace edgert::cpu::qdepthwise {

namespace {

constexpr int64_t kLanes = 4;

// 8 bytes less the zero point, as two vectors of 4 floats (exact).
inline void store_floats(uint8x8_t bytes, int16x8_t zero_point, float* dst) {
  const int16x8_t v = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(bytes)), zero_point);
  vst1q_f32(dst, vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))));
  vst1q_f32(dst + 4, vcvtq_f32_s32(vmovl_high_s16(v)));
}

void fill_phases(const Plan& plan, const uint8_t* x, int32_t x_zero_point, float* scratch) {
  const Geometry& g = plan.g;
  const int64_t cols = plan.cols, plane = plan.plane;
  const int16x8_t zp = vdupq_n_s16(static_cast<int16_t>(x_zero_point));
  for (int64_t iy = 0; iy < g.in_h; ++iy) {
    const uint8_t* src = x + iy * g.in_w;
    const int64_t row = (iy + g.pad_top) * cols;
    if (g.stride_w == 1) {
      float* dst = scratch + row + g.pad_left;
      int64_t ix = 0;
      for (; ix + 8 <= g.in_w; ix += 8) store_floats(vld1_u8(src + ix), zp, dst + ix);
      for (; ix < g.in_w; ++ix) dst[ix] = static_cast<float>(static_cast<int32_t>(src[ix]) - x_zero_point);
      continue;
    }
    // Stride 2: input column ix lands at padded column ix + pad_left, phase (ix + pad_left) % 2.
    const int64_t even_phase = g.pad_left % 2, odd_phase = (g.pad_left + 1) % 2;
    float* even = scratch + even_phase * plane + row + g.pad_left / 2;
    float* odd = scratch + odd_phase * plane + row + (g.pad_left + 1) / 2;
    int64_t ix = 0;
    for (; ix + 16 <= g.in_w; ix += 16) {
      const uint8x8x2_t pairs = vld2_u8(src + ix);
      store_floats(pairs.val[0], zp, even + ix / 2);
      store_floats(pairs.val[1], zp, odd + ix / 2);
    }
    for (; ix < g.in_w; ++ix)
      (ix % 2 ? odd : even)[ix / 2] = static_cast<float>(static_cast<int32_t>(src[ix]) - x_zero_point);
  }
}

// R rows from oy times V vectors of 4 outputs from column ox0: R x V independent fmla chains.
template <int R, int V>
void row_block(const Plan& plan, const float* scratch, const float* w, int64_t oy, int64_t ox0, int32_t bias,
               float multiplier, int32_t y_zero_point, uint8_t* y) {
  const Geometry& g = plan.g;
  float32x4_t acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = vdupq_n_f32(0.0f);
  const int64_t row_step = g.stride_h * plan.cols;
  const float* corner = scratch + oy * row_step + ox0;
  const int64_t taps = g.kernel_h * g.kernel_w;
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = corner + plan.tap_offsets[t];
    const float32x4_t wv = vdupq_n_f32(w[t]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = vfmaq_f32(acc[r][v], vld1q_f32(src + r * row_step + kLanes * v), wv);
  }
  const int32x4_t b = vdupq_n_s32(bias), zp = vdupq_n_s32(y_zero_point);
  const float32x4_t scale = vdupq_n_f32(multiplier);
  const float32x4_t lo = vdupq_n_f32(static_cast<float>(-y_zero_point));
  const float32x4_t hi = vdupq_n_f32(static_cast<float>(255 - y_zero_point));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      // The float sum is a whole number: converting it back is exact, then the reference's int32
      // accumulator and its requantisation. fmaxnm returns the number beside a quiet NaN (a NaN
      // product becomes the lower bound, as saturate_round's 0).
      const int32x4_t sum = vaddq_s32(vcvtnq_s32_f32(acc[r][v]), b);
      float32x4_t f = vmulq_f32(vcvtq_f32_s32(sum), scale);
      f = vminnmq_f32(vmaxnmq_f32(f, lo), hi);
      const uint16x4_t words = vqmovun_s32(vaddq_s32(vcvtnq_s32_f32(f), zp));
      const uint8x8_t bytes = vqmovn_u16(vcombine_u16(words, words));
      const int64_t column = ox0 + kLanes * v;
      uint8_t lanes[8];
      vst1_u8(lanes, bytes);
      const int64_t count = g.out_w - column < kLanes ? g.out_w - column : kLanes;
      std::memcpy(y + (oy + r) * g.out_w + column, lanes, static_cast<size_t>(count));
    }
}

}  // namespace

void channel_neon(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
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

#endif
