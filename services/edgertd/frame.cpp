#include "frame.h"

#include <strings.h>
#include <time.h>

namespace edgert::daemon {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const char* pixel_format_name(PixelFormat format) {
  switch (format) {
    case PixelFormat::YUYV: return "yuyv";
    case PixelFormat::NV12: return "nv12";
    case PixelFormat::RGB24: return "rgb24";
    case PixelFormat::MJPEG: return "mjpeg";
  }
  return "unknown";
}

bool parse_pixel_format(const std::string& text, PixelFormat* format) {
  for (PixelFormat f : {PixelFormat::YUYV, PixelFormat::NV12, PixelFormat::RGB24, PixelFormat::MJPEG})
    if (strcasecmp(text.c_str(), pixel_format_name(f)) == 0) {
      *format = f;
      return true;
    }
  return false;
}

namespace {

struct OwnedFrame : Frame {
  std::function<void()> release;
  ~OwnedFrame() {
    if (release) release();
  }
};

}  // namespace

FrameRef make_frame_ref(const Frame& frame, std::function<void()> release) {
  auto owned = std::make_shared<OwnedFrame>();
  static_cast<Frame&>(*owned) = frame;
  owned->release = std::move(release);
  return owned;
}

}  // namespace edgert::daemon
