// What a pipeline produces per processed frame, handed to every sink on the event loop.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace edgert::daemon {

struct Detection {
  int class_id = -1;
  std::string label;
  float score = 0;
  float box[4] = {0, 0, 0, 0};  // x1, y1, x2, y2 in input-image pixels (detection only)
};

struct StageTimes {
  double queue_us = 0;        // capture -> worker picked the frame up
  double preprocess_us = 0;
  double inference_us = 0;    // engine execute
  double gpu_us = -1;         // of which device time (GPU engines; -1: none)
  double postprocess_us = 0;
  double total_us = 0;        // capture timestamp -> result ready
};

struct Result {
  std::string pipeline;
  uint64_t sequence = 0;
  uint64_t capture_ns = 0;
  std::string engine;          // sha256 (or file name) of the engine that produced it
  StageTimes times;
  std::vector<Detection> detections;  // classification top-k, or detected objects
  nlohmann::json payload;      // postprocess output as JSON (top-k, boxes, segmentation summary, raw)
  uint32_t frame_copies = 0;   // extra copies of the frame beyond the one preprocess pass
  // Copies the engine's device made for this frame (inputs to the GPU, outputs back): 0 when a
  // camera engine reads a host-mapped frame in place. Counted process-wide by the plugin, so
  // pipelines sharing a GPU may see each other's.
  uint32_t device_copies = 0;
};

// What a sink holds for its readers (the socket sink; others hold nothing).
struct SinkCounters {
  size_t clients = 0;
  size_t buffered_bytes = 0;  // results written but not yet read by slow clients
  uint64_t dropped = 0;       // results slow clients never got (their oldest unsent ones)
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void publish(const Result& result) = 0;  // called on the loop thread; must not block
  virtual std::string describe() const = 0;
  virtual SinkCounters counters() const { return {}; }
};

}  // namespace edgert::daemon
