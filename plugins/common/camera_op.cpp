#include "camera_op.h"

#include "edgert/dtype_info.h"

namespace edgert::plugin {

Shape CameraOp::output_shape() const {
  return nchw ? Shape{1, channels, out_height, out_width} : Shape{1, out_height, out_width, channels};
}

camera::Planes CameraOp::planes(const uint8_t* data) const {
  camera::Planes p;
  p.layout = layout;
  p.width = width;
  p.height = height;
  p.plane[0] = data;
  const size_t bytes_per_pixel = layout == camera::Layout::kYuyv ? 2 : layout == camera::Layout::kRgb24 ? 3 : 1;
  p.stride[0] = static_cast<size_t>(width) * bytes_per_pixel;
  if (layout == camera::Layout::kNv12) {
    p.plane[1] = data + static_cast<size_t>(width) * height;
    p.stride[1] = static_cast<size_t>(width);
  }
  return p;
}

CameraOp read_camera_op(const edgert_node& node, const edgert_tensor& frame) {
  Attributes attrs(&node);
  CameraOp op;
  if (frame.dtype != EDGERT_DTYPE_UINT8)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "the frame must be uint8, got %s", edgert_dtype_name(frame.dtype));
  const std::string format = attrs.get_string("format", "");
  const Shape shape = shape_of(frame);
  for (int64_t d : shape)
    if (d <= 0 || d > (1 << 15)) fail(EDGERT_ERR_INVALID_ARGUMENT, "frame dims must be 1..32768, got %s", shape_string(shape).c_str());
  if (format == "yuyv" || format == "rgb24") {
    const int64_t bytes = format == "yuyv" ? 2 : 3;
    if (shape.size() != 3 || shape[2] != bytes)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "a %s frame is [H, W, %lld], got %s", format.c_str(), static_cast<long long>(bytes),
           shape_string(shape).c_str());
    op.layout = format == "yuyv" ? camera::Layout::kYuyv : camera::Layout::kRgb24;
    op.height = static_cast<int>(shape[0]);
    op.width = static_cast<int>(shape[1]);
    if (op.layout == camera::Layout::kYuyv && op.width % 2)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "a yuyv frame has an even width, got %d", op.width);
  } else if (format == "nv12") {
    if (shape.size() != 2 || shape[0] % 3 || shape[1] % 2)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "an nv12 frame is [H * 3 / 2, W] with H and W even, got %s",
           shape_string(shape).c_str());
    op.layout = camera::Layout::kNv12;
    op.height = static_cast<int>(shape[0] / 3 * 2);
    op.width = static_cast<int>(shape[1]);
    if (op.height % 2) fail(EDGERT_ERR_INVALID_ARGUMENT, "an nv12 frame has an even height, got %d", op.height);
  } else {
    fail(EDGERT_ERR_INVALID_ARGUMENT, "format must be yuyv, nv12 or rgb24, got '%s'", format.c_str());
  }
  op.out_height = static_cast<int>(attrs.get_int("out_height", 0));
  op.out_width = static_cast<int>(attrs.get_int("out_width", 0));
  if (op.out_height <= 0 || op.out_width <= 0 || op.out_height > (1 << 15) || op.out_width > (1 << 15))
    fail(EDGERT_ERR_INVALID_ARGUMENT, "out_height and out_width must be 1..32768, got %d x %d", op.out_height, op.out_width);
  op.channels = static_cast<int>(attrs.get_int("channels", 3));
  if (op.channels != 1 && op.channels != 3) fail(EDGERT_ERR_INVALID_ARGUMENT, "channels must be 1 or 3, got %d", op.channels);
  const std::string order = attrs.get_string("channel_order", "rgb");
  if (order != "rgb" && order != "bgr") fail(EDGERT_ERR_INVALID_ARGUMENT, "channel_order must be rgb or bgr, got '%s'", order.c_str());
  op.bgr = order == "bgr";
  const std::string layout = attrs.get_string("layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC") fail(EDGERT_ERR_INVALID_ARGUMENT, "layout must be NCHW or NHWC, got '%s'", layout.c_str());
  op.nchw = layout == "NCHW";
  const std::vector<float> mean = attrs.get_floats("mean", {0, 0, 0}), std = attrs.get_floats("std", {1, 1, 1});
  if (mean.size() != 3 || std.size() != 3) fail(EDGERT_ERR_INVALID_ARGUMENT, "mean and std take 3 values each");
  for (float s : std)
    if (!(s > 0)) fail(EDGERT_ERR_INVALID_ARGUMENT, "std values must be positive, got %g", s);
  op.norm = camera::normalization(mean.data(), std.data());
  return op;
}

}  // namespace edgert::plugin
