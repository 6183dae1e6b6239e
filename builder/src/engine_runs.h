// Running an engine the builder just made, in the builder's process: the calibration's float32
// model, and the accuracy guard's float32 and reduced-precision engines on a validation set.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "execution_context.h"
#include "int8_calibration.h"
#include "loaded_engine.h"

namespace edgert::builder {

// Loads `engine` (the bytes of a complete engine file; they must outlive the result) with the
// plugins on `plugin_path`; `what` names it in the BuildError thrown when it cannot load here.
std::unique_ptr<LoadedEngine> load_engine_here(const std::vector<uint8_t>& engine, const char* plugin_path,
                                               const char* what);

// The tensor of `batch` for input `index` named `name`: the one of that name, else the
// index-th when the batch's tensors are unnamed (they feed the inputs in order); a named batch
// without `name` is a BuildError.
const CalibrationTensor& batch_tensor(const CalibrationBatch& batch, size_t index, const std::string& name);

// Runs `context` on `batch` (an unnamed tensor feeds the only input, named ones the input of
// their name); throws a BuildError naming the batch's source and `what` on failure.
void run_batch(ExecutionContext& context, const LoadedEngine& engine, const CalibrationBatch& batch, const char* what);

// A float32 (or integer, held as float) output of the last run, flattened; empty for another
// dtype.
std::vector<float> output_values(const edgert_tensor& out);

struct OutputValues {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
// The engine's outputs on every batch, in order: per batch, each output by name.
using BatchOutputs = std::vector<std::map<std::string, OutputValues>>;
BatchOutputs run_batches(const std::vector<uint8_t>& engine, const char* plugin_path,
                         const std::vector<CalibrationBatch>& batches, const char* what);

// Median time per node over `runs` runs on `batch`, in milliseconds, by node name (a fused
// node's time under its fused name).
std::map<std::string, double> layer_times_ms(const std::vector<uint8_t>& engine, const char* plugin_path,
                                             const CalibrationBatch& batch, int runs);

}  // namespace edgert::builder
