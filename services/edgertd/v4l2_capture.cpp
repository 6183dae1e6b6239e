#include "v4l2_capture.h"

#include <fcntl.h>
#include <linux/videodev2.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

namespace edgert::daemon {

namespace {

uint32_t to_fourcc(PixelFormat format) {
  switch (format) {
    case PixelFormat::YUYV: return V4L2_PIX_FMT_YUYV;
    case PixelFormat::NV12: return V4L2_PIX_FMT_NV12;
    case PixelFormat::RGB24: return V4L2_PIX_FMT_RGB24;
    case PixelFormat::MJPEG: return V4L2_PIX_FMT_MJPEG;
  }
  return 0;
}

std::string fourcc_text(uint32_t fourcc) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    char c = static_cast<char>((fourcc >> (8 * i)) & 0x7f);
    if (c != ' ') text += (c > ' ' && c < 0x7f) ? c : '?';
  }
  if (fourcc & (1u << 31)) text += "-BE";  // v4l2_fourcc_be(): the top bit marks big-endian
  return text;
}

int xioctl(int fd, unsigned long request, void* arg) {
  int r;
  do r = ioctl(fd, request, arg);
  while (r == -1 && errno == EINTR);
  return r;
}

uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] void throw_ioctl(const std::string& device, const char* ioctl_name, int err,
                              const std::string& hint = {}) {
  std::string message = "v4l2 " + device + ": " + ioctl_name + " failed: " + strerror(err);
  if (!hint.empty()) message += " (" + hint + ")";
  throw std::runtime_error(message);
}

}  // namespace

struct V4l2Capture::Shared {
  struct Buffer {
    void* addr = MAP_FAILED;  // the driver's buffer mapped (mmap, dmabuf), or ours (userptr)
    size_t length = 0;
    int dmabuf_fd = -1;
    bool held = false;  // dequeued and owned by a FrameRef
  };

  std::mutex mutex;
  int fd = -1;
  int wake_fd = -1;  // eventfd: a release after starvation wakes the loop to re-arm the io source
  uint32_t buf_type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  // V4L2_MEMORY_MMAP (io mmap and dmabuf) or V4L2_MEMORY_USERPTR (io userptr: the driver writes
  // into memory the daemon allocated, so whatever reads the frame next reads it in place).
  uint32_t memory = V4L2_MEMORY_MMAP;
  bool streaming = false;
  bool starved = false;  // every buffer is held; the io source is off until a release
  unsigned queued = 0;
  uint64_t requeue_errors = 0;
  std::vector<Buffer> buffers;
  std::shared_ptr<FrameMemory> user_memory;  // userptr: where the buffers come from

  bool mplane() const { return buf_type == V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE; }

  void unmap(Buffer& b) const {
    if (b.addr != MAP_FAILED) {
      if (memory == V4L2_MEMORY_USERPTR) user_memory->free(b.addr);
      else munmap(b.addr, b.length);
    }
    b.addr = MAP_FAILED;
    if (b.dmabuf_fd >= 0) close(b.dmabuf_fd);
    b.dmabuf_fd = -1;
  }

  // Caller holds `mutex`. Returns 0 or errno.
  int queue_locked(unsigned index) {
    v4l2_buffer buf{};
    v4l2_plane planes[VIDEO_MAX_PLANES]{};
    buf.type = buf_type;
    buf.memory = memory;
    buf.index = index;
    if (mplane()) {
      buf.m.planes = planes;
      buf.length = 1;
    }
    if (memory == V4L2_MEMORY_USERPTR) {
      const unsigned long address = reinterpret_cast<unsigned long>(buffers[index].addr);
      if (mplane()) {
        planes[0].m.userptr = address;
        planes[0].length = static_cast<uint32_t>(buffers[index].length);
      } else {
        buf.m.userptr = address;
        buf.length = static_cast<uint32_t>(buffers[index].length);
      }
    }
    if (xioctl(fd, VIDIOC_QBUF, &buf) < 0) return errno;
    ++queued;
    return 0;
  }

