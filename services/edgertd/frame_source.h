// Where frames come from: a V4L2 device or the built-in test pattern. A source lives on the
// daemon's event loop (sd-event): it registers its fds or timers there and calls the frame
// callback from the loop thread.
#pragma once

#include <systemd/sd-event.h>

#include <functional>
#include <memory>
#include <string>

#include "frame.h"
#include "frame_memory.h"

namespace edgert::daemon {

struct SourceConfig {
  std::string type = "test-pattern";  // "test-pattern" | "v4l2"
  std::string device;                 // v4l2: /dev/videoN
  int width = 640, height = 480, fps = 30;
  PixelFormat format = PixelFormat::YUYV;
  // v4l2: "mmap" | "dmabuf" (mmap buffers exported with VIDIOC_EXPBUF) | "userptr" (the driver
  // writes into page-aligned memory the daemon allocates, which a reader then uses in place).
  // test-pattern: "userptr" (the config's default: frames in the board's frame memory) | "mmap"
  // (host memory on a GPU board, standing in for driver-owned buffers a GPU reads by a copy).
  std::string io = "mmap";
  int buffers = 4;                    // v4l2 buffer count
  bool triggered = false;             // only deliver a frame after trigger() (GPIO trigger input)
  // Frame buffers the source allocates (the test pattern's, v4l2 userptr): from here (null:
  // host memory). The pipeline gives host-mapped memory on a GPU board (frame_memory.h).
  std::shared_ptr<FrameMemory> memory;
};

struct SourceStats {
  uint64_t frames = 0;       // delivered to the callback
  uint64_t driver_gaps = 0;  // frames the driver/source skipped (sequence gaps)
};

class FrameSource {
 public:
  using FrameCallback = std::function<void(FrameRef)>;
  virtual ~FrameSource() = default;
  // Registers with `loop` and starts streaming; throws std::runtime_error with a message that
  // names the device and what failed (format not offered, permission, ...).
  virtual void start(sd_event* loop, FrameCallback on_frame) = 0;
  virtual void stop() = 0;
  // Triggered sources deliver the next captured frame after each call.
  virtual void trigger() {}
  virtual std::string describe() const = 0;  // "v4l2 /dev/video0 640x480 yuyv 30 fps (mmap)"
  virtual SourceStats stats() const = 0;
};

std::unique_ptr<FrameSource> make_test_pattern_source(const SourceConfig& config);
std::unique_ptr<FrameSource> make_v4l2_source(const SourceConfig& config);

}  // namespace edgert::daemon
