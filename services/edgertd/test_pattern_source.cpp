// The test-pattern source: moving colour bars and a bouncing square, generated on a timer in
// the configured format, for machines with no camera. Buffers come from a small pool, like a
// driver's: when every buffer is still held downstream, the frame is skipped and counted.
#include <time.h>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "frame_source.h"

namespace edgert::daemon {
namespace {

// Frames the source can have in flight downstream (queue + worker): source.buffers, as a
// camera's driver buffers.
constexpr int kDefaultPoolSize = 4;

struct Rgb {
  uint8_t r, g, b;
};

const Rgb kBars[8] = {{235, 235, 235}, {235, 235, 16}, {16, 235, 235}, {16, 235, 16},
                      {235, 16, 235},  {235, 16, 16},  {16, 16, 235},  {16, 16, 16}};

void rgb_to_yuv(Rgb c, uint8_t* y, uint8_t* u, uint8_t* v) {
  // BT.601 limited range, integer approximation.
  *y = static_cast<uint8_t>(((66 * c.r + 129 * c.g + 25 * c.b + 128) >> 8) + 16);
  *u = static_cast<uint8_t>(((-38 * c.r - 74 * c.g + 112 * c.b + 128) >> 8) + 128);
  *v = static_cast<uint8_t>(((112 * c.r - 94 * c.g - 18 * c.b + 128) >> 8) + 128);
}

class TestPatternSource : public FrameSource {
 public:
  explicit TestPatternSource(const SourceConfig& config) : config_(config) {
    if (config.format == PixelFormat::MJPEG)
      throw std::runtime_error("test-pattern source: mjpeg is not generated; use yuyv, nv12 or rgb24");
    bytes_ = frame_bytes();
    memory_ = config_.memory ? config_.memory : FrameMemory::host();
    const int count = config_.buffers > 0 ? config_.buffers : kDefaultPoolSize;
    try {
      for (int i = 0; i < count; ++i) {
        pool_.push_back(static_cast<uint8_t*>(memory_->allocate(bytes_)));
        std::memset(pool_.back(), 0, bytes_);
      }
    } catch (...) {
      for (uint8_t* p : pool_) memory_->free(p);
      throw;
    }
    in_use_.assign(pool_.size(), 0);
  }
  ~TestPatternSource() override {
    stop();
    for (uint8_t* p : pool_) memory_->free(p);
  }

  void start(sd_event* loop, FrameCallback on_frame) override {
    on_frame_ = std::move(on_frame);
    period_us_ = 1000000ull / static_cast<uint64_t>(config_.fps);
    uint64_t now;
    sd_event_now(loop, CLOCK_MONOTONIC, &now);
    // Accuracy 1 us, as a camera would deliver: with 0, sd-event's default accuracy of 250 ms, the
    // loop deferred wake-ups to coalesce them, and 30 fps came as bursts of ~8 frames four times a
    // second; a burst could overflow the frame queue (drops), and capture times hid the wait.
    int r = sd_event_add_time(loop, &timer_, CLOCK_MONOTONIC, now + period_us_, 1, &TestPatternSource::on_timer, this);
    if (r < 0) throw std::runtime_error(std::string("test-pattern source: cannot add timer: ") + strerror(-r));
  }

  void stop() override {
    if (timer_) timer_ = sd_event_source_disable_unref(timer_);
  }

  void trigger() override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++triggers_;
  }

  std::string describe() const override {
    return "test-pattern " + std::to_string(config_.width) + "x" + std::to_string(config_.height) + " " +
           pixel_format_name(config_.format) + " " + std::to_string(config_.fps) + " fps" +
           (memory_->device_mapped() ? ", buffers " + memory_->describe() : "");
  }

  SourceStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  size_t frame_bytes() const {
    size_t pixels = static_cast<size_t>(config_.width) * config_.height;
    switch (config_.format) {
      case PixelFormat::YUYV: return pixels * 2;
      case PixelFormat::NV12: return pixels * 3 / 2;
      default: return pixels * 3;
    }
  }

  static int on_timer(sd_event_source* source, uint64_t usec, void* userdata) {
    auto* self = static_cast<TestPatternSource*>(userdata);
    // Next deadline from the previous one, not from now: a late wake-up must not slow the rate.
    sd_event_source_set_time(source, usec + self->period_us_);
    sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
    self->produce();
    return 0;
  }