  // The FrameRef release: may run on any thread, before or after stop().
  void release(unsigned index) {
    std::lock_guard<std::mutex> lock(mutex);
    Buffer& b = buffers[index];
    b.held = false;
    if (!streaming) {
      unmap(b);
      return;
    }
    if (queue_locked(index) != 0) {
      ++requeue_errors;
      return;
    }
    if (starved) {
      starved = false;
      uint64_t one = 1;
      if (write(wake_fd, &one, sizeof one) < 0) {
        // The eventfd counter cannot overflow at one write per starvation; nothing to do.
      }
    }
  }

  ~Shared() {
    for (Buffer& b : buffers) unmap(b);
    if (fd >= 0) close(fd);
    if (wake_fd >= 0) close(wake_fd);
  }
};

V4l2Capture::V4l2Capture(SourceConfig config) : config_(std::move(config)) {}

V4l2Capture::~V4l2Capture() { stop(); }

void V4l2Capture::start(sd_event* loop, FrameCallback on_frame) {
  if (shared_) throw std::runtime_error("v4l2 " + config_.device + ": already started");
  const std::string& dev = config_.device;
  auto shared = std::make_shared<Shared>();

  shared->fd = open(dev.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (shared->fd < 0) {
    int err = errno;
    throw_ioctl(dev, "open", err,
                err == EACCES ? "is the user in the 'video' group?"
                : err == ENOENT ? "no such device node; is the driver loaded?" : "");
  }
  const int fd = shared->fd;

  v4l2_capability cap{};
  if (xioctl(fd, VIDIOC_QUERYCAP, &cap) < 0)
    throw_ioctl(dev, "VIDIOC_QUERYCAP", errno, errno == ENOTTY ? "not a V4L2 device" : "");
  const uint32_t caps = (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
  const std::string card = reinterpret_cast<const char*>(cap.card);
  if (caps & V4L2_CAP_VIDEO_CAPTURE)
    shared->buf_type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  else if (caps & V4L2_CAP_VIDEO_CAPTURE_MPLANE)
    shared->buf_type = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
  else
    throw std::runtime_error("v4l2 " + dev + " (" + card + "): not a video capture device");
  if (!(caps & V4L2_CAP_STREAMING))
    throw std::runtime_error("v4l2 " + dev + " (" + card + "): does not support streaming I/O");
  const bool mplane = shared->mplane();

  // S_FMT silently substitutes a format it does not offer, so check the list first.
  const uint32_t want = to_fourcc(config_.format);
  std::string offered;
  bool found = false;
  for (uint32_t i = 0;; ++i) {
    v4l2_fmtdesc desc{};
    desc.index = i;
    desc.type = shared->buf_type;
    if (xioctl(fd, VIDIOC_ENUM_FMT, &desc) < 0) break;
    if (desc.pixelformat == want) found = true;
    offered += (offered.empty() ? "" : ", ") + fourcc_text(desc.pixelformat);
  }
  if (!found)
    throw std::runtime_error("v4l2 " + dev + " (" + card + "): pixel format " +
                             pixel_format_name(config_.format) + " (" + fourcc_text(want) +
                             ") is not offered; the device offers: " +
                             (offered.empty() ? "nothing (VIDIOC_ENUM_FMT failed)" : offered));

  v4l2_format fmt{};
  fmt.type = shared->buf_type;
  if (mplane) {
    fmt.fmt.pix_mp.width = config_.width;
    fmt.fmt.pix_mp.height = config_.height;
    fmt.fmt.pix_mp.pixelformat = want;
    fmt.fmt.pix_mp.field = V4L2_FIELD_NONE;
  } else {
    fmt.fmt.pix.width = config_.width;
    fmt.fmt.pix.height = config_.height;
    fmt.fmt.pix.pixelformat = want;
    fmt.fmt.pix.field = V4L2_FIELD_NONE;
  }
  if (xioctl(fd, VIDIOC_S_FMT, &fmt) < 0)
    throw_ioctl(dev, "VIDIOC_S_FMT", errno, errno == EBUSY ? "another process is streaming from it" : "");
  const uint32_t got_fourcc = mplane ? fmt.fmt.pix_mp.pixelformat : fmt.fmt.pix.pixelformat;
  width_ = static_cast<int>(mplane ? fmt.fmt.pix_mp.width : fmt.fmt.pix.width);
  height_ = static_cast<int>(mplane ? fmt.fmt.pix_mp.height : fmt.fmt.pix.height);
  bytes_per_line_ = mplane ? fmt.fmt.pix_mp.plane_fmt[0].bytesperline : fmt.fmt.pix.bytesperline;
  if (got_fourcc != want)
    throw std::runtime_error("v4l2 " + dev + ": VIDIOC_S_FMT chose " + fourcc_text(got_fourcc) +
                             " instead of " + fourcc_text(want));
  if (mplane && fmt.fmt.pix_mp.num_planes != 1)
    throw std::runtime_error("v4l2 " + dev + ": " + fourcc_text(want) + " uses " +
                             std::to_string(fmt.fmt.pix_mp.num_planes) +
                             " memory planes; only single-buffer layouts are supported");
  if (width_ != config_.width || height_ != config_.height) {
    std::string sizes;
    for (uint32_t i = 0; i < 32; ++i) {
      v4l2_frmsizeenum fs{};
      fs.index = i;
      fs.pixel_format = want;
      if (xioctl(fd, VIDIOC_ENUM_FRAMESIZES, &fs) < 0) break;
      if (fs.type == V4L2_FRMSIZE_TYPE_DISCRETE) {
        sizes += (sizes.empty() ? "" : ", ") + std::to_string(fs.discrete.width) + "x" +
                 std::to_string(fs.discrete.height);
      } else {
        sizes = std::to_string(fs.stepwise.min_width) + "x" + std::to_string(fs.stepwise.min_height) +
                " to " + std::to_string(fs.stepwise.max_width) + "x" +
                std::to_string(fs.stepwise.max_height);
        break;
      }
    }
    throw std::runtime_error("v4l2 " + dev + ": " + std::to_string(config_.width) + "x" +
                             std::to_string(config_.height) + " " + pixel_format_name(config_.format) +
                             " not available (the driver chose " + std::to_string(width_) + "x" +
                             std::to_string(height_) + "); sizes offered: " +
                             (sizes.empty() ? "unknown" : sizes));
  }
  if (bytes_per_line_ == 0 && config_.format != PixelFormat::MJPEG)
    bytes_per_line_ = static_cast<size_t>(width_) * (config_.format == PixelFormat::YUYV ? 2
                                                     : config_.format == PixelFormat::RGB24 ? 3 : 1);

  // Frame rate is best effort: many drivers (UVC with fixed modes, some ISPs) cannot set it.
  fps_ = 0;
  v4l2_streamparm parm{};
  parm.type = shared->buf_type;
  if (xioctl(fd, VIDIOC_G_PARM, &parm) == 0) {
    if ((parm.parm.capture.capability & V4L2_CAP_TIMEPERFRAME) && config_.fps > 0) {
      parm.parm.capture.timeperframe.numerator = 1;
      parm.parm.capture.timeperframe.denominator = static_cast<uint32_t>(config_.fps);
      if (xioctl(fd, VIDIOC_S_PARM, &parm) < 0) throw_ioctl(dev, "VIDIOC_S_PARM", errno);
    }
    const v4l2_fract& tpf = parm.parm.capture.timeperframe;
    if (tpf.numerator != 0) fps_ = static_cast<double>(tpf.denominator) / tpf.numerator;
  }

  if (config_.io != "mmap" && config_.io != "dmabuf" && config_.io != "userptr")
    throw std::runtime_error("v4l2 " + dev + ": unknown io \"" + config_.io + "\" (mmap, dmabuf or userptr)");
  const bool userptr = config_.io == "userptr";
  shared->memory = userptr ? V4L2_MEMORY_USERPTR : V4L2_MEMORY_MMAP;
  v4l2_requestbuffers req{};
  req.count = static_cast<uint32_t>(config_.buffers > 0 ? config_.buffers : 4);
  req.type = shared->buf_type;
  req.memory = shared->memory;
  if (xioctl(fd, VIDIOC_REQBUFS, &req) < 0)
    throw_ioctl(dev, "VIDIOC_REQBUFS", errno, userptr && errno == EINVAL ? "the driver cannot capture into user memory; use io: mmap" : "");
  if (req.count == 0) throw std::runtime_error("v4l2 " + dev + ": VIDIOC_REQBUFS granted no buffers");
  shared->buffers.resize(req.count);

  if (userptr) {
    // Page-aligned, whole pages: what drivers that pin user memory for DMA accept.
    const size_t image = mplane ? fmt.fmt.pix_mp.plane_fmt[0].sizeimage : fmt.fmt.pix.sizeimage;
    // On a GPU board host-mapped memory (frame_memory.h): the engine's first kernel reads
    // where the driver wrote.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t length = (std::max<size_t>(image, 1) + page - 1) / page * page;
    shared->user_memory = config_.memory ? config_.memory : FrameMemory::host();
    for (Shared::Buffer& b : shared->buffers) {
      try {
        b.addr = shared->user_memory->allocate(length);
      } catch (const std::exception& e) {
        throw std::runtime_error("v4l2 " + dev + ": " + std::to_string(req.count) + " capture buffers: " + e.what());
      }
      b.length = length;
    }
  }
  for (uint32_t i = 0; i < req.count && !userptr; ++i) {
    v4l2_buffer buf{};
    v4l2_plane planes[VIDEO_MAX_PLANES]{};
    buf.type = shared->buf_type;
    buf.memory = V4L2_MEMORY_MMAP;
    buf.index = i;
    if (mplane) {
      buf.m.planes = planes;
      buf.length = VIDEO_MAX_PLANES;
    }
    if (xioctl(fd, VIDIOC_QUERYBUF, &buf) < 0) throw_ioctl(dev, "VIDIOC_QUERYBUF", errno);
    const size_t length = mplane ? planes[0].length : buf.length;
    const off_t offset = mplane ? planes[0].m.mem_offset : buf.m.offset;
    void* addr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    if (addr == MAP_FAILED) throw_ioctl(dev, "mmap", errno);
    shared->buffers[i].addr = addr;
    shared->buffers[i].length = length;
    if (config_.io == "dmabuf") {
      v4l2_exportbuffer exp{};
      exp.type = shared->buf_type;
      exp.index = i;
      exp.plane = 0;
      exp.flags = O_RDONLY | O_CLOEXEC;
      if (xioctl(fd, VIDIOC_EXPBUF, &exp) < 0)
        throw_ioctl(dev, "VIDIOC_EXPBUF", errno, "the driver cannot export DMABUF; use io: mmap");
      shared->buffers[i].dmabuf_fd = exp.fd;
    }
  }

  for (uint32_t i = 0; i < req.count; ++i)
    if (int err = shared->queue_locked(i)) throw_ioctl(dev, "VIDIOC_QBUF", err);
  uint32_t type = shared->buf_type;
  if (xioctl(fd, VIDIOC_STREAMON, &type) < 0) throw_ioctl(dev, "VIDIOC_STREAMON", errno);
  shared->streaming = true;

  shared->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (shared->wake_fd < 0) throw_ioctl(dev, "eventfd", errno);
  sd_event_source* io = nullptr;
  sd_event_source* wake = nullptr;
  int r = sd_event_add_io(loop, &io, fd, EPOLLIN, &V4l2Capture::on_io, this);
  if (r < 0) throw_ioctl(dev, "sd_event_add_io", -r);
  r = sd_event_add_io(loop, &wake, shared->wake_fd, EPOLLIN, &V4l2Capture::on_wake, this);
  if (r < 0) {
    sd_event_source_disable_unref(io);
    throw_ioctl(dev, "sd_event_add_io", -r);
  }

  io_source_ = io;
  wake_source_ = wake;
  on_frame_ = std::move(on_frame);
  shared_ = std::move(shared);
  have_sequence_ = false;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    error_.clear();
  }
}

void V4l2Capture::stop() {
  if (!shared_) return;
  io_source_ = sd_event_source_disable_unref(io_source_);
  wake_source_ = sd_event_source_disable_unref(wake_source_);
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->streaming) {
      uint32_t type = shared_->buf_type;
      xioctl(shared_->fd, VIDIOC_STREAMOFF, &type);  // fails only if the device is gone: closing is enough
      shared_->streaming = false;
    }
    // Closed first: the queue lets go of user memory it pinned (userptr) only when it is freed.
    // Held buffers stay mapped after close: the mapping keeps the driver's memory alive.
    close(shared_->fd);
    shared_->fd = -1;
    for (Shared::Buffer& b : shared_->buffers)
      if (!b.held) shared_->unmap(b);
    close(shared_->wake_fd);
    shared_->wake_fd = -1;
  }
  shared_.reset();
  // on_frame_ stays: stop() may run inside it, and start() replaces it.
}

