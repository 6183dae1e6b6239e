// Order statistics of latency samples, shared by `edgert bench` and its --versus mode.
#pragma once

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

namespace edgert::cli {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Nearest-rank percentile of sorted values (p in (0, 100]).
inline double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

// {min, median, mean, p90, p99, max} of latency samples in ms: the JSON `latency_ms` object.
inline nlohmann::ordered_json latency_json(std::vector<double> ms) {
  if (ms.empty()) return nullptr;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  return {{"min", ms.front()},          {"median", median(ms)},           {"mean", sum / static_cast<double>(ms.size())},
          {"p90", percentile(ms, 90)}, {"p99", percentile(ms, 99)}, {"max", ms.back()}};
}

}  // namespace edgert::cli
