// The aarch64 families of qgemm (NCHW form). Both read the stored 12-row weight panels as they
// are (4 bytes of k per row per group) and tile 12 rows x 8 pixels in 24 int32x4 accumulators.
//
// NEON (ARMv8.0, e.g. Cortex-A72): activations packed as int16 rows of the panel's 32 pixels;
// the weights of a group are widened in registers (sxtl: one vector holds 2 rows x 4 k), and
// smlal by element multiplies 4 (or, with smlal2, the upper 4) pixels of one k by one row's
// weight into int32 lanes: every product (at most 255 * 128) and sum is exact.
//
// Dot product (ARMv8.2 sdot, e.g. Cortex-A76/A78): sdot takes s8 on both sides, so activations
// are packed as b XOR 0x80, the s8 value b - 128, in groups of 4 k per pixel; sdot by element
// broadcasts one row's 4 weight bytes (one vector holds 4 rows of a group) over 4 pixels. The
// kernel sums (b - 128) w, and qgemm's row bias adds 128 sum w back (activation_offset), exact
// modulo 2^32 as the reference. Only that part of the file is compiled for armv8.2-a+dotprod;
// qgemm calls it only when the kernel reports asimddp.
//
// The requantisation is the reference's: clamp to whole-number bounds (fmaxnm makes a NaN
// product the lower bound, as saturate_round's 0), round half to even (fcvtns), add the zero
// point, narrow.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "gemm/qgemm.h"

