// FP16 that keeps its accuracy (--fp16 with --fp16-tolerance): the builder checks an FP16 engine
// against the FP32 engine of the same model on seeded random inputs, and where the outputs
// drift past the tolerance keeps the leading float16 layers in float32 until they do not.
//
// Why the leading layers: a value rounded to float16 (2^-11 relative) early in a network goes
// through every later layer, and in networks that amplify perturbations (random or poorly
// conditioned weights, depthwise stacks) the early roundings dominate the output's error. Late
// layers, where the compute is and tensor cores pay most, stay float16. The number kept is
// found by bisection (the error falls as more layers stay float32): about log2(layers) builds,
// each with the timing cache's tactics.
//
// Where TensorRT leaves this to the user (per-layer precision constraints, polygraphy's
// debug precision), and ONNX Runtime's auto mixed precision searches the same way from data.
#pragma once

#include <functional>
#include <vector>

#include "engine_builder.h"
#include "engine_writer.h"

namespace edgert::builder {

// The largest relative L2 distance ||candidate - reference|| / ||reference|| over every output
// of every run (runs pair up by position, outputs by name); infinity where a run or output is
// missing, shapes differ, or a candidate value is not finite.
double largest_relative_error(const std::vector<SelfTestVector>& reference,
                              const std::vector<SelfTestVector>& candidate);

// Seeds of the inputs the check runs (the self-test's generator: uniform in [-1, 1]).
std::vector<uint64_t> fp16_check_seeds();

// `first` is the FP16 build of `options` (every layer that takes float16 in float16). Returns
// it when within options.fp16_tolerance of the FP32 build, else the build (by `build`) with
// the fewest leading float16 layers kept in float32 that is. Reports in the result's
// fp16_* fields; a check that cannot run here (another board, IO it cannot draw) is a warning.
BuildResult keep_fp16_accuracy(const BuildOptions& options, BuildResult first,
                               const std::function<BuildResult(const BuildOptions&)>& build);

}  // namespace edgert::builder
