#include "calibration_histogram.h"

#include <algorithm>
#include <cmath>

namespace edgert::builder {

void CalibrationHistogram::add(const float* values, size_t count) {
  // First pass: the batch's extremes, so the range is settled before any of its values is
  // binned (binning against a range that then doubles would be exact too, but slower).
  float batch_magnitude = 0;
  for (size_t i = 0; i < count; ++i) {
    float x = values[i];
    if (!std::isfinite(x)) {
      ++non_finite_;
      continue;
    }
    if (samples_ == 0) {
      min_ = max_ = x;
    } else {
      min_ = std::min(min_, x);
      max_ = std::max(max_, x);
    }
    ++samples_;
    if (x == 0) ++zeros_;
    batch_magnitude = std::max(batch_magnitude, std::fabs(x));
  }
  if (batch_magnitude == 0) {
    // Only zeros (or nothing finite): bin 0 whatever the range is or becomes.
    uint64_t finite = 0;
    for (size_t i = 0; i < count; ++i) finite += std::isfinite(values[i]) ? 1 : 0;
    bins_[0] += finite;
    return;
  }
  if (range_ == 0)
    range_ = batch_magnitude;
  else
    grow_to_cover(batch_magnitude);

  const double width = bin_width();
  for (size_t i = 0; i < count; ++i) {
    float x = values[i];
    if (!std::isfinite(x)) continue;
    double magnitude = std::fabs(static_cast<double>(x));
    // Right-closed bins: (b * width, (b + 1) * width] is bin b; zero joins bin 0.
    double upper = std::ceil(magnitude / width);
    size_t bin = upper <= 1 ? 0 : static_cast<size_t>(upper) - 1;
    bins_[std::min(bin, kBins - 1)] += 1;
  }
}

void CalibrationHistogram::grow_to_cover(double magnitude) {
  while (range_ < magnitude) {
    // Bins 2b and 2b + 1 of width w are exactly bin b of width 2w (right-closed bins), and
    // range * 2 is exact, so every value already counted stays where it would have landed.
    for (size_t b = 0; b < kBins / 2; ++b) bins_[b] = bins_[2 * b] + bins_[2 * b + 1];
    std::fill(bins_.begin() + kBins / 2, bins_.end(), 0);
    range_ *= 2;
  }
}

double CalibrationHistogram::abs_percentile(double percent) const {
  if (samples_ == 0 || range_ == 0) return 0;
  double wanted = std::ceil(percent / 100.0 * static_cast<double>(samples_));
  uint64_t target = wanted < 1 ? 1 : std::min(samples_, static_cast<uint64_t>(wanted));
  uint64_t seen = 0;
  for (size_t b = 0; b < kBins; ++b) {
    seen += bins_[b];
    if (seen >= target) return static_cast<double>(b + 1) * bin_width();
  }
  return range_;
}

}  // namespace edgert::builder