namespace edgert::cpu::gemm {

namespace {

constexpr int64_t kTilePixels = 8;

// 32 bytes of B's row `row` for the panel: zero past `count` pixels and for rows past k (a
// partial last group), read through a copy where a full-width load would leave the row.
inline uint8x16x2_t load_row(const QPixelRows& rows, int64_t row, int64_t k, int64_t count) {
  if (row >= k) return {{vdupq_n_u8(0), vdupq_n_u8(0)}};
  const uint8_t* src = rows.data + row * rows.stride;
  if (count == kQgemmPanelPixels) return {{vld1q_u8(src), vld1q_u8(src + 16)}};
  uint8_t tail[kQgemmPanelPixels] = {};
  std::memcpy(tail, src, static_cast<size_t>(count));
  return {{vld1q_u8(tail), vld1q_u8(tail + 16)}};
}

// 8 requantised bytes of one row from its two accumulators (pixels 0-3, 4-7).
inline uint8x8_t requantize_8(int32x4_t acc0, int32x4_t acc1, float32x4_t scale, float32x4_t lo, float32x4_t hi,
                              int32x4_t zp) {
  float32x4_t f0 = vmulq_f32(vcvtq_f32_s32(acc0), scale), f1 = vmulq_f32(vcvtq_f32_s32(acc1), scale);
  f0 = vminq_f32(vmaxnmq_f32(f0, lo), hi);
  f1 = vminq_f32(vmaxnmq_f32(f1, lo), hi);
  const int32x4_t q0 = vaddq_s32(vcvtnq_s32_f32(f0), zp), q1 = vaddq_s32(vcvtnq_s32_f32(f1), zp);
  return vqmovn_u16(vcombine_u16(vqmovun_s32(q0), vqmovun_s32(q1)));
}

// The tile's rows (< `rows` stored) requantised into Y; `pixels` (<= 8) of each row stored.
void store_tile(const int32x4_t (&acc)[kQgemmPanelRows][2], int64_t rows, const float* multiplier, int64_t pixels,
                uint8_t* out, int64_t row_stride, int32_t zero_point) {
  const float32x4_t lo = vdupq_n_f32(static_cast<float>(-zero_point));
  const float32x4_t hi = vdupq_n_f32(static_cast<float>(255 - zero_point));
  const int32x4_t zp = vdupq_n_s32(zero_point);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8x8_t bytes = requantize_8(acc[r][0], acc[r][1], vdupq_n_f32(multiplier[r]), lo, hi, zp);
    if (pixels == kTilePixels) {
      vst1_u8(out + r * row_stride, bytes);
    } else {
      uint8_t tail[kTilePixels];
      vst1_u8(tail, bytes);
      std::memcpy(out + r * row_stride, tail, static_cast<size_t>(pixels));
    }
  }
}

// One k of a group for the 12 rows: smlal (pixels 0-3) and smlal2 (4-7) by the weight lane of
// row R, k Kk (vector R / 2 holds rows 2i, 2i + 1 as lanes 0-3, 4-7).
template <int Kk, int... R>
inline void multiply_k(int32x4_t (&acc)[kQgemmPanelRows][2], int16x8_t pixels, const int16x8_t (&weights)[6],
                       std::integer_sequence<int, R...>) {
  ((acc[R][0] = vmlal_laneq_s16(acc[R][0], vget_low_s16(pixels), weights[R / 2], 4 * (R % 2) + Kk),
    acc[R][1] = vmlal_high_laneq_s16(acc[R][1], pixels, weights[R / 2], 4 * (R % 2) + Kk)),
   ...);
}

void tile_12x8_neon(const int8_t* weights, int64_t groups, const int16_t* packed, int64_t rows,
                    const int32_t* bias, const float* multiplier, int64_t pixels, uint8_t* out, int64_t row_stride,
                    int32_t zero_point) {
  int32x4_t acc[kQgemmPanelRows][2];
  for (int r = 0; r < kQgemmPanelRows; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(r < rows ? bias[r] : 0);
  using Rows = std::make_integer_sequence<int, kQgemmPanelRows>;
  for (int64_t g = 0; g < groups; ++g) {
    const int8_t* wg = weights + g * 4 * kQgemmPanelRows;
    const int8x16_t w01 = vld1q_s8(wg), w23 = vld1q_s8(wg + 16), w45 = vld1q_s8(wg + 32);
    const int16x8_t wv[6] = {vmovl_s8(vget_low_s8(w01)), vmovl_high_s8(w01), vmovl_s8(vget_low_s8(w23)),
                             vmovl_high_s8(w23),         vmovl_s8(vget_low_s8(w45)), vmovl_high_s8(w45)};
    const int16_t* pg = packed + g * 4 * kQgemmPanelPixels;
    multiply_k<0>(acc, vld1q_s16(pg), wv, Rows{});
    multiply_k<1>(acc, vld1q_s16(pg + kQgemmPanelPixels), wv, Rows{});
    multiply_k<2>(acc, vld1q_s16(pg + 2 * kQgemmPanelPixels), wv, Rows{});
    multiply_k<3>(acc, vld1q_s16(pg + 3 * kQgemmPanelPixels), wv, Rows{});
  }
  store_tile(acc, rows, multiplier, pixels, out, row_stride, zero_point);
}

}  // namespace

void qgemm_pack_pixels_neon(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                            uint8_t* packed) {
  const QPixelRows rows = qgemm_pixel_rows(b, k, p0, count, scratch);
  int16_t* out = reinterpret_cast<int16_t*>(packed);
  for (int64_t r = 0; r < (k + 3) / 4 * 4; ++r) {
    const uint8x16x2_t row = load_row(rows, r, k, count);
    int16_t* dst = out + r * kQgemmPanelPixels;
    vst1q_s16(dst, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(row.val[0]))));
    vst1q_s16(dst + 8, vreinterpretq_s16_u16(vmovl_high_u8(row.val[0])));
    vst1q_s16(dst + 16, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(row.val[1]))));
    vst1q_s16(dst + 24, vreinterpretq_s16_u16(vmovl_high_u8(row.val[1])));
  }
}

