// The geometry of a 2-D convolution node (Conv, FusedConv, QLinearConv) as the GPU kernels
// read it: dims, strides, dilations, explicit or SAME padding, output size.
#pragma once

#include "cuda_op.h"

namespace edgert::cuda {

struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, m = 0, kh = 0, kw = 0, group = 1;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t out_h = 0, out_w = 0;
  bool depthwise() const { return group > 1 && group == c && group == m; }
};

// X [N, C, H, W] and W [M, C/group, KH, KW], or [M, KH, KW, C/group] for a channels-last
// (layout NHWC) dense convolution. Fails with a message for anything else.
ConvGeometry conv_geometry(const edgert_node& node, const edgert_tensor& x, const edgert_tensor& w);

}  // namespace edgert::cuda
