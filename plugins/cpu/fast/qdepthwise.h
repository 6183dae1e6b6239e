// INT8 depthwise convolution (QLinearConv with group == C == M), one u8 channel plane per call:
//   acc = bias + sum_taps (x - x_zero_point) w        (int32, exact)
//   y   = clamp(round_half_even(float(acc) * multiplier) + y_zero_point, 0, 255)
// bit-exact with the reference QLinearConv. The sums are computed in float32, exactly: every
// product (x - zx) w is an integer of at most 255 x 128 in magnitude, and 49 of them (7x7) stay
// below 2^24, where float32 holds every integer; so FMA's order does not matter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace edgert::cpu::qdepthwise {

struct Geometry {
  int64_t in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top,
      pad_left;
};

// Shapes whose float sums are exact (at most 49 taps) with stride 1 or 2 on both axes.
inline bool applies(const Geometry& g) {
  return g.kernel_h * g.kernel_w <= 49 && (g.stride_h == 1 || g.stride_h == 2) && (g.stride_w == 1 || g.stride_w == 2);
}

// The padded plane, split into stride_w column phases (phase q holds padded columns q, q + s,
// ...), so every tap of 16 neighbouring outputs is one unaligned load: rows x cols floats each.
// The AVX2 and NEON planes (vectors of 8 and 4 outputs) read within the same bounds.
inline int64_t phase_rows(const Geometry& g) {
  const int64_t needed = (g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1;
  return needed > g.in_h + g.pad_top ? needed : g.in_h + g.pad_top;
}
inline int64_t phase_cols(const Geometry& g) {
  const int64_t taps = (g.out_w + 15) / 16 * 16 + (g.kernel_w - 1) * g.dilation_w / g.stride_w + 1;
  const int64_t image = (g.in_w + g.pad_left + g.stride_w - 1) / g.stride_w + 1;
  return ((taps > image ? taps : image) + 15) / 16 * 16;
}
// Floats of scratch one thread needs (a multiple of 16).
inline int64_t scratch_floats(const Geometry& g) { return g.stride_w * phase_rows(g) * phase_cols(g); }

// Clears the padding of `scratch` (all of it); channel_avx512 only writes the image's part, so
// one clear serves every channel of the same geometry.
inline void clear_scratch(const Geometry& g, float* scratch) {
  std::memset(scratch, 0, static_cast<size_t>(scratch_floats(g)) * sizeof(float));
}

// What every plane of one geometry shares, worked out once (prepare), so the row loops divide
// nothing: the phases' sizes and, per tap, its offset in the scratch from the window's corner.
struct Plan {
  Geometry g{};
  int64_t cols = 0, plane = 0;  // phase_cols; floats per phase
  int64_t tap_offsets[49] = {};
};
inline Plan make_plan(const Geometry& g) {
  Plan p;
  p.g = g;
  p.cols = phase_cols(g);
  p.plane = phase_rows(g) * p.cols;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky)
    for (int64_t kx = 0; kx < g.kernel_w && ky * g.kernel_w + kx < 49; ++kx) {
      const int64_t offset = kx * g.dilation_w;
      p.tap_offsets[ky * g.kernel_w + kx] =
          ky * g.dilation_h * p.cols + (offset % g.stride_w) * p.plane + offset / g.stride_w;
    }
  return p;
}

