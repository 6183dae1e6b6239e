// The INT8 accuracy guard: with --accuracy-guard METRIC:TOLERANCE --validation DIR the builder
// measures the int8 engine on the validation set against the float32 engine
// (accuracy_guard_options.h). Out of tolerance, it ranks the int8 layers by the error each adds
// to what it reads (relative L2 of its output against float32's, less the largest of its
// inputs', over the validation set: the per-layer sensitivity) and moves the worst back to
// float32, 1, 2, 4, ... of them, then the fewest that hold by bisection, and reports which
// layers fell back and what each costs in latency. Networks whose errors come from a few layers
// (SiLU and squeeze-excitation blocks, a first convolution over raw pixels, the last layers
// before the scores) keep int8 everywhere else.
#pragma once

#include <functional>

#include "engine_builder.h"
#include "engine_runs.h"

namespace edgert::builder {

// `options` with int8 and accuracy_guard set; `build` makes one engine (build_engine's own).
// Returns the final build, its accuracy_guard report filled.
BuildResult guard_int8_accuracy(const BuildOptions& options, const std::function<BuildResult(const BuildOptions&)>& build);

// box-agreement (accuracy_guard_options.h): the percentage of `reference`'s detections that
// `candidate` also makes, over every batch; 100 when the reference makes none.
double box_agreement(const std::vector<std::string>& outputs, const BatchOutputs& reference,
                     const BatchOutputs& candidate);

}  // namespace edgert::builder
