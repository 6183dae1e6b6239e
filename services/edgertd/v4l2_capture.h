// A FrameSource over a V4L2 capture device: MMAP buffers, optionally exported as DMABUF, or
// USERPTR buffers the source allocates (io "userptr": on a board whose GPU reads host memory,
// the memory an engine's first kernel reads in place), dequeued on the daemon's sd-event loop.
// make_v4l2_source() (frame_source.h) returns one.
//
// Contracts:
// - start(), stop(), trigger() and the destructor run on the loop thread; the frame callback is
//   called there too; it may call stop() but must not destroy the source. stats() and
//   describe() may be called from any thread.
// - A delivered FrameRef points into the driver's buffer, which is out of the capture queue
//   until the last reference goes: release (from any thread) requeues it with VIDIOC_QBUF. With
//   only `buffers` buffers, a consumer that holds them all stalls capture; the driver then drops
//   frames and stats().driver_gaps counts them.
// - Frame::dmabuf_fd (io "dmabuf") belongs to the source and is valid while the FrameRef lives;
//   dup() it to keep it longer.
// - After stop() the device is closed; buffers still held stay mapped until their FrameRef goes,
//   and their release then unmaps them instead of touching the closed device.
// - Single-planar and multi-planar (one memory plane: NV12, not NV12M) capture queues both work.
// - A fatal dequeue error (device unplugged, EPIPE) stops delivery; describe() then ends with
//   "[stopped: <error>]", since library code does not log.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "frame_source.h"

namespace edgert::daemon {

class V4l2Capture final : public FrameSource {
 public:
  explicit V4l2Capture(SourceConfig config);
  ~V4l2Capture() override;
  V4l2Capture(const V4l2Capture&) = delete;
  V4l2Capture& operator=(const V4l2Capture&) = delete;

  // Opens, negotiates (fails listing what the device offers), maps and queues the buffers,
  // streams on and registers the fd with `loop`. Throws std::runtime_error naming the device,
  // the ioctl and strerror.
  void start(sd_event* loop, FrameCallback on_frame) override;
  void stop() override;
  // Delivers the first frame whose capture time is at or after this call (triggered mode).
  void trigger() override;
  std::string describe() const override;
  SourceStats stats() const override;

  // The device's state shared with every outstanding frame's release function, so that a
  // release after stop() (or after this object is gone) finds the buffer and not a dangling fd.
  struct Shared;

 private:
  static int on_io(sd_event_source* source, int fd, uint32_t revents, void* userdata);
  static int on_wake(sd_event_source* source, int fd, uint32_t revents, void* userdata);
  void dequeue_ready();
  void fail_stream(const std::string& message);

  SourceConfig config_;
  FrameCallback on_frame_;
  std::shared_ptr<Shared> shared_;
  sd_event_source* io_source_ = nullptr;
  sd_event_source* wake_source_ = nullptr;

  // Negotiated at start().
  int width_ = 0, height_ = 0;
  size_t bytes_per_line_ = 0;
  double fps_ = 0;

  uint64_t last_sequence_ = 0;  // driver sequence extended to 64 bits
  bool have_sequence_ = false;
  std::atomic<bool> trigger_pending_{false};
  std::atomic<uint64_t> trigger_ns_{0};
  std::atomic<uint64_t> frames_{0};
  std::atomic<uint64_t> driver_gaps_{0};

  mutable std::mutex error_mutex_;
  std::string error_;
};

}  // namespace edgert::daemon
