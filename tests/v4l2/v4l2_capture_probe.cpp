// Captures frames from a V4L2 device through make_v4l2_source() on an sd-event loop, checks
// them and prints one JSON line. Frames are dropped on a worker thread after --hold-ms, so the
// requeue path runs off the loop thread the way pipeline workers run it. Exit status: 0 when
// every check passed, 1 when a check failed or start() threw (the JSON says which), 2 on usage.
//
//   v4l2_capture_probe --device /dev/video0 --format nv12 --width 640 --height 480 --frames 30
//                      [--io mmap|dmabuf|userptr] [--buffers 4] [--fps 30] [--hold-ms 5] [--triggered]
//                      [--max-cpu-share 0.5] [--timeout-s 20]
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "frame_source.h"

using namespace edgert::daemon;

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out;
}

// Drops frames `hold_ms` after they arrive, on its own thread.
class DelayedRelease {
 public:
  explicit DelayedRelease(int hold_ms) : hold_(hold_ms), thread_([this] { run(); }) {}
  ~DelayedRelease() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(FrameRef frame) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({std::chrono::steady_clock::now() + hold_, std::move(frame)});
    }
    cv_.notify_all();
  }

 private:
  struct Held {
    std::chrono::steady_clock::time_point due;
    FrameRef frame;
  };
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (queue_.empty()) {
        if (done_) return;
        cv_.wait(lock);
        continue;
      }
      if (!done_ && cv_.wait_until(lock, queue_.front().due) != std::cv_status::timeout) continue;
      FrameRef frame = std::move(queue_.front().frame);
      queue_.pop_front();
      lock.unlock();
      frame.reset();  // requeues on this thread
      lock.lock();
    }
  }
  std::chrono::milliseconds hold_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Held> queue_;
  bool done_ = false;
  std::thread thread_;
};

struct Probe {
  SourceConfig config;
  int want_frames = 30;
  int hold_ms = 5;
  int timeout_s = 20;
  double max_cpu_share = 0;  // fail when the process used more CPU than this share of the time

  sd_event* loop = nullptr;
  std::unique_ptr<FrameSource> source;
  std::vector<std::string> failures;
  uint64_t start_ns = 0;
  int frames = 0;
  uint64_t first_seq = 0, last_seq = 0, first_ns = 0, last_ns = 0;
  uint64_t triggers = 0, last_trigger_ns = 0;
  size_t bytes_used = 0, strides[2] = {0, 0};
  bool dmabuf_checked = false;
  FrameRef kept;  // the last frame, held across stop() to prove a late release is safe

  void fail(const std::string& what) {
    if (failures.size() < 8) failures.push_back(what);
  }

