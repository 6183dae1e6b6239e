// Camera engines in a pipeline (`edgert build --camera`, builder/src/camera_input.h): the
// engine's input is the raw frame (uint8 YUYV [H, W, 2], NV12 [H * 3 / 2, W], RGB24 [H, W, 3])
// and its first node does what Preprocessor does on the CPU. The pipeline hands it the frame's
// own buffer when its rows are packed as the engine reads them (no copy: on a GPU board the
// kernel reads the capture buffer), else a packed copy, counted as a frame copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "edgert/edgert.h"
#include "frame.h"

namespace edgert::daemon {

struct CameraFrameInput {
  PixelFormat format = PixelFormat::YUYV;
  int width = 0, height = 0;
  std::string describe() const;  // "yuyv 640x480"
};

// The frame a camera engine takes, from its input's dtype and shape; nothing for other engines.
std::optional<CameraFrameInput> camera_frame_input(const edgert_tensor_info& input);

// "" when `input` takes frames of `format` and size width x height, else what differs.
std::string camera_frame_mismatch(const CameraFrameInput& input, PixelFormat format, int width, int height);

// The engine input for `frame`: its buffer in place when packed, else packed into `scratch`
// (*copies incremented). Throws std::runtime_error when the frame does not fit the engine.
edgert_tensor camera_frame_tensor(const Frame& frame, const CameraFrameInput& input, std::vector<uint8_t>& scratch,
                                  uint32_t* copies);

}  // namespace edgert::daemon