// The integer family (x86/qdepthwise_vnni_avx512.cpp). For 16 outputs and one kernel row, 64
// bytes of the input row are loaded, columns outside the image reading as x_zero_point: through
// the load's mask, or (planes of several vectors a row, or 5 to 8 taps wide) from a copy of the
// plane whose rows are padded with x_zero_point, masked loads costing more than the sums on
// some cores (Zen 4) where a row is loaded many times. vpermb lays out [16 outputs][4 taps] and
// one vpdpbusd adds 4 products per lane against that row's 4 weights (zero past kernel_w):
// acc = bias - x_zero_point * sum(w) + sum x w, exact in int32 as the reference's sum. Planes at
// most 8 wide hold two output rows per vector (vpermt2b over both input rows).
struct VnniPlan {
  Geometry g{};
  int rows_per_vector = 1;    // 2 when out_w <= 8
  int64_t chunks = 1;         // ceil(kernel_w / 4): weights of 4 taps per vpdpbusd
  int64_t blocks = 0;         // vectors of 16 (or 2 x 8) outputs along a row
  struct Load {
    int64_t column;           // first input column read (may be negative)
    uint64_t mask;            // bytes of the 64 inside the image row
  };
  std::vector<Load> loads;    // [blocks][chunks]
  // copy_rows: the plane is read from padded rows in the thread's scratch, image column ix of
  // row iy at iy * row_stride + row_left + ix, every load's 64 bytes inside the row. Otherwise
  // in place (row_stride in_w, row_left 0), with masked loads.
  bool copy_rows = false;
  // 5x5 (dilation_h 1, one vector a row): the fifth column's taps of two neighbouring kernel
  // rows share one vpdpbusd (pair_index: vpermt2b of the two rows' loads), not one each.
  bool paired_last_tap = false;
  uint8_t pair_index[64] = {};
  int64_t row_left = 0, row_stride = 0;
  size_t scratch_bytes() const { return copy_rows ? static_cast<size_t>(g.in_h * row_stride) : 0; }
  uint8_t index[64] = {};     // vpermb / vpermt2b byte selection
  // One vector a row: output rows are computed kVnniRows at a time, walking the input rows they
  // read once each (an input row serves up to kernel_h of them: one vpermb, several vpdpbusd).
  // row_taps[j * kVnniRows + r]: the kernel row by which input row j of the walk reaches output
  // row r of the block, or -1.
  static constexpr int kVnniRows = 4;
  int64_t walk = 0;                 // input rows per block of kVnniRows output rows
  std::vector<int8_t> row_taps;     // [walk][kVnniRows]
};
// Shapes the integer family takes: stride_w 1 or 2 and a window of 16 outputs within 64 bytes.
inline bool vnni_applies(const Geometry& g) {
  return (g.stride_w == 1 || g.stride_w == 2) && g.stride_h >= 1 && g.stride_w * 15 + 3 * g.dilation_w <= 63 &&
         g.kernel_h * g.kernel_w <= 65536 / 4;
}
VnniPlan make_vnni_plan(const Geometry& g);
// Weights [kernel_h][kernel_w] s8 as kernel_h x chunks int32 of 4 bytes each, zero past kernel_w,
// then (paired_last_tap) kernel_h + 1 pairs (w(k, last), w(k + 1, last)) for k = -1 ..
// kernel_h - 1, zero outside the kernel: vnni_weights_per_channel(plan) int32 in all. Returns
// their sum (for the zero point's term).
inline int64_t vnni_weights_per_channel(const VnniPlan& plan) {
  return plan.g.kernel_h * plan.chunks + (plan.paired_last_tap ? plan.g.kernel_h + 1 : 0);
}
int32_t pack_vnni_weights(const VnniPlan& plan, const int8_t* w, int32_t* packed);

// One plane of the float family: x [in_h, in_w] u8, w [kernel_h x kernel_w] as floats, y
// [out_h, out_w] u8; `scratch` of scratch_floats(plan.g) floats, cleared (clear_scratch) before
// the first plane. One per instruction set below.
using ChannelFn = void (*)(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                           float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch);

#if defined(__x86_64__)
// Whether this CPU runs the integer family (avx512 bw, vl, vnni and vbmi).
bool vnni_available();
// Fills a thread's scratch (plan.scratch_bytes(), maybe none) with x_zero_point: the padding,
// which the planes' copies leave as it is, for every plane of one call.
void vnni_fill_scratch(const VnniPlan& plan, int32_t x_zero_point, uint8_t* scratch);
// One plane: x [in_h, in_w] u8 (copied into `scratch`, filled for this x_zero_point, where the
// plan copies rows), y [out_h,
// out_w] u8; `folded_bias` = bias - x_zero_point * sum(w) (wrapping int32).
void channel_vnni_avx512(const VnniPlan& plan, const uint8_t* x, int32_t x_zero_point, const int32_t* packed_w,
                         int32_t folded_bias, float multiplier, int32_t y_zero_point, uint8_t* y,
                         uint8_t* scratch);

// The float family (ChannelFn) with AVX-512 F and BW: vectors of 16 outputs.
void channel_avx512(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                    float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch);
// The same with AVX2 and FMA (x86-64-v3): vectors of 8 outputs.
void channel_avx2(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                  float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch);
#endif

#if defined(__aarch64__)
// The same with Advanced SIMD: vectors of 4 outputs.
void channel_neon(const Plan& plan, const uint8_t* x, int32_t x_zero_point, const float* w, int32_t bias,
                  float multiplier, int32_t y_zero_point, uint8_t* y, float* scratch);
#endif

}  // namespace edgert::cpu::qdepthwise
