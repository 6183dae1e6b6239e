#include "pipeline.h"

#include "camera_frame_input.h"
#include "host_mapped_frame_memory.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

namespace edgert::daemon {
namespace {

// The source's configuration with its frame buffers' memory: `memory` (the board's frame
// memory, host-mapped on a GPU board: host_mapped_frame_memory.h) but where the test pattern
// stands in for driver-owned buffers (io mmap: host memory, a GPU reads it by a copy).
SourceConfig with_frame_memory(SourceConfig config, const std::shared_ptr<FrameMemory>& memory, std::string* note) {
  config.memory = memory;
  if (config.type == "test-pattern" && config.io == "mmap" && memory->device_mapped()) {
    config.memory = FrameMemory::host();
    *note = "host (test pattern io mmap: as a driver's own buffers)";
  }
  return config;
}

std::unique_ptr<FrameSource> make_source(const SourceConfig& config) {
  if (config.type == "v4l2") return make_v4l2_source(config);
  return make_test_pattern_source(config);
}

// The engine input the preprocessed image in `data` makes.
edgert_tensor image_tensor(const InputLayout& layout, float* data) {
  edgert_tensor input{};
  input.dtype = EDGERT_DTYPE_FLOAT32;
  input.rank = 4;
  int64_t nchw[4] = {1, layout.channels, layout.height, layout.width};
  int64_t nhwc[4] = {1, layout.height, layout.width, layout.channels};
  std::copy(layout.nchw ? nchw : nhwc, (layout.nchw ? nchw : nhwc) + 4, input.dims);
  input.data = data;
  return input;
}

}  // namespace

// A mid-grey frame of the source's format and size, rows packed.
std::vector<uint8_t> grey_frame(const SourceConfig& source, Frame* frame) {
  const size_t pixels = static_cast<size_t>(source.width) * source.height;
  std::vector<uint8_t> grey(pixels * 3, 128);
  frame->format = source.format;
  frame->width = source.width;
  frame->height = source.height;
  frame->planes[0] = grey.data();
  frame->planes[1] = grey.data() + pixels;
  frame->strides[0] = source.format == PixelFormat::YUYV    ? source.width * 2
                      : source.format == PixelFormat::RGB24 ? source.width * 3
                                                            : source.width;
  frame->strides[1] = source.width;
  frame->bytes_used = grey.size();
  return grey;
}

std::string trial_frame(const PipelineConfig& config, EngineHandle& engine) {
  try {
    const edgert_tensor_info& info = engine.input();
    const SourceConfig& source = config.source;
    if (std::optional<CameraFrameInput> camera = camera_frame_input(info)) {
      const std::string mismatch = camera_frame_mismatch(*camera, source.format, source.width, source.height);
      if (!mismatch.empty()) return mismatch;
      Frame frame;
      std::vector<uint8_t> grey = grey_frame(source, &frame);
      FrameStaging staging(FrameMemory::host());
      uint32_t copies = 0;
      const std::vector<edgert_tensor>& outputs =
          engine.run(camera_frame_tensor(frame, *camera, staging, false, &copies));
      Result result;
      Postprocessor(config.postprocess).run(outputs, engine.output_names(), source.width, source.height, &result);
      return "";
    }
    if (info.dtype != EDGERT_DTYPE_FLOAT32)
      return std::string("engine input '") + (info.name ? info.name : "") + "' is not float32, as preprocess writes it";
    InputLayout layout = layout_for(info.dims, info.rank, source.width, source.height);
    std::vector<float> input(static_cast<size_t>(layout.channels) * layout.width * layout.height, 0.5f);
    if (source.format != PixelFormat::MJPEG) {  // a grey JPEG is not worth encoding: the input is filled as it would be
      Frame frame;
      std::vector<uint8_t> grey = grey_frame(source, &frame);
      Preprocessor(config.preprocess).run(frame, layout, input.data());
    }
    const std::vector<edgert_tensor>& outputs = engine.run(image_tensor(layout, input.data()));
    Result result;
    Postprocessor(config.postprocess).run(outputs, engine.output_names(), source.width, source.height, &result);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

uint64_t frame_buffer_bytes(const SourceConfig& source) {
  uint64_t pixels = static_cast<uint64_t>(source.width) * static_cast<uint64_t>(source.height);
  // Halves: NV12 is 1.5 bytes per pixel. MJPEG buffers are sized by the driver; YUYV's size is
  // what drivers allot for the compressed worst case.
  uint64_t half_bytes_per_pixel = 4;
  switch (source.format) {
    case PixelFormat::YUYV: half_bytes_per_pixel = 4; break;
    case PixelFormat::NV12: half_bytes_per_pixel = 3; break;
    case PixelFormat::RGB24: half_bytes_per_pixel = 6; break;
    case PixelFormat::MJPEG: half_bytes_per_pixel = 4; break;
  }
  uint64_t bytes = pixels * half_bytes_per_pixel / 2 * static_cast<uint64_t>(source.buffers);
  if (source.format == PixelFormat::MJPEG) bytes += pixels * 3;  // the decoded RGB24 image
  return bytes;
}

ResultQueue::ResultQueue() {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error("eventfd failed");
}

ResultQueue::~ResultQueue() {
  if (fd_ >= 0) close(fd_);
}

void ResultQueue::push(Result result) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    results_.push_back(std::move(result));
  }
  uint64_t one = 1;
  ssize_t unused = write(fd_, &one, sizeof one);
  (void)unused;
}

std::deque<Result> ResultQueue::drain() {
  uint64_t count;
  ssize_t unused = read(fd_, &count, sizeof count);
  (void)unused;
  std::lock_guard<std::mutex> lock(mutex_);
  std::deque<Result> out;
  out.swap(results_);
  return out;
}

Pipeline::Pipeline(const PipelineConfig& config, const DaemonConfig& daemon, MemoryBudget& budget, ResultQueue& results)
    : config_(config),
      budget_(budget),
      results_(results),
      board_frame_memory_(frame_memory_for_board(daemon.board_profile, daemon.plugin_path, &frame_memory_)),
      source_(make_source(with_frame_memory(config.source, board_frame_memory_, &frame_memory_))),
      frame_staging_(board_frame_memory_),
      preprocessor_(config.preprocess),
      postprocessor_(config.postprocess) {
  uint64_t frames = frame_buffer_bytes(config.source);
  std::string refusal = budget_.reserve("frames:" + config.name, frames,
                                        "the frame buffers of pipeline '" + config.name + "' (" + std::to_string(config.source.width) +
                                            "x" + std::to_string(config.source.height) + " " + pixel_format_name(config.source.format) +
                                            " x " + std::to_string(config.source.buffers) + ")");
  if (!refusal.empty()) throw std::runtime_error(refusal);
  EngineFootprint footprint;
  try {
    footprint = read_engine_footprint(config.engine);
  } catch (...) {
    budget_.release("frames:" + config.name);
    throw;
  }
  refusal = budget_.reserve("pipeline:" + config.name, footprint.total(),
                                        "engine '" + config.engine + "' of pipeline '" + config.name + "'");
  if (refusal.empty()) {
    refusal = device_memory_refusal(footprint, daemon.plugin_path,
                                    "engine '" + config.engine + "' of pipeline '" + config.name + "'");
    if (!refusal.empty()) budget_.release("pipeline:" + config.name);
  }
  if (!refusal.empty()) {
    budget_.release("frames:" + config.name);
    throw std::runtime_error(refusal);
  }
  try {
    engine_ = std::make_shared<EngineHandle>(config.engine, daemon.plugin_path, daemon.board_profile.name, daemon.mlock_weights,
                                             "", config.gpu);
  } catch (...) {
    budget_.release("pipeline:" + config.name);
    budget_.release("frames:" + config.name);
    throw;
  }
  // The float copy preprocess writes for the engine: the frame's size when the engine's
  // height and width are dynamic, so it belongs with the frame buffers.
  // A camera engine reads the frame itself: at most a packed copy of it (padded rows).
  uint64_t input_bytes = 0;
  try {
    const edgert_tensor_info& info = engine_->input();
    if (camera_frame_input(info)) {
      input_bytes = frame_buffer_bytes(config.source) / std::max(1, config.source.buffers);
    } else {
      InputLayout layout = layout_for(info.dims, info.rank, config.source.width, config.source.height);
      input_bytes = static_cast<uint64_t>(layout.channels) * layout.width * layout.height * sizeof(float);
    }
  } catch (const std::exception&) {
    // Not an image input: every frame fails and says why; nothing is allocated for it.
  }
  refusal = budget_.reserve("frames:" + config.name, frames + input_bytes,
                            "the frame buffers and engine input of pipeline '" + config.name + "'");
  if (!refusal.empty()) {
    engine_.reset();
    budget_.release("pipeline:" + config.name);
    budget_.release("frames:" + config.name);
    throw std::runtime_error(refusal);
  }
}

Pipeline::~Pipeline() {
  stop();
  budget_.release("pipeline:" + config_.name);
  budget_.release("frames:" + config_.name);
}

void Pipeline::start(sd_event* loop) {
  worker_ = std::thread([this] { worker_main(); });
  source_->start(loop, [this](FrameRef frame) { on_frame(std::move(frame)); });
}

void Pipeline::stop() {
  if (source_) source_->stop();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    frames_.clear();
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Pipeline::trigger() { source_->trigger(); }

std::shared_ptr<EngineHandle> Pipeline::swap_engine(std::shared_ptr<EngineHandle> engine) {
  std::lock_guard<std::mutex> lock(mutex_);
  engine_.swap(engine);
  return engine;
}

std::shared_ptr<EngineHandle> Pipeline::engine() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return engine_;
}

void Pipeline::on_frame(FrameRef frame) {
  FrameRef stale;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++frames_in_;
    if (frames_.size() >= static_cast<size_t>(config_.queue_depth)) {
      ++dropped_;
      stale = std::move(frames_.front());  // released outside the lock: its buffer goes back to the source
      frames_.pop_front();
    }
    frames_.push_back(std::move(frame));
  }
  wake_.notify_one();
}

