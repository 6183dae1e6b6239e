#include "conv_geometry.h"

#include <algorithm>
#include <string>

namespace edgert::cuda {

ConvGeometry conv_geometry(const edgert_node& node, const edgert_tensor& x, const edgert_tensor& w) {
  if (x.rank != 4 || w.rank != 4)
    fail(EDGERT_ERR_UNSUPPORTED, "only 2-D convolutions run on the GPU (X rank %d, W rank %d)", x.rank, w.rank);
  Attributes attrs(&node);
  const bool nhwc = channels_last(node);
  ConvGeometry g;
  g.n = x.dims[0];
  g.c = x.dims[1];
  g.h = x.dims[2];
  g.w = x.dims[3];
  g.m = w.dims[0];
  g.group = attrs.get_int("group", 1);
  // Weights are [M, C/g, KH, KW], or [M, KH, KW, C/g] for a channels-last dense convolution.
  const bool krsc = nhwc && !g.depthwise();
  g.kh = krsc ? w.dims[1] : w.dims[2];
  g.kw = krsc ? w.dims[2] : w.dims[3];
  const int64_t wc = krsc ? w.dims[3] : w.dims[1];
  if (g.group < 1 || g.c % g.group != 0 || g.m % g.group != 0 || wc * g.group != g.c)
    fail(EDGERT_ERR_SHAPE, "X has %lld channels, W %s, group %lld: they do not agree", static_cast<long long>(g.c),
         shape_string(shape_of(w)).c_str(), static_cast<long long>(g.group));
  std::vector<int64_t> strides = attrs.get_ints("strides", {1, 1}), dilations = attrs.get_ints("dilations", {1, 1});
  std::vector<int64_t> kernel = attrs.get_ints("kernel_shape", {g.kh, g.kw});
  if (strides.size() != 2 || dilations.size() != 2 || kernel.size() != 2 || kernel[0] != g.kh || kernel[1] != g.kw)
    fail(EDGERT_ERR_SHAPE, "strides, dilations and kernel_shape must match the 2-D weights %s",
         shape_string(shape_of(w)).c_str());
  g.stride_h = strides[0];
  g.stride_w = strides[1];
  g.dilation_h = dilations[0];
  g.dilation_w = dilations[1];
  const int64_t ekh = (g.kh - 1) * g.dilation_h + 1, ekw = (g.kw - 1) * g.dilation_w + 1;
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = attrs.get_ints("pads", {0, 0, 0, 0});
    if (pads.size() != 4) fail(EDGERT_ERR_SHAPE, "pads must have 4 values for a 2-D convolution");
    g.pad_top = pads[0];
    g.pad_left = pads[1];
    g.pad_bottom = pads[2];
    g.pad_right = pads[3];
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int axis = 0; axis < 2; ++axis) {
      const int64_t in_size = axis ? g.w : g.h, stride = axis ? g.stride_w : g.stride_h, k = axis ? ekw : ekh;
      const int64_t out = (in_size + stride - 1) / stride;
      const int64_t total = std::max<int64_t>(0, (out - 1) * stride + k - in_size);
      const int64_t small = total / 2, large = total - small;
      const bool upper = auto_pad == "SAME_UPPER";
      (axis ? g.pad_left : g.pad_top) = upper ? small : large;
      (axis ? g.pad_right : g.pad_bottom) = upper ? large : small;
    }
  } else if (auto_pad != "VALID") {
    fail(EDGERT_ERR_UNSUPPORTED, "auto_pad '%s' is not supported", auto_pad.c_str());
  }
  g.out_h = (g.h + g.pad_top + g.pad_bottom - ekh) / g.stride_h + 1;
  g.out_w = (g.w + g.pad_left + g.pad_right - ekw) / g.stride_w + 1;
  if (g.out_h <= 0 || g.out_w <= 0)
    fail(EDGERT_ERR_SHAPE, "X %s is too small for a %lldx%lld kernel", shape_string(shape_of(x)).c_str(),
         static_cast<long long>(ekh), static_cast<long long>(ekw));
  return g;
}

}  // namespace edgert::cuda