  void check(const Frame& f) {
    const int n = frames;
    auto at = [&](const std::string& what) { fail("frame " + std::to_string(n) + ": " + what); };
    const uint64_t now = now_ns();
    if (n > 0 && f.sequence <= last_seq) at("sequence " + std::to_string(f.sequence) + " after " + std::to_string(last_seq));
    if (n > 0 && f.capture_ns <= last_ns) at("capture_ns not increasing");
    // The timestamp must be CLOCK_MONOTONIC: near now (vivid stamps the end of the frame it is
    // still filling, up to one period ahead) and not long before start().
    if (f.capture_ns > now + 200000000ull || f.capture_ns + 2000000000ull < start_ns) at("capture_ns " + std::to_string(f.capture_ns) + " is not CLOCK_MONOTONIC (now " + std::to_string(now) + ")");
    if (config.triggered && f.capture_ns < last_trigger_ns) at("delivered a frame captured before its trigger");
    if (f.width != config.width || f.height != config.height) at("size " + std::to_string(f.width) + "x" + std::to_string(f.height));
    if (f.format != config.format) at("format");
    if (!f.planes[0]) at("no plane 0");
    size_t min_stride = 0, min_bytes = 0;
    const size_t w = static_cast<size_t>(f.width), h = static_cast<size_t>(f.height);
    switch (f.format) {
      case PixelFormat::YUYV: min_stride = 2 * w; min_bytes = f.strides[0] * h; break;
      case PixelFormat::RGB24: min_stride = 3 * w; min_bytes = f.strides[0] * h; break;
      case PixelFormat::NV12:
        min_stride = w;
        min_bytes = f.strides[0] * h * 3 / 2;
        if (f.planes[1] != f.planes[0] + f.strides[0] * h || f.strides[1] != f.strides[0]) at("NV12 UV plane placement");
        break;
      case PixelFormat::MJPEG: min_bytes = 2; break;
    }
    if (f.strides[0] < min_stride) at("stride " + std::to_string(f.strides[0]) + " < " + std::to_string(min_stride));
    if (f.bytes_used < min_bytes) at("bytes_used " + std::to_string(f.bytes_used) + " < " + std::to_string(min_bytes));
    if (f.format == PixelFormat::MJPEG && f.planes[0] && (f.planes[0][0] != 0xff || f.planes[0][1] != 0xd8)) at("no JPEG SOI marker");
    if (f.planes[0] && f.format != PixelFormat::MJPEG) {
      // vivid's default pattern is colour bars: a row of zeros means we read the wrong memory.
      unsigned sum = 0;
      for (size_t i = 0; i < min_stride; ++i) sum |= f.planes[0][i];
      if (sum == 0) at("first row is all zero");
    }
    if (config.io == "dmabuf") {
      if (f.dmabuf_fd < 0) {
        at("no dmabuf fd");
      } else if (!dmabuf_checked) {
        dmabuf_checked = true;
        void* p = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, f.dmabuf_fd, 0);
        if (p == MAP_FAILED) at(std::string("mmap of the dmabuf: ") + strerror(errno));
        else {
          if (std::memcmp(p, f.planes[0], 4096) != 0) at("dmabuf content differs from the mmap buffer");
          munmap(p, 4096);
        }
      }
    } else if (f.dmabuf_fd >= 0) {
      at("dmabuf fd in mmap mode");
    }
    if (n == 0) {
      first_seq = f.sequence;
      first_ns = f.capture_ns;
    }
    last_seq = f.sequence;
    last_ns = f.capture_ns;
    bytes_used = f.bytes_used;
    strides[0] = f.strides[0];
    strides[1] = f.strides[1];
  }
};

int on_timeout(sd_event_source*, uint64_t, void* userdata) {
  auto* p = static_cast<Probe*>(userdata);
  p->fail("timed out after " + std::to_string(p->frames) + " frames");
  return sd_event_exit(p->loop, 0);
}

int on_trigger_timer(sd_event_source* s, uint64_t usec, void* userdata) {
  auto* p = static_cast<Probe*>(userdata);
  p->last_trigger_ns = now_ns();
  p->source->trigger();
  ++p->triggers;
  // ~6.7 triggers per second, slower than capture. Time sources are one-shot: re-arm.
  sd_event_source_set_time(s, usec + 150000);
  sd_event_source_set_enabled(s, SD_EVENT_ON);
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: v4l2_capture_probe --device DEV --format yuyv|nv12|rgb24|mjpeg [--width W] [--height H]\n"
               "       [--frames N] [--io mmap|dmabuf|userptr] [--buffers N] [--fps N] [--hold-ms MS] [--triggered]\n"
               "       [--max-cpu-share F] [--timeout-s S]\n");
}

}  // namespace

