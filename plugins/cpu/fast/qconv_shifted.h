// Dense INT8 convolution, stride 1 or 2, without im2col ("shifted GEMM"), for QLinearConv with
// group 1:
// the image is packed once per call, zero-point padded, as the interleaved u8 layout of the NCHW
// qgemm (gemm/qgemm.h) over the padded plane: [ceil(C / 4)][pixels of the padded plane + tail][4]
// bytes. Output pixels are computed over the padded width (q = oy * padded_w + ox); the operand
// of tap (ky, kx) is then the same buffer shifted by ky * dilation_h * padded_w + kx * dilation_w
// pixels, so the GEMM's depth runs over taps x channel groups with no copy per tap, and only the
// columns ox < out_w are stored. Weights are packed per tap (depth t * 4 ceil(C / 4) + c, zero
// past C). Sums and requantisation are those of qgemm: bit-exact with the reference.
// Stride 2 packs the padded image as its 4 phases (even / odd rows x even / odd columns), each
// laid out as above: tap (ky, kx) reads phase (ky d_h % 2, kx d_w % 2) shifted by
// (ky d_h / 2) rows and (kx d_w / 2) columns of the phase, so stride 2 is a shift too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gemm/qgemm.h"

namespace edgert::cpu::qshifted {

struct Geometry {
  int64_t channels, in_h, in_w, out_h, out_w, kernel_h, kernel_w, dilation_h, dilation_w, pad_top, pad_left;
  int64_t stride = 1;  // both axes: 1 or 2
};

// What every call of one geometry shares, worked out in prepare.
struct Plan {
  Geometry g{};
  int64_t padded_w = 0, padded_h = 0;  // the plane (phase) the taps read: out + (kernel - 1) * dilation / stride
  int64_t phases = 1;                  // stride x stride
  int64_t channel_groups = 0;          // ceil(C / 4)
  int64_t group_pixels = 0;            // pixels per channel group: the padded plane and a tail, multiple of 16
  int64_t pixels = 0;                  // output pixels over the padded width: (out_h - 1) padded_w + out_w
  std::vector<int64_t> tap_offsets;    // per tap, in pixels from the image's start (phase included)
  size_t image_bytes() const { return static_cast<size_t>(phases * channel_groups * group_pixels * 4); }
};
Plan make_plan(const Geometry& g);

// Whether the stride is 1 or 2 and the packed depth (taps x 4 ceil(C / 4)) stays within
// gemm::kQgemmMaxDepth.
bool applies(const Geometry& g);

// Packs W [m, C, kernel_h, kernel_w] (s8, not referenced afterwards) per tap for `plan`, or
// borrows the engine's stored packing without reading W (gemm::take_stored_qrows). False when
// the depth is too large.
bool pack_weights(const int8_t* w, int64_t m, const Plan& plan, gemm::PackedQRows& out);

#if defined(__x86_64__)
// Channel groups [group_begin, group_end) of x [C, in_h, in_w] into `image` (plan.image_bytes()),
// padding and channels past C read as x_zero_point.
void pack_image_avx512(const Plan& plan, const uint8_t* x, int32_t x_zero_point, int64_t group_begin,
                       int64_t group_end, uint8_t* image);
// Rows of panels [panel_begin, panel_end) of W over padded-width pixels [q0, q0 + count) (count
// <= 32), requantised into Y (row_stride: out_h x out_w; only valid columns written).
// `row_bias` already holds bias - x_zero_point * row_sums.
void panel_12x32_avx512vnni(const Plan& plan, const gemm::PackedQRows& w, int64_t panel_begin, int64_t panel_end,
                            const uint8_t* image, int64_t q0, int64_t count, const int32_t* row_bias,
                            const gemm::QRequant& y);
#endif

}  // namespace edgert::cpu::qshifted
