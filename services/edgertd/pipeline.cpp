#include "pipeline.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <stdexcept>

namespace edgert::daemon {
namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::unique_ptr<FrameSource> make_source(const SourceConfig& config) {
  if (config.type == "v4l2") return make_v4l2_source(config);
  return make_test_pattern_source(config);
}

}  // namespace

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
      source_(make_source(config.source)),
      preprocessor_(config.preprocess),
      postprocessor_(config.postprocess) {
  EngineFootprint footprint = read_engine_footprint(config.engine);
  std::string refusal = budget_.reserve("pipeline:" + config.name, footprint.total(),
                                        "engine '" + config.engine + "' of pipeline '" + config.name + "'");
  if (!refusal.empty()) throw std::runtime_error(refusal);
  try {
    engine_ = std::make_shared<EngineHandle>(config.engine, daemon.plugin_path, daemon.board_profile.name, daemon.mlock_weights);
  } catch (...) {
    budget_.release("pipeline:" + config.name);
    throw;
  }
}

Pipeline::~Pipeline() {
  stop();
  budget_.release("pipeline:" + config_.name);
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
  uint64_t picked = now_ns();
  result.times.queue_us = (picked - frame_ref->capture_ns) / 1000.0;

  const edgert_tensor_info& info = engine->input();
  InputLayout layout = layout_for(info.dims, info.rank, frame_ref->width, frame_ref->height);
  size_t count = static_cast<size_t>(layout.channels) * layout.width * layout.height;
  if (input_buffer_.size() != count) input_buffer_.resize(count);
  int image_width = frame_ref->width, image_height = frame_ref->height;
  result.frame_copies = preprocessor_.run(*frame_ref, layout, input_buffer_.data());
  frame_ref.reset();  // the camera buffer goes back to the driver before inference starts
  uint64_t preprocessed = now_ns();
  result.times.preprocess_us = (preprocessed - picked) / 1000.0;

  edgert_tensor input{};
  input.dtype = EDGERT_DTYPE_FLOAT32;
  input.rank = 4;
  if (layout.nchw) {
    int64_t dims[4] = {1, layout.channels, layout.height, layout.width};
    std::copy(dims, dims + 4, input.dims);
  } else {
    int64_t dims[4] = {1, layout.height, layout.width, layout.channels};
    std::copy(dims, dims + 4, input.dims);
  }
  input.data = input_buffer_.data();
  const std::vector<edgert_tensor>& outputs = engine->run(input);
  uint64_t inferred = now_ns();
  result.times.inference_us = (inferred - preprocessed) / 1000.0;

  postprocessor_.run(outputs, engine->output_names(), image_width, image_height, &result);
  uint64_t done = now_ns();
  result.times.postprocess_us = (done - inferred) / 1000.0;
  result.times.total_us = (done - result.capture_ns) / 1000.0;
  results_.push(std::move(result));
}

void Pipeline::publish(const Result& result) {
  ++processed_;
  frame_copies_ += result.frame_copies;
  total_.add(result.times.total_us);
  inference_.add(result.times.inference_us);
  preprocess_.add(result.times.preprocess_us);
  postprocess_.add(result.times.postprocess_us);
  queue_.add(result.times.queue_us);
  recent_capture_ns_.push_back(result.capture_ns);
  while (recent_capture_ns_.size() > 2 && recent_capture_ns_.back() - recent_capture_ns_.front() > 2'000'000'000ull)
    recent_capture_ns_.pop_front();
  for (auto& sink : sinks_) sink->publish(result);
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
  s.source_gaps = source_->stats().driver_gaps;
  if (recent_capture_ns_.size() > 1)
    s.fps = (recent_capture_ns_.size() - 1) * 1e9 / (recent_capture_ns_.back() - recent_capture_ns_.front());
  s.total = total_.summary();
  s.inference = inference_.summary();
  s.preprocess = preprocess_.summary();
  s.postprocess = postprocess_.summary();
  s.queue = queue_.summary();
  return s;
}

}  // namespace edgert::daemon
