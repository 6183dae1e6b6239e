// Stage latencies two ways: percentiles over a sliding window of recent samples (bounded
// memory; what `edgertctl stats` shows), and a histogram of every sample since start (what the
// Prometheus endpoint exports: a scraper computes rates and quantiles from counters).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgert::daemon {

// Upper bounds of the histogram's buckets, in microseconds. Fixed, so that histograms of
// different pipelines and daemons can be summed by a scraper.
// From 100 us (a small model's stages on a CPU) to 2.5 s (a stalled frame).
constexpr std::array<double, 14> kLatencyBucketBoundsUs = {100,   250,    500,    1000,   2500,    5000,    10000,
                                                           25000, 50000,  100000, 250000, 500000, 1000000, 2500000};

struct LatencyHistogram {
  // Samples that fell in bucket i: above bound i-1, at most bound i. Not cumulative; samples
  // above the last bound are only in `count`.
  std::array<uint64_t, kLatencyBucketBoundsUs.size()> buckets{};
  uint64_t count = 0;  // every sample since start
  double sum_us = 0;
  void add(double us);
};

struct LatencySummary {
  double p50_us = 0, p99_us = 0, mean_us = 0;
  size_t samples = 0;  // in the window
  LatencyHistogram since_start;
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
  LatencyHistogram since_start_;
};

}  // namespace edgert::daemon