int main(int argc, char** argv) {
  Probe p;
  p.config.type = "v4l2";
  p.config.device = "/dev/video0";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") p.config.device = value();
    else if (a == "--format") {
      if (!parse_pixel_format(value(), &p.config.format)) { usage(); return 2; }
    } else if (a == "--width") p.config.width = std::atoi(value().c_str());
    else if (a == "--height") p.config.height = std::atoi(value().c_str());
    else if (a == "--fps") p.config.fps = std::atoi(value().c_str());
    else if (a == "--frames") p.want_frames = std::atoi(value().c_str());
    else if (a == "--io") p.config.io = value();
    else if (a == "--buffers") p.config.buffers = std::atoi(value().c_str());
    else if (a == "--hold-ms") p.hold_ms = std::atoi(value().c_str());
    else if (a == "--timeout-s") p.timeout_s = std::atoi(value().c_str());
    else if (a == "--max-cpu-share") p.max_cpu_share = std::atof(value().c_str());
    else if (a == "--triggered") p.config.triggered = true;
    else { usage(); return 2; }
  }

  sd_event_default(&p.loop);
  p.source = make_v4l2_source(p.config);
  std::string error, description;
  uint64_t elapsed_ns = 0;
  SourceStats stats;
  {
    DelayedRelease releaser(p.hold_ms);
    p.start_ns = now_ns();
    try {
      p.source->start(p.loop, [&](FrameRef frame) {
        p.check(*frame);
        ++p.frames;
        if (p.frames >= p.want_frames) {
          p.kept = frame;
          sd_event_exit(p.loop, 0);
        }
        releaser.push(std::move(frame));
      });
      description = p.source->describe();
      sd_event_add_time_relative(p.loop, nullptr, CLOCK_MONOTONIC, uint64_t(p.timeout_s) * 1000000, 0,
                                 on_timeout, &p);
      if (p.config.triggered)
        sd_event_add_time_relative(p.loop, nullptr, CLOCK_MONOTONIC, 100000, 0, on_trigger_timer, &p);
      sd_event_loop(p.loop);
      elapsed_ns = now_ns() - p.start_ns;
      stats = p.source->stats();
      p.source->stop();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  // The releaser has dropped everything; `kept` is the one frame still held after stop().
  if (p.kept) {
    volatile uint8_t touch = p.kept->planes[0][p.kept->bytes_used - 1];
    (void)touch;
    p.kept.reset();
  }
  p.source.reset();

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu_s = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                       (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  if (error.empty()) {
    // A source spinning on a starved queue shows up as CPU time close to the wall time.
    if (p.max_cpu_share > 0 && cpu_s > p.max_cpu_share * (elapsed_ns / 1e9))
      p.fail("used " + std::to_string(cpu_s) + " s of CPU in " + std::to_string(elapsed_ns / 1e9) + " s");
    if (stats.frames != static_cast<uint64_t>(p.frames)) p.fail("stats.frames " + std::to_string(stats.frames));
    if (p.config.triggered && static_cast<uint64_t>(p.frames) > p.triggers) p.fail("more frames than triggers");
  }
  const bool ok = error.empty() && p.failures.empty();
  const double span_s = (p.last_ns - p.first_ns) / 1e9;
  std::printf("{\"probe\":\"v4l2_capture\",\"ok\":%s,\"device\":\"%s\",\"format\":\"%s\",\"io\":\"%s\","
              "\"triggered\":%s,\"width\":%d,\"height\":%d,\"frames\":%d,\"first_sequence\":%llu,"
              "\"last_sequence\":%llu,\"driver_gaps\":%llu,\"fps_measured\":%.2f,\"elapsed_s\":%.2f,"
              "\"cpu_s\":%.2f,\"bytes_used\":%zu,\"strides\":[%zu,%zu],\"triggers\":%llu,\"describe\":\"%s\",\"error\":\"%s\","
              "\"failures\":[",
              ok ? "true" : "false", json_escape(p.config.device).c_str(), pixel_format_name(p.config.format),
              json_escape(p.config.io).c_str(), p.config.triggered ? "true" : "false", p.config.width,
              p.config.height, p.frames, (unsigned long long)p.first_seq, (unsigned long long)p.last_seq,
              (unsigned long long)stats.driver_gaps, p.frames > 1 && span_s > 0 ? (p.frames - 1) / span_s : 0.0,
              elapsed_ns / 1e9, cpu_s, p.bytes_used, p.strides[0], p.strides[1], (unsigned long long)p.triggers,
              json_escape(description).c_str(), json_escape(error).c_str());
  for (size_t i = 0; i < p.failures.size(); ++i)
    std::printf("%s\"%s\"", i ? "," : "", json_escape(p.failures[i]).c_str());
  std::printf("]}\n");
  sd_event_unref(p.loop);
  return ok ? 0 : 1;
}
