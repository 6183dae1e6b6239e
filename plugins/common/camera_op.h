// edgert.ImageToTensor, the node `edgert build --camera` puts in front of an image model: the
// raw camera frame (uint8) in, the model's normalized float32 image out. What its CPU and CUDA
// kernels share: reading the node and the frame's shape, and the planes of a frame stored
// contiguously.
//
// Input: the frame, uint8, its shape saying its format: YUYV [H, W, 2], RGB24 [H, W, 3],
// NV12 [H * 3 / 2, W] (the luma plane, then interleaved UV). Attributes: format ("yuyv",
// "nv12", "rgb24"), out_height, out_width, channels (1: luma, 3: colour), channel_order ("rgb",
// "bgr"), layout ("NCHW", "NHWC"), mean and std (3 floats each, after scaling to [0, 1]).
// Output: float32 [1, C, out_height, out_width] (NCHW) or [1, out_height, out_width, C].
#pragma once

#include "camera_frame.h"
#include "op_support.h"

namespace edgert::plugin {

struct CameraOp {
  camera::Layout layout = camera::Layout::kYuyv;
  int width = 0, height = 0;  // of the frame
  int out_width = 0, out_height = 0, channels = 3;
  bool bgr = false, nchw = true;
  camera::Normalization norm;

  Shape output_shape() const;
  // The planes of a frame whose rows are packed (stride = row bytes) at `data`.
  camera::Planes planes(const uint8_t* data) const;
};

// Reads and checks the node against its frame input; fails with a message naming what is wrong.
CameraOp read_camera_op(const edgert_node& node, const edgert_tensor& frame);

}  // namespace edgert::plugin
