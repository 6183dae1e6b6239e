// Camera engines (`edgert build --camera yuyv:640x480`): an edgert.ImageToTensor node
// (plugins/common/camera_op.h) goes in front of the model's image input, so the engine takes the
// raw frame (uint8: YUYV [H, W, 2], NV12 [H * 3 / 2, W], RGB24 [H, W, 3]) under the input's name
// and converts, resizes and normalizes it itself. On a GPU board that is the engine's first
// kernel, inside its CUDA graph, reading the frame where the camera driver wrote it (edgertd
// binds host-mapped capture buffers): no CPU pass over the pixels and a sixth of the bytes of
// a float image crossing to the GPU on a discrete one.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace edgert::builder {

struct CameraInput {
  std::string format;  // yuyv | nv12 | rgb24
  int width = 0, height = 0;
  std::string channel_order = "rgb";  // rgb | bgr
  std::vector<float> mean = {0, 0, 0}, std = {1, 1, 1};  // after scaling pixels to [0, 1]
};

// "yuyv:640x480" -> format and size; throws BuildError naming the option.
CameraInput parse_camera_input(const std::string& spec);

// Replaces the main graph's single float image input ([1, C, H, W] or [1, H, W, C], C 1 or 3,
// static) by the raw frame and the node converting it. Throws BuildError when the model has
// no such input.
void prepend_camera_input(Model& model, const CameraInput& camera);

}  // namespace edgert::builder
