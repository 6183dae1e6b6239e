// A captured frame as it travels from a source to a pipeline's worker: a view into the
// source's own buffer (a V4L2 mmap buffer, a test-pattern pool buffer), never a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace edgert::daemon {

enum class PixelFormat { YUYV, NV12, RGB24, MJPEG };

const char* pixel_format_name(PixelFormat format);

// CLOCK_MONOTONIC in nanoseconds: the clock of capture times (Frame::capture_ns) and stage
// timings.
uint64_t monotonic_ns();
// "yuyv", "nv12", "rgb24", "mjpeg" (case-insensitive); false when unknown.
bool parse_pixel_format(const std::string& text, PixelFormat* format);

struct Frame {
  uint64_t sequence = 0;    // the source's frame counter; gaps mean the source dropped frames
  uint64_t capture_ns = 0;  // CLOCK_MONOTONIC time of capture (the driver's timestamp for V4L2)
  PixelFormat format = PixelFormat::YUYV;
  int width = 0, height = 0;
  const uint8_t* planes[2] = {nullptr, nullptr};  // NV12: Y then interleaved UV; others: one plane
  size_t strides[2] = {0, 0};                     // bytes per row of each plane
  size_t bytes_used = 0;                          // payload size (MJPEG: the compressed size)
  int dmabuf_fd = -1;                             // exported DMABUF of the buffer, -1 when none
  bool device_mapped = false;  // the buffer is host-mapped memory the GPU reads (frame_memory.h)
};

// A frame plus ownership of its buffer: the buffer returns to its source (requeued) when the
// last FrameRef goes away, from whatever thread that happens on. Sources make these with
// make_frame_ref(); holders must drop them promptly, since sources have few buffers.
using FrameRef = std::shared_ptr<const Frame>;
FrameRef make_frame_ref(const Frame& frame, std::function<void()> release);

}  // namespace edgert::daemon
