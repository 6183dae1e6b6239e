#include "stream_sinks.h"

#include <systemd/sd-daemon.h>

#include <cstdio>

namespace edgert::daemon {

nlohmann::json result_to_json(const Result& r) {
  return {{"pipeline", r.pipeline},
          {"sequence", r.sequence},
          {"capture_ns", r.capture_ns},
          {"engine", r.engine},
          {"latency_us",
           {{"queue", r.times.queue_us},
            {"preprocess", r.times.preprocess_us},
            {"inference", r.times.inference_us},
            {"gpu", r.times.gpu_us},
            {"postprocess", r.times.postprocess_us},
            {"total", r.times.total_us}}},
          {"frame_copies", r.frame_copies},
          {"device_copies", r.device_copies},
          {"result", r.payload}};
}

SocketSink::SocketSink(const std::string& path, size_t buffer_bytes, sd_event* loop) : server_(path, buffer_bytes) {
  server_.start(loop);
}

SinkCounters SocketSink::counters() const {
  return {server_.client_count(), server_.buffered_bytes(), server_.dropped_messages()};
}

void SocketSink::publish(const Result& result) {
  if (server_.clients().empty()) return;
  std::string line = result_to_json(result).dump() + "\n";
  std::vector<int> fds;
  for (auto& [fd, client] : server_.clients()) fds.push_back(fd);
  for (int fd : fds) {
    auto it = server_.clients().find(fd);
    if (it != server_.clients().end()) server_.send(*it->second, line);
  }
}

void JournalSink::publish(const Result& result) {
  if (count_++ % static_cast<uint64_t>(every_n_) != 0) return;
  std::string top = result.detections.empty() ? "nothing"
                                              : result.detections[0].label + " " + std::to_string(result.detections[0].score);
  std::fprintf(stderr, SD_INFO "pipeline %s frame %llu: %s (total %.1f ms, inference %.1f ms)\n", result.pipeline.c_str(),
               static_cast<unsigned long long>(result.sequence), top.c_str(), result.times.total_us / 1000,
               result.times.inference_us / 1000);
}

}  // namespace edgert::daemon
