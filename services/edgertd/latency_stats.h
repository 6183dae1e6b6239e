// Latency percentiles over a sliding window of recent samples (bounded memory).
#pragma once

#include <cstddef>
#include <vector>

namespace edgert::daemon {

struct LatencySummary {
  double p50_us = 0, p99_us = 0, mean_us = 0;
  size_t samples = 0;
};

class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity = 1024) : capacity_(capacity) { samples_.reserve(capacity); }
  void add(double us);
  LatencySummary summary() const;

 private:
  size_t capacity_;
  size_t next_ = 0;
  std::vector<double> samples_;
};

}  // namespace edgert::daemon
