// What INT8 calibration knows about one activation tensor after the FP32 model has run on the
// calibration inputs: its min, its max, and a histogram of |x| that the calibrators
// (calibrators.h) choose a clipping threshold from.
//
// The histogram has kBins bins of equal width over (0, range]; bin b holds
// |x| in (b * width, (b + 1) * width], and bin 0 also holds exact zeros (counted apart as
// well, see zeros()). The range starts as the largest |x| of the first values that are not all
// zero, so that value sits in the last bin, as in TensorRT. When a later |x| exceeds the range,
// the range doubles (as often as needed) and each pair of neighbouring bins merges into one.
// Because bins are closed on the right and doubling is exact in binary floating point, the
// merge loses nothing: the histogram is the one that would have been built with the final
// range from the start. The approximation is in that final range: it is the first range times
// a power of two, not the largest |x|, so after growth the data fills between half and all of
// the bins (1024 to 2048 bins of resolution over [0, max|x|]). Which batch comes first
// therefore matters; the same values in the same order give the identical histogram.
//
// NaN and +-inf are skipped (counted in non_finite()): one overflowing sample should not
// stretch the range of a tensor to infinity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgert::builder {

class CalibrationHistogram {
 public:
  static constexpr size_t kBins = 2048;

  CalibrationHistogram() : bins_(kBins, 0) {}

  // Counts `count` values (one batch, or part of one; `values` is read only during the call).
  void add(const float* values, size_t count);
  void add(const std::vector<float>& values) { add(values.data(), values.size()); }

  // No finite value seen: the tensor was never fed, or only NaN/inf. The builder refuses to
  // calibrate such a tensor; calibrated_range() gives it [0, 0].
  bool empty() const { return samples_ == 0; }
  uint64_t samples() const { return samples_; }        // finite values counted
  uint64_t zeros() const { return zeros_; }            // of those, exactly +-0
  uint64_t non_finite() const { return non_finite_; }  // NaN and +-inf skipped
  float min() const { return min_; }                   // 0 while empty()
  float max() const { return max_; }                   // 0 while empty()
  // 0 while every finite value seen was zero (then all of them are in bin 0).
  double range() const { return range_; }
  double bin_width() const { return range_ / kBins; }
  const std::vector<uint64_t>& bins() const { return bins_; }

  // The smallest bin edge t such that at least `percent` % of the finite |x| are <= t (the
  // upper edge of the bin where the count crosses that fraction; never below max|x| for 100).
  // 0 while empty() or all zero. `percent` in (0, 100].
  double abs_percentile(double percent) const;

 private:
  void grow_to_cover(double magnitude);

  std::vector<uint64_t> bins_;
  double range_ = 0;
  float min_ = 0, max_ = 0;
  uint64_t samples_ = 0, zeros_ = 0, non_finite_ = 0;
};

}  // namespace edgert::builder