void V4l2Capture::trigger() {
  trigger_ns_.store(monotonic_now_ns());
  trigger_pending_.store(true);
}

int V4l2Capture::on_io(sd_event_source*, int, uint32_t, void* userdata) {
  static_cast<V4l2Capture*>(userdata)->dequeue_ready();
  return 0;
}

int V4l2Capture::on_wake(sd_event_source*, int fd, uint32_t, void* userdata) {
  auto* self = static_cast<V4l2Capture*>(userdata);
  uint64_t count;
  if (read(fd, &count, sizeof count) < 0 && errno != EAGAIN) return 0;
  if (self->io_source_) sd_event_source_set_enabled(self->io_source_, SD_EVENT_ON);
  return 0;
}

void V4l2Capture::fail_stream(const std::string& message) {
  sd_event_source_set_enabled(io_source_, SD_EVENT_OFF);
  std::lock_guard<std::mutex> lock(error_mutex_);
  error_ = message;
}

void V4l2Capture::dequeue_ready() {
  // Keeps the state alive if the callback calls stop(); the callback must not destroy the source.
  std::shared_ptr<Shared> shared = shared_;
  const bool mplane = shared->mplane();
  for (;;) {
    if (!shared_) return;  // the callback called stop()
    v4l2_buffer buf{};
    v4l2_plane planes[VIDEO_MAX_PLANES]{};
    buf.type = shared->buf_type;
    buf.memory = shared->memory;
    if (mplane) {
      buf.m.planes = planes;
      buf.length = VIDEO_MAX_PLANES;
    }
    {
      std::lock_guard<std::mutex> lock(shared->mutex);
      if (xioctl(shared->fd, VIDIOC_DQBUF, &buf) < 0) {
        int err = errno;
        if (err == EAGAIN) {
          // vb2 reports EPOLLERR while nothing is queued on some kernels: without this the
          // loop would spin until a consumer releases a buffer.
          if (shared->queued == 0) {
            shared->starved = true;
            sd_event_source_set_enabled(io_source_, SD_EVENT_OFF);
          }
          return;
        }
        fail_stream("VIDIOC_DQBUF failed: " + std::string(strerror(err)));
        return;
      }
      if (buf.index >= shared->buffers.size()) {
        fail_stream("VIDIOC_DQBUF returned buffer " + std::to_string(buf.index) + " of " +
                    std::to_string(shared->buffers.size()));
        return;
      }
      --shared->queued;
      shared->buffers[buf.index].held = true;
    }
    const unsigned index = buf.index;
    auto requeue = [&] { shared->release(index); };

    // Extend the driver's 32-bit sequence so gaps stay right across a wrap.
    uint64_t sequence = buf.sequence;
    if (have_sequence_) {
      sequence |= last_sequence_ & ~0xffffffffull;
      if (sequence < last_sequence_) sequence += 1ull << 32;
      if (sequence > last_sequence_ + 1) driver_gaps_ += sequence - last_sequence_ - 1;
    }
    last_sequence_ = sequence;
    have_sequence_ = true;
    if (buf.flags & V4L2_BUF_FLAG_ERROR) {  // corrupted payload: drop it like the driver would
      ++driver_gaps_;
      requeue();
      continue;
    }

    const uint64_t dequeued_ns = monotonic_now_ns();
    uint64_t capture_ns = dequeued_ns;  // unknown or copied timestamps: dequeue time is the best we have
    if ((buf.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK) == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC)
      // Not after the dequeue: a driver may stamp a frame with a time it computes rather than
      // reads (vivid stamps frames ahead of the clock), and every latency counts from here.
      capture_ns = std::min<uint64_t>(dequeued_ns, static_cast<uint64_t>(buf.timestamp.tv_sec) * 1000000000ull +
                                             static_cast<uint64_t>(buf.timestamp.tv_usec) * 1000ull);

    if (config_.triggered) {
      if (!trigger_pending_.load() || capture_ns < trigger_ns_.load()) {
        requeue();
        continue;
      }
      trigger_pending_.store(false);
    }

    const Shared::Buffer& mapped = shared->buffers[index];
    const size_t data_offset = mplane ? planes[0].data_offset : 0;
    Frame frame;
    frame.sequence = sequence;
    frame.capture_ns = capture_ns;
    frame.format = config_.format;
    frame.width = width_;
    frame.height = height_;
    frame.planes[0] = static_cast<const uint8_t*>(mapped.addr) + data_offset;
    frame.strides[0] = bytes_per_line_;
    if (config_.format == PixelFormat::NV12) {
      frame.planes[1] = frame.planes[0] + bytes_per_line_ * static_cast<size_t>(height_);
      frame.strides[1] = bytes_per_line_;
    }
    const size_t payload_end = mplane ? planes[0].bytesused : buf.bytesused;
    frame.bytes_used = payload_end > data_offset ? payload_end - data_offset : 0;
    frame.dmabuf_fd = mapped.dmabuf_fd;
    frame.device_mapped = shared->memory == V4L2_MEMORY_USERPTR && shared->user_memory->device_mapped();

    FrameRef ref = make_frame_ref(frame, [shared, index] { shared->release(index); });
    ++frames_;
    try {
      on_frame_(std::move(ref));
    } catch (const std::exception& e) {
      fail_stream(std::string("frame callback threw: ") + e.what());
      return;
    }
  }
}

std::string V4l2Capture::describe() const {
  const bool started = width_ > 0;
  int fps = static_cast<int>((started && fps_ > 0 ? fps_ : config_.fps) + 0.5);  // 0: G_PARM unsupported
  std::string text = "v4l2 " + config_.device + " " + std::to_string(started ? width_ : config_.width) +
                     "x" + std::to_string(started ? height_ : config_.height) + " " +
                     pixel_format_name(config_.format) + " " + std::to_string(fps) + " fps (" +
                     config_.io + (config_.io == "userptr" && config_.memory && config_.memory->device_mapped()
                                       ? " into " + config_.memory->describe() + " memory"
                                       : "") +
                     (config_.triggered ? ", triggered" : "") + ")";
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (!error_.empty()) text += " [stopped: " + error_ + "]";
  return text;
}

SourceStats V4l2Capture::stats() const {
  SourceStats s;
  s.frames = frames_.load();
  s.driver_gaps = driver_gaps_.load();
  return s;
}

std::unique_ptr<FrameSource> make_v4l2_source(const SourceConfig& config) {
  return std::make_unique<V4l2Capture>(config);
}

}  // namespace edgert::daemon