void Pipeline::worker_main() {
  for (;;) {
    FrameRef frame;
    std::shared_ptr<EngineHandle> engine;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !frames_.empty(); });
      if (stopping_) return;
      frame = std::move(frames_.front());
      frames_.pop_front();
      // The engine is taken per frame, so a swap lands exactly between two frames.
      engine = engine_;
      if (!engine) {
        // Unloaded, or a stop-first swap is loading the next engine: nothing can run the frame.
        ++dropped_;
        ++unloaded_drops_;
        continue;
      }
    }
    try {
      process(std::move(frame), engine);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++errors_;
      last_error_ = e.what();
    }
  }
}

void Pipeline::process(FrameRef frame_ref, const std::shared_ptr<EngineHandle>& engine) {
  Result result;
  result.pipeline = config_.name;
  result.sequence = frame_ref->sequence;
  result.capture_ns = frame_ref->capture_ns;
  result.engine = engine->id();
  uint64_t picked = monotonic_ns();
  result.times.queue_us = (picked - frame_ref->capture_ns) / 1000.0;

  const edgert_tensor_info& info = engine->input();
  if (std::optional<CameraFrameInput> camera = camera_frame_input(info)) {
    // The engine converts the frame itself: its buffer stays with the frame until the run ends.
    // On a GPU board the frame is bound in host-mapped memory, where the engine's first kernel
    // reads it: the capture buffer itself, else one copy into the staging buffer.
    const bool in_place = frame_staging_.device_mapped() && engine->can_run_in_place();
    uint32_t copies = 0;
    const edgert_tensor frame = camera_frame_tensor(*frame_ref, *camera, frame_staging_, in_place, &copies);
    result.frame_copies = copies;
    const int image_width = frame_ref->width, image_height = frame_ref->height;
    const uint64_t ready = monotonic_ns();
    result.times.preprocess_us = (ready - picked) / 1000.0;
    const uint64_t copies_before = engine->device_copies();
    const std::vector<edgert_tensor>& outputs = in_place ? engine->run_in_place(frame) : engine->run(frame);
    result.device_copies = static_cast<uint32_t>(engine->device_copies() - copies_before);
    result.times.gpu_us = engine->device_us();
    frame_ref.reset();
    const uint64_t inferred = monotonic_ns();
    result.times.inference_us = (inferred - ready) / 1000.0;
    finish(std::move(result), outputs, *engine, image_width, image_height, inferred);
    return;
  }
  InputLayout layout = layout_for(info.dims, info.rank, frame_ref->width, frame_ref->height);
  size_t count = static_cast<size_t>(layout.channels) * layout.width * layout.height;
  if (input_buffer_.size() != count) input_buffer_.resize(count);
  int image_width = frame_ref->width, image_height = frame_ref->height;
  result.frame_copies = preprocessor_.run(*frame_ref, layout, input_buffer_.data());
  frame_ref.reset();  // the camera buffer goes back to the driver before inference starts
  uint64_t preprocessed = monotonic_ns();
  result.times.preprocess_us = (preprocessed - picked) / 1000.0;

  const uint64_t copies_before = engine->device_copies();
  const std::vector<edgert_tensor>& outputs = engine->run(image_tensor(layout, input_buffer_.data()));
  result.device_copies = static_cast<uint32_t>(engine->device_copies() - copies_before);
  result.times.gpu_us = engine->device_us();
  uint64_t inferred = monotonic_ns();
  result.times.inference_us = (inferred - preprocessed) / 1000.0;
  finish(std::move(result), outputs, *engine, image_width, image_height, inferred);
}

