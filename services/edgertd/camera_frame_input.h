// Camera engines in a pipeline (`edgert build --camera`, builder/src/camera_input.h): the
// engine's input is the raw frame (uint8 YUYV [H, W, 2], NV12 [H * 3 / 2, W], RGB24 [H, W, 3])
// and its first node does what Preprocessor does on the CPU. The pipeline hands it the frame's
// own buffer when its rows are packed as the engine reads them and, for an engine on a GPU, the
// buffer is host-mapped (no copy: the kernel reads the capture buffer); else one packed copy
// into a staging buffer of the pipeline's frame memory (host-mapped on a GPU board: the
// fallback for V4L2 MMAP buffers, which CUDA cannot map), counted as a frame copy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "edgert/edgert.h"
#include "frame.h"
#include "frame_memory.h"

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

// One frame's worth of memory, kept between frames (one address: one CUDA graph replays it).
class FrameStaging {
 public:
  explicit FrameStaging(std::shared_ptr<FrameMemory> memory) : memory_(std::move(memory)) {}
  ~FrameStaging();
  FrameStaging(const FrameStaging&) = delete;
  FrameStaging& operator=(const FrameStaging&) = delete;

  uint8_t* reserve(size_t bytes);  // throws std::runtime_error when the memory has none left
  bool device_mapped() const { return memory_->device_mapped(); }

 private:
  std::shared_ptr<FrameMemory> memory_;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

// The engine input for `frame`: its buffer in place when packed (and host-mapped, where
// `device_mapped` asks for it), else packed into `staging` (*copies incremented). Throws
// std::runtime_error when the frame does not fit the engine.
edgert_tensor camera_frame_tensor(const Frame& frame, const CameraFrameInput& input, FrameStaging& staging,
                                  bool device_mapped, uint32_t* copies);

}  // namespace edgert::daemon