  void produce() {
    uint64_t sequence = next_sequence_++;
    int slot = -1;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (config_.triggered) {
        if (triggers_ == 0) return;
        --triggers_;
      }
      for (int i = 0; i < static_cast<int>(pool_.size()) && slot < 0; ++i)
        if (!in_use_[i]) slot = i;
      if (slot < 0) {
        ++stats_.driver_gaps;  // every buffer still held downstream: the "driver" drops this frame
        return;
      }
      in_use_[slot] = 1;
      ++stats_.frames;
    }
    draw(pool_[slot], sequence);
    Frame f;
    f.sequence = sequence;
    f.capture_ns = monotonic_ns();
    f.format = config_.format;
    f.width = config_.width;
    f.height = config_.height;
    f.planes[0] = pool_[slot];
    f.device_mapped = memory_->device_mapped();
    f.strides[0] = config_.format == PixelFormat::YUYV ? config_.width * 2u
                   : config_.format == PixelFormat::NV12 ? static_cast<size_t>(config_.width)
                                                         : config_.width * 3u;
    if (config_.format == PixelFormat::NV12) {
      f.planes[1] = pool_[slot] + static_cast<size_t>(config_.width) * config_.height;
      f.strides[1] = static_cast<size_t>(config_.width);
    }
    f.bytes_used = bytes_;
    on_frame_(make_frame_ref(f, [this, slot] {
      std::lock_guard<std::mutex> lock(mutex_);
      in_use_[slot] = 0;
    }));
  }

  // The colour of pixel x in a row that crosses the square (`in_square`) or not: every row is
  // one of those two, so a frame is two rows drawn and copied (a 1080p frame in about a
  // millisecond, where drawing each pixel took tens).
  Rgb pixel(int x, bool in_square, uint64_t sequence) const {
    int w = config_.width;
    int shift = static_cast<int>((sequence * 4) % static_cast<uint64_t>(w));
    Rgb c = kBars[((x + shift) % w) * 8 / w];
    int sx = static_cast<int>((sequence * 7) % static_cast<uint64_t>(std::max(1, w - square_side())));
    if (in_square && x >= sx && x < sx + square_side()) c = {255, 128, 0};
    return c;
  }

  int square_side() const { return std::max(8, config_.height / 6); }

  // One row of the frame's first plane into `row` and, for NV12, of its chroma plane into `uv`.
  void draw_row(uint8_t* row, uint8_t* uv, bool in_square, uint64_t sequence) const {
    for (int x = 0; x < config_.width; x += 2) {
      Rgb a = pixel(x, in_square, sequence), b = pixel(x + 1, in_square, sequence);
      switch (config_.format) {
        case PixelFormat::RGB24: {
          uint8_t* p = row + static_cast<size_t>(x) * 3;
          p[0] = a.r, p[1] = a.g, p[2] = a.b, p[3] = b.r, p[4] = b.g, p[5] = b.b;
          break;
        }
        case PixelFormat::YUYV: {
          uint8_t y0, y1, u0, v0, u1, v1;
          rgb_to_yuv(a, &y0, &u0, &v0);
          rgb_to_yuv(b, &y1, &u1, &v1);
          uint8_t* p = row + static_cast<size_t>(x) * 2;
          p[0] = y0, p[1] = static_cast<uint8_t>((u0 + u1) / 2), p[2] = y1, p[3] = static_cast<uint8_t>((v0 + v1) / 2);
          break;
        }
        case PixelFormat::NV12: {
          uint8_t y0, y1, u, v;
          rgb_to_yuv(a, &y0, &u, &v);
          rgb_to_yuv(b, &y1, &u, &v);
          row[x] = y0, row[x + 1] = y1;
          uv[x] = u, uv[x + 1] = v;
          break;
        }
        default: break;
      }
    }
  }

  void draw(uint8_t* out, uint64_t sequence) const {
    const int w = config_.width, h = config_.height;
    const int sy = static_cast<int>((sequence * 5) % static_cast<uint64_t>(std::max(1, h - square_side())));
    const size_t stride = config_.format == PixelFormat::YUYV ? w * 2u
                          : config_.format == PixelFormat::NV12 ? static_cast<size_t>(w)
                                                                : w * 3u;
    std::vector<uint8_t> rows(stride * 2), uv(static_cast<size_t>(w) * 2);
    for (int band = 0; band < 2; ++band) draw_row(rows.data() + stride * band, uv.data() + w * band, band == 1, sequence);
    for (int y = 0; y < h; ++y) {
      const int band = y >= sy && y < sy + square_side();
      std::memcpy(out + static_cast<size_t>(y) * stride, rows.data() + stride * band, stride);
      if (config_.format == PixelFormat::NV12 && y % 2 == 0)
        std::memcpy(out + static_cast<size_t>(w) * h + static_cast<size_t>(y / 2) * w, uv.data() + w * band, w);
    }
  }

  SourceConfig config_;
  FrameCallback on_frame_;
  sd_event_source* timer_ = nullptr;
  uint64_t period_us_ = 33333;
  uint64_t next_sequence_ = 0;
  std::shared_ptr<FrameMemory> memory_;
  size_t bytes_ = 0;
  std::vector<uint8_t*> pool_;  // frames of bytes_ from memory_
  std::vector<char> in_use_;  // guarded by mutex_
  uint64_t triggers_ = 0;
  mutable std::mutex mutex_;
  SourceStats stats_;
};

}  // namespace

std::unique_ptr<FrameSource> make_test_pattern_source(const SourceConfig& config) {
  return std::make_unique<TestPatternSource>(config);
}

}  // namespace edgert::daemon
