// The precision flags of edgert build (--int8, --bf16, --best, --calib, --calib-cache, --calibrator,
// --layer-precisions, --precision-constraints) and the calibration inputs --calib names.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine_builder.h"

namespace edgert::cli {

struct PrecisionFlags {
  bool int8 = false, bf16 = false, best = false;
  std::string calib, calib_cache, calibrator = "entropy", precision_constraints = "prefer";
  std::vector<std::string> layer_precisions;  // NAME:fp32 | NAME:int8
  std::string accuracy_guard, validation;      // METRIC:TOLERANCE, DIR
  // Calibration samples from a program (the C API, Python) rather than a --calib directory.
  std::function<std::optional<builder::CalibrationBatch>()> calib_samples;
};

// Sets build's precision options from the flags (after build.board and build.fp16 are set).
// --best turns on what the board's precisions list: fp16 and bf16, int8 where calibration is
// given (without it, int8 is left off, which the returned warning says: a quantization without
// calibration would be a guess). Returns the warnings for the caller to show.
std::vector<std::string> apply_precision_flags(const PrecisionFlags& flags, builder::BuildOptions& build);

// What --int8 made: int8 layers by kind, then a line per layer left in float32, where the
// ranges came from.
std::vector<std::string> int8_summary_lines(const builder::BuildResult& result);

// What the accuracy guard did: the metric in float32, all int8 and as built, and a line per
// layer it kept in float32 with its sensitivity and its time in both precisions.
std::vector<std::string> accuracy_guard_lines(const builder::AccuracyGuardReport& report);

// Calibration or validation inputs from a directory, one sample per entry in name order: a
// regular .npy file (but `skip`) is the tensor of the model's only input; a directory holds one
// NAME.npy per input of a model with several (any dtype: float32 ones are calibrated, others
// just fed). Links are not followed. Throws BuildError when the directory cannot be read or
// holds no sample.
std::function<std::optional<builder::CalibrationBatch>()> npy_directory_batches(const std::string& dir,
                                                                               const std::string& skip = "");

}  // namespace edgert::cli
