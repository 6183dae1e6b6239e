#include "camera_input.h"

#include <cstdlib>

#include "build_error.h"
#include "edgert/plugin.h"

namespace edgert::builder {
CameraInput parse_camera_input(const std::string& spec) {
  CameraInput camera;
  const size_t colon = spec.find(':');
  const size_t x = colon == std::string::npos ? std::string::npos : spec.find('x', colon);
  camera.format = spec.substr(0, colon);
  if (camera.format != "yuyv" && camera.format != "nv12" && camera.format != "rgb24")
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera '%s': the format must be yuyv, nv12 or rgb24 (FORMAT:WIDTHxHEIGHT)",
               spec.c_str());
  if (x == std::string::npos)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera '%s' must be FORMAT:WIDTHxHEIGHT, e.g. yuyv:640x480", spec.c_str());
  char* end = nullptr;
  const long w = std::strtol(spec.c_str() + colon + 1, &end, 10);
  const bool w_ok = end == spec.c_str() + x;
  const long h = std::strtol(spec.c_str() + x + 1, &end, 10);
  if (!w_ok || *end != '\0' || w < 2 || h < 2 || w > 16384 || h > 16384)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera '%s': width and height must be 2..16384", spec.c_str());
  if ((camera.format != "rgb24" && w % 2) || (camera.format == "nv12" && h % 2))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera '%s': %s needs an even %s", spec.c_str(), camera.format.c_str(),
               w % 2 ? "width" : "height");
  camera.width = static_cast<int>(w);
  camera.height = static_cast<int>(h);
  return camera;
}

void prepend_camera_input(Model& model, const CameraInput& camera) {
  Graph& graph = model.graphs[0];
  if (graph.inputs.size() != 1)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera: the model has %zu inputs; a camera engine takes one image",
               graph.inputs.size());
  const int32_t image = graph.inputs[0];
  Value& in = graph.values[image];
  auto dim = [&](size_t d) { return in.shape[d].value; };
  const bool rank4 = in.rank_known && in.shape.size() == 4;
  const bool nchw = rank4 && (dim(1) == 1 || dim(1) == 3);
  const bool nhwc = rank4 && !nchw && (dim(3) == 1 || dim(3) == 3);
  if (in.dtype != EDGERT_DTYPE_FLOAT32 || !(nchw || nhwc) || dim(0) != 1 || !in.shape_is_static())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "--camera: input '%s' is not a float32 image [1, C, H, W] or [1, H, W, C] with C 1 or 3 and fixed "
               "H and W",
               in.name.c_str());
  const int64_t channels = nchw ? dim(1) : dim(3);
  const int64_t out_h = nchw ? dim(2) : dim(1), out_w = nchw ? dim(3) : dim(2);

  // The frame takes the input's name (what callers bind); the image becomes the node's output.
  Value frame;
  frame.name = in.name;
  frame.dtype = EDGERT_DTYPE_UINT8;
  frame.rank_known = true;
  if (camera.format == "nv12") frame.shape = {fixed_dim(camera.height * 3 / 2), fixed_dim(camera.width)};
  else frame.shape = {fixed_dim(camera.height), fixed_dim(camera.width), fixed_dim(camera.format == "yuyv" ? 2 : 3)};
  in.name += ":image";
  const int32_t frame_value = graph.add_value(std::move(frame));

  Node node;
  node.name = "camera frame to image";
  node.domain = "edgert";
  node.op_type = "ImageToTensor";
  node.opset = 1;
  node.inputs = {frame_value};
  node.outputs = {image};
  node.attributes = {string_attribute("format", camera.format),
                     int_attribute("out_height", out_h),
                     int_attribute("out_width", out_w),
                     int_attribute("channels", channels),
                     string_attribute("channel_order", camera.channel_order),
                     string_attribute("layout", nchw ? "NCHW" : "NHWC"),
                     floats_attribute("mean", camera.mean),
                     floats_attribute("std", camera.std)};
  graph.nodes.insert(graph.nodes.begin(), std::move(node));
  graph.inputs[0] = frame_value;
}

}  // namespace edgert::builder
