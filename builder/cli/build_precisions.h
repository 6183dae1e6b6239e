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
};

// Sets build's precision options from the flags (after build.board and build.fp16 are set).
// --best turns on what the board's precisions list: fp16 and bf16, int8 where calibration is given (without it, int8 is left off and said so on stderr: a quantization
// without calibration would be a guess).
void apply_precision_flags(const PrecisionFlags& flags, builder::BuildOptions& build);

// One line of what --int8 made: int8 layers by kind, layers left in float32, where the ranges
// came from.
void print_int8_summary(const builder::BuildResult& result);

// What the accuracy guard did: the metric in float32, all int8 and as built, and each layer it
// kept in float32 with its sensitivity and its time in both precisions.
void print_accuracy_guard(const builder::AccuracyGuardReport& report);

// Calibration or validation inputs from a directory, one sample per entry in name order: a
// regular .npy file (but `skip`) is the tensor of the model's only input; a directory holds one
// NAME.npy per input of a model with several (any dtype: float32 ones are calibrated, others
// just fed). Links are not followed. Throws BuildError when the directory cannot be read or
// holds no sample.
std::function<std::optional<builder::CalibrationBatch>()> npy_directory_batches(const std::string& dir,
                                                                               const std::string& skip = "");

}  // namespace edgert::cli