void Pipeline::finish(Result result, const std::vector<edgert_tensor>& outputs, const EngineHandle& engine,
                      int image_width, int image_height, uint64_t inferred) {
  postprocessor_.run(outputs, engine.output_names(), image_width, image_height, &result);
  uint64_t done = monotonic_ns();
  result.times.postprocess_us = (done - inferred) / 1000.0;
  result.times.total_us = (done - result.capture_ns) / 1000.0;
  results_.push(std::move(result));
}

void Pipeline::publish(const Result& result) {
  ++processed_;
  frame_copies_ += result.frame_copies;
  device_copies_ += result.device_copies;
  total_.add(result.times.total_us);
  inference_.add(result.times.inference_us);
  if (result.times.gpu_us >= 0) gpu_.add(result.times.gpu_us);
  preprocess_.add(result.times.preprocess_us);
  postprocess_.add(result.times.postprocess_us);
  queue_.add(result.times.queue_us);
  recent_capture_ns_.push_back(result.capture_ns);
  while (recent_capture_ns_.size() > 2 && recent_capture_ns_.back() - recent_capture_ns_.front() > 2'000'000'000ull)
    recent_capture_ns_.pop_front();
  for (auto& sink : sinks_) sink->publish(result);
}

SinkCounters Pipeline::sink_counters() const {
  SinkCounters sum;
  for (const auto& sink : sinks_) {
    SinkCounters c = sink->counters();
    sum.clients += c.clients;
    sum.buffered_bytes += c.buffered_bytes;
    sum.dropped += c.dropped;
  }
  return sum;
}

uint64_t Pipeline::error_count(std::string* last_error) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *last_error = last_error_;
  return errors_;
}

PipelineStats Pipeline::stats() const {
  PipelineStats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s.frames_in = frames_in_;
    s.dropped = dropped_;
    s.errors = errors_;
    s.last_error = last_error_;
    s.engine = engine_ ? engine_->id() : "";
    s.unloaded_drops = unloaded_drops_;
  }
  s.processed = processed_;
  s.frame_copies = frame_copies_;
  s.device_copies = device_copies_;
  s.source_gaps = source_->stats().driver_gaps;
  if (recent_capture_ns_.size() > 1)
    s.fps = (recent_capture_ns_.size() - 1) * 1e9 / (recent_capture_ns_.back() - recent_capture_ns_.front());
  s.total = total_.summary();
  s.inference = inference_.summary();
  s.gpu = gpu_.summary();
  s.preprocess = preprocess_.summary();
  s.postprocess = postprocess_.summary();
  s.queue = queue_.summary();
  s.sinks = sink_counters();
  return s;
}

}  // namespace edgert::daemon