void qgemm_panel_12x8_neon(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed,
                           int64_t p0, int64_t count, const int32_t* row_bias, const QRequant& y) {
  const int16_t* pixels = reinterpret_cast<const int16_t*>(packed);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t r0 = panel * kQgemmPanelRows, rows = std::min(kQgemmPanelRows, w.m - r0);
    for (int64_t t = 0; t < count; t += kTilePixels)
      tile_12x8_neon(w.panel(panel), w.groups(), pixels + t, rows, row_bias + r0, y.multiplier + r0,
                     std::min(kTilePixels, count - t), y.data + r0 * y.row_stride + p0 + t, y.row_stride,
                     y.zero_point);
  }
}

void qgemm_pack_pixels_dotprod(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                               uint8_t* packed) {
  const QPixelRows rows = qgemm_pixel_rows(b, k, p0, count, scratch);
  const uint8x16_t bias = vdupq_n_u8(0x80);
  for (int64_t g = 0; g < (k + 3) / 4; ++g) {
    uint8x16x2_t r[4];
    for (int j = 0; j < 4; ++j) r[j] = load_row(rows, 4 * g + j, k, count);
    uint8_t* dst = packed + g * 4 * kQgemmPanelPixels;
    // vst4 interleaves the 4 rows: 4 bytes of k per pixel.
    for (int half = 0; half < 2; ++half) {
      const uint8x16x4_t quad = {{veorq_u8(r[0].val[half], bias), veorq_u8(r[1].val[half], bias),
                                  veorq_u8(r[2].val[half], bias), veorq_u8(r[3].val[half], bias)}};
      vst4q_u8(dst + 64 * half, quad);
    }
  }
}

}  // namespace edgert::cpu::gemm

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")

namespace edgert::cpu::gemm {

namespace {

// One group for the 12 rows: sdot of 4 pixels x 4 k by the 4 weight bytes of row R (lane R % 4
// of vector R / 4), for both halves of the tile.
template <int... R>
inline void dot_group(int32x4_t (&acc)[kQgemmPanelRows][2], int8x16_t pixels0, int8x16_t pixels1,
                      const int8x16_t (&weights)[3], std::integer_sequence<int, R...>) {
  ((acc[R][0] = vdotq_laneq_s32(acc[R][0], pixels0, weights[R / 4], R % 4),
    acc[R][1] = vdotq_laneq_s32(acc[R][1], pixels1, weights[R / 4], R % 4)),
   ...);
}

void tile_12x8_dotprod(const int8_t* weights, int64_t groups, const int8_t* packed, int64_t rows,
                       const int32_t* bias, const float* multiplier, int64_t pixels, uint8_t* out,
                       int64_t row_stride, int32_t zero_point) {
  int32x4_t acc[kQgemmPanelRows][2];
  for (int r = 0; r < kQgemmPanelRows; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(r < rows ? bias[r] : 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int8_t* wg = weights + g * 4 * kQgemmPanelRows;
    const int8x16_t wv[3] = {vld1q_s8(wg), vld1q_s8(wg + 16), vld1q_s8(wg + 32)};
    const int8_t* pg = packed + g * 4 * kQgemmPanelPixels;
    dot_group(acc, vld1q_s8(pg), vld1q_s8(pg + 16), wv, std::make_integer_sequence<int, kQgemmPanelRows>{});
  }
  store_tile(acc, rows, multiplier, pixels, out, row_stride, zero_point);
}

}  // namespace

void qgemm_panel_12x8_dotprod(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed,
                              int64_t p0, int64_t count, const int32_t* row_bias, const QRequant& y) {
  const int8_t* pixels = reinterpret_cast<const int8_t*>(packed);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t r0 = panel * kQgemmPanelRows, rows = std::min(kQgemmPanelRows, w.m - r0);
    for (int64_t t = 0; t < count; t += kTilePixels)
      tile_12x8_dotprod(w.panel(panel), w.groups(), pixels + 4 * t, rows, row_bias + r0, y.multiplier + r0,
                        std::min(kTilePixels, count - t), y.data + r0 * y.row_stride + p0 + t, y.row_stride,
                        y.zero_point);
  }
}

}  // namespace edgert::cpu::gemm

#pragma GCC pop_options
#endif
