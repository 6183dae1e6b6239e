// One pipeline: source -> (frame queue) -> worker thread: preprocess, engine, postprocess
// -> results queue -> sinks on the loop thread. The queue holds at most queue_depth frames: when
// it is full, a new frame pushes out the oldest waiting one (dropped and counted), so a model
// slower than the camera never builds up more lag than that, while a short stall (the loop or
// the worker descheduled for a frame or two) loses nothing. Depth 1 is a latest-frame slot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "camera_frame_input.h"
#include "config.h"
#include "engine_handle.h"
#include "frame_source.h"
#include "latency_stats.h"
#include "memory_budget.h"
#include "postprocess.h"
#include "preprocess.h"
#include "result.h"

namespace edgert::daemon {

// Results travel from worker threads to the loop thread through this queue; `fd` is an eventfd
// the loop watches.
class ResultQueue {
 public:
  ResultQueue();
  ~ResultQueue();
  int fd() const { return fd_; }
  void push(Result result);
  std::deque<Result> drain();

 private:
  int fd_ = -1;
  std::mutex mutex_;
  std::deque<Result> results_;
};

// Memory a source's buffers take: width * height * bytes per pixel * buffers, plus the RGB
// image an MJPEG frame is decoded into. Reserved in the memory budget with the engine.
uint64_t frame_buffer_bytes(const SourceConfig& source);

// Runs one synthetic mid-grey frame of `config.source`'s size and format through preprocess,
// `engine` and postprocess as the pipeline would. Returns "" when it goes through, else why not
// (the input is not a float32 image, a kernel fails, postprocess does not find what it needs).
// Any thread: it uses its own preprocessor; call before `engine` serves frames (it runs the
// engine's one context).
std::string trial_frame(const PipelineConfig& config, EngineHandle& engine);

struct PipelineStats {
  uint64_t frames_in = 0, processed = 0, dropped = 0, errors = 0, source_gaps = 0;
  uint64_t unloaded_drops = 0;  // of `dropped`: frames that arrived while no engine was loaded
  double fps = 0;
  LatencySummary total, inference, preprocess, postprocess, queue;
  LatencySummary gpu;  // empty (count 0) for engines without a device
  uint64_t frame_copies = 0, device_copies = 0;
  std::string engine;
  std::string last_error;
  SinkCounters sinks;  // summed over the pipeline's sinks
};

class Pipeline {
 public:
  Pipeline(const PipelineConfig& config, const DaemonConfig& daemon, MemoryBudget& budget, ResultQueue& results);
  ~Pipeline();

  void start(sd_event* loop);
  void stop();
  void trigger();  // GPIO trigger input: capture the next frame (triggered sources)

  // Swaps in a loaded engine between two frames; returns the previous one. A null engine
  // unloads: frames are dropped (and counted) until the next swap.
  std::shared_ptr<EngineHandle> swap_engine(std::shared_ptr<EngineHandle> engine);
  std::shared_ptr<EngineHandle> engine() const;

  void add_sink(std::unique_ptr<Sink> sink) { sinks_.push_back(std::move(sink)); }
  void publish(const Result& result);  // loop thread: stats + sinks
  PipelineStats stats() const;
  SinkCounters sink_counters() const;  // loop thread: summed over the sinks
  // Frames that failed so far, and the last failure's message (any thread).
  uint64_t error_count(std::string* last_error) const;
  const PipelineConfig& config() const { return config_; }
  std::string describe_source() const { return source_->describe(); }
  // Where the source's own frame buffers live: "host", or "host-mapped (cuda)" on a GPU board.
  const std::string& frame_memory() const { return frame_memory_; }

 private:
  void on_frame(FrameRef frame);
  void worker_main();
  void process(FrameRef frame, const std::shared_ptr<EngineHandle>& engine);
  // Postprocess and queue the result of a run that ended at `inferred` (worker thread).
  void finish(Result result, const std::vector<edgert_tensor>& outputs, const EngineHandle& engine, int image_width,
              int image_height, uint64_t inferred);

  PipelineConfig config_;
  MemoryBudget& budget_;
  ResultQueue& results_;
  std::string frame_memory_;
  std::shared_ptr<FrameMemory> board_frame_memory_;  // host-mapped on a GPU board
  std::unique_ptr<FrameSource> source_;
  FrameStaging frame_staging_;  // worker thread only: a camera engine's frame packed or copied
  Preprocessor preprocessor_;
  Postprocessor postprocessor_;
  std::vector<std::unique_ptr<Sink>> sinks_;

  mutable std::mutex mutex_;  // guards frames_, engine_, stopping_, counters below
  std::condition_variable wake_;
  std::deque<FrameRef> frames_;
  std::shared_ptr<EngineHandle> engine_;
  bool stopping_ = false;
  uint64_t frames_in_ = 0, dropped_ = 0, errors_ = 0, unloaded_drops_ = 0;
  std::string last_error_;
  std::thread worker_;
  std::vector<float> input_buffer_;    // worker thread only

  // Loop-thread statistics.
  uint64_t processed_ = 0, frame_copies_ = 0, device_copies_ = 0;
  LatencyWindow total_, inference_, preprocess_, postprocess_, queue_;
  LatencyWindow gpu_;  // device time of GPU engines' runs
  std::deque<uint64_t> recent_capture_ns_;
};

}  // namespace edgert::daemon
