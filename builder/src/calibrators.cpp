#include "calibrators.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "build_error.h"

namespace edgert::builder {
namespace {

constexpr const char* kAcceptedForms = "entropy, minmax, percentile or percentile:P with P in (0, 100]";

// The fewest significant digits that read back to the same double, so names stay short
// ("99.99", not "99.989999999999995") and still identify the parameter exactly; without an
// exponent where %g allows ("100", not "1e+02").
std::string shortest_decimal(double value) {
  char text[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    bool plain = std::strchr(text, 'e') == nullptr || std::fabs(value) < 1e-4;
    if (plain && std::strtod(text, nullptr) == value) break;
  }
  return text;
}

// Levels the quantised distribution may use: |x| of a signed tensor gets half of uint8's 256.
size_t entropy_levels(const CalibrationHistogram& stats) { return stats.min() < 0 ? 128 : 256; }

}  // namespace

CalibratorChoice parse_calibrator(const std::string& text) {
  CalibratorChoice choice;
  if (text == "entropy") return choice;
  if (text == "minmax") {
    choice.kind = Calibrator::kMinMax;
    return choice;
  }
  const std::string percentile = "percentile";
  if (text.compare(0, percentile.size(), percentile) == 0) {
    choice.kind = Calibrator::kPercentile;
    if (text.size() == percentile.size()) return choice;
    if (text[percentile.size()] == ':' && text.size() > percentile.size() + 1) {
      const char* number = text.c_str() + percentile.size() + 1;
      char* end = nullptr;
      errno = 0;
      double p = std::strtod(number, &end);
      if (errno == 0 && *end == '\0' && std::isfinite(p) && p > 0 && p <= 100 && !std::isspace(*number)) {
        choice.percentile = p;
        return choice;
      }
      build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                 "calibrator '%s': the percentile must be a number in (0, 100], e.g. percentile:99.99", text.c_str());
    }
  }
  build_fail(EDGERT_ERR_INVALID_ARGUMENT, "unknown calibrator '%s': expected %s", text.c_str(), kAcceptedForms);
}

std::string calibrator_name(const CalibratorChoice& choice) {
  switch (choice.kind) {
    case Calibrator::kEntropy:
      return "entropy";
    case Calibrator::kMinMax:
      return "minmax";
    case Calibrator::kPercentile:
      return "percentile:" + shortest_decimal(choice.percentile);
  }
  return "unknown";
}

double entropy_threshold(const CalibrationHistogram& stats) {
  const size_t levels = entropy_levels(stats);
  std::vector<double> bins(stats.bins().begin(), stats.bins().end());
  bins[0] -= static_cast<double>(stats.zeros());
  size_t used = bins.size();  // bins up to the last that holds a value
  while (used > 0 && bins[used - 1] == 0) --used;
  if (used == 0) return 0;
  if (used <= levels) return static_cast<double>(used) * stats.bin_width();  // no clipping needed

  // outliers_from[i]: the count of bins [i, used): what saturates at a threshold of i bins.
  std::vector<double> outliers_from(used + 1, 0);
  for (size_t i = used; i-- > 0;) outliers_from[i] = outliers_from[i + 1] + bins[i];
  const double total = outliers_from[0];

  std::vector<double> level_count(levels), level_filled(levels);
  double best_divergence = std::numeric_limits<double>::infinity();
  size_t best_bins = used;
  for (size_t i = levels; i <= used; ++i) {
    // A threshold that saturates more than kEntropyMaxClipped of the values is no outlier
    // clip: on a tensor far from zero (a global average of positive features) the search's
    // first candidates hold all values in one bin, P and Q agree exactly and the divergence is
    // 0, which would clip the tensor to a sliver of its range.
    if (outliers_from[i] > kEntropyMaxClipped * total) continue;
    std::fill(level_count.begin(), level_count.end(), 0);
    std::fill(level_filled.begin(), level_filled.end(), 0);
    for (size_t j = 0; j < i; ++j) {
      size_t level = j * levels / i;
      level_count[level] += bins[j];
      level_filled[level] += bins[j] > 0 ? 1 : 0;
    }
    const double outliers = outliers_from[i];
    const double q_total = total - outliers;
    double divergence = 0;
    for (size_t j = 0; j < i; ++j) {
      double p = bins[j] + (j == i - 1 ? outliers : 0);
      if (p == 0) continue;
      size_t level = j * levels / i;
      double q = bins[j] > 0 ? level_count[level] / level_filled[level] : 0;
      if (q == 0) {
        divergence = std::numeric_limits<double>::infinity();
        break;
      }
      divergence += (p / total) * std::log((p / total) / (q / q_total));
    }
    if (divergence <= best_divergence) {
      best_divergence = divergence;
      best_bins = i;
    }
  }
  return static_cast<double>(best_bins) * stats.bin_width();
}

CalibratedRange calibrated_range(const CalibrationHistogram& stats, const CalibratorChoice& choice) {
  CalibratedRange range;
  if (stats.empty()) return range;
  if (choice.kind == Calibrator::kMinMax) {
    range.lo = stats.min();
    range.hi = stats.max();
    return range;
  }
  double threshold = choice.kind == Calibrator::kPercentile ? stats.abs_percentile(choice.percentile)
                                                            : entropy_threshold(stats);
  // Compared in double, then narrowed: each end is min or max itself, or +-T rounded to float.
  auto clip = [threshold](float v) { return static_cast<float>(std::clamp(static_cast<double>(v), -threshold, threshold)); };
  range.lo = clip(stats.min());
  range.hi = clip(stats.max());
  return range;
}

}  // namespace edgert::builder
