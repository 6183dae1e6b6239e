#include "latency_stats.h"

#include <algorithm>
#include <numeric>

namespace edgert::daemon {

void LatencyHistogram::add(double us) {
  auto bucket = std::lower_bound(kLatencyBucketBoundsUs.begin(), kLatencyBucketBoundsUs.end(), us);
  if (bucket != kLatencyBucketBoundsUs.end()) ++buckets[static_cast<size_t>(bucket - kLatencyBucketBoundsUs.begin())];
  ++count;
  sum_us += us;
}

void LatencyWindow::add(double us) {
  since_start_.add(us);
  if (samples_.size() < capacity_) {
    samples_.push_back(us);
  } else {
    samples_[next_] = us;
    next_ = (next_ + 1) % capacity_;
  }
}

LatencySummary LatencyWindow::summary() const {
  LatencySummary s;
  s.samples = samples_.size();
  s.since_start = since_start_;
  if (samples_.empty()) return s;
  std::vector<double> sorted = samples_;
  std::sort(sorted.begin(), sorted.end());
  auto at = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * (sorted.size() - 1) + 0.5))]; };
  s.p50_us = at(0.50);
  s.p99_us = at(0.99);
  s.mean_us = std::accumulate(sorted.begin(), sorted.end(), 0.0) / sorted.size();
  return s;
}

}  // namespace edgert::daemon
