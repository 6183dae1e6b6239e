// How INT8 calibration turns a tensor's statistics (calibration_histogram.h) into the range
// [lo, hi] its uint8 quantization covers (quantization_params.h). Values outside the range
// saturate; a narrower range spends the 256 levels on the values that are common.
//
// minmax      [min, max]: nothing saturates; one outlier coarsens every other value's step.
// percentile  threshold T = the p-th percentile of |x| (default p = 99.99; histogram bin
//             edge, so T is at most one bin width above the exact percentile).
// entropy     (default) TensorRT's EntropyCalibrator2, as ncnn and pytorch-quantization also
//             implement it: for every candidate threshold of i bins (i from L up to the last
//             bin holding a value),
//               P = bins[0, i), with the count of every bin from i on (the values that would
//                   saturate) added to bin i - 1;
//               Q = bins[0, i) without those outliers, merged into L levels (bin j goes to
//                   level j * L / i) and expanded back: each level's count is spread evenly
//                   over its bins that held values (empty bins stay empty);
//             and T = i * bin width for the i of least KL(P || Q) (P, Q normalised; a P bin
//             with an empty Q bin makes the divergence infinite: clipping there would lose
//             values Q cannot represent; ties go to the larger threshold). The outliers P
//             carries in its last bin are what stops the threshold from falling too low; the
//             merging into L levels is what stops it from rising to a far outlier.
//             L = 128 when the tensor has negative values (|x| gets 7 of the 8 bits, as
//             symmetric int8 would) and 256 when min >= 0 (post-ReLU: uint8 spends all 256
//             levels on [0, T]). Exact zeros are left out of bin 0: quantization represents
//             zero exactly whatever T is, and the spike of zeros after a ReLU would otherwise
//             dominate the divergence and pull T down (ncnn skips zeros for the same reason;
//             pytorch-quantization flattens bin 0). Candidates that would saturate more than
//             kEntropyMaxClipped (1%) of the values are skipped: far from zero the first
//             candidates hold every value in one bin, where P equals Q and the divergence is 0.
// percentile and entropy give [clip(min), clip(max)] with clip(v) = clamp(v, -T, T): that is
// [max(min, -T), min(max, T)] for a tensor with values on both sides of +-T, keeps lo = min >= 0
// for a tensor that is never negative, and stays ordered (lo <= hi) when T falls below every
// |x| of a tensor that is all positive or all negative.
//
// A tensor with no finite sample (CalibrationHistogram::empty()) or only zeros gets [0, 0]
// (quantization_params.h makes that scale 1, zero point 0). The builder refuses to calibrate
// an empty tensor before asking.
#pragma once

#include <string>

#include "calibration_histogram.h"

namespace edgert::builder {

enum class Calibrator { kEntropy, kMinMax, kPercentile };

struct CalibratorChoice {
  Calibrator kind = Calibrator::kEntropy;
  double percentile = 99.99;  // used by kPercentile only; in (0, 100]
};

// "entropy", "minmax", "percentile" or "percentile:P" (P in (0, 100], e.g. "percentile:99.9").
// Throws BuildError (EDGERT_ERR_INVALID_ARGUMENT) naming the text and the accepted forms.
CalibratorChoice parse_calibrator(const std::string& text);
// Canonical name, which parse_calibrator reads back to the same choice: "entropy", "minmax",
// "percentile:99.99" (always with its parameter, in the fewest digits that round-trip).
std::string calibrator_name(const CalibratorChoice& choice);

struct CalibratedRange {
  float lo = 0, hi = 0;  // lo <= hi, both finite
};

CalibratedRange calibrated_range(const CalibrationHistogram& stats, const CalibratorChoice& choice);

// The entropy calibrator never saturates more than this fraction of a tensor's nonzero values
// (calibrators.cpp says why).
constexpr double kEntropyMaxClipped = 0.01;

// The entropy threshold alone (the T above), for tests and build reports; 0 when the tensor
// has no nonzero value.
double entropy_threshold(const CalibrationHistogram& stats);

}  // namespace edgert::builder
