// INT8 post-training calibration: the float32 model runs on the user's calibration inputs with
// every activation exposed as an output; each tensor's values go into a histogram
// (calibration_histogram.h) and a calibrator (calibrators.h: entropy, min-max, percentile)
// turns it into the range its uint8 quantization covers. The ranges are kept in a calibration
// cache (calibration_cache.h) stamped with the model's SHA-256, the calibrator and the edgert
// version: a cache that does not match is refused, never silently used or ignored, and the same
// cache gives the same engine on any machine (ranges stored exactly, as hex floats).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "edgert/types.h"
#include "int8_rewrite.h"
#include "passes/pass_manager.h"

namespace edgert::builder {

// One calibration input for a model input (by name; empty: the inputs in order): float32 values
// in `data`, or another dtype's bytes in `bytes` (an int64 sample rate, a mask).
struct CalibrationTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  edgert_dtype dtype = EDGERT_DTYPE_FLOAT32;
  std::vector<uint8_t> bytes;  // dtype other than float32
  std::string source;  // where it came from (a file), for messages
};
using CalibrationBatch = std::vector<CalibrationTensor>;

struct Int8Calibration {
  // The calibration inputs, one batch per call, nothing after the last; empty: none (the ranges
  // must then come from `cache_path`).
  std::function<std::optional<CalibrationBatch>()> next_batch;
  std::string calibrator = "entropy";  // entropy, minmax, percentile[:P]
  // Read when it exists and matches (refused when it does not); written after calibrating.
  std::string cache_path;
};

struct CalibrationSummary {
  bool from_cache = false;
  std::string calibrator;
  int64_t samples = 0;   // batches the ranges were computed from
  int64_t tensors = 0;   // activations with a range
  std::string cache_path;  // where the ranges were read or written (empty: not kept)
};

// A precision pass that makes every float32 activation computed by a node an engine output
// (graph inputs are measured from the feeds themselves): the calibration build's, and the
// accuracy guard's float32 reference.
int expose_activations(PassContext& context);

// Builds the float32 engine the calibration runs, with `expose` as the precision pass (it makes
// every activation a graph output).
using CalibrationEngineBuilder = std::function<std::vector<uint8_t>(const std::function<int(PassContext&)>& expose)>;

// The uint8 quantization of every activation of the model at `model_path`: from the cache when
// it exists (refused with a BuildError when it was made for another model, calibrator or edgert
// version), else calibrated on `calibration.next_batch` (and the cache written).
QuantizationTable calibrate_activations(const std::string& model_path, const Int8Calibration& calibration,
                                             const char* plugin_path, const CalibrationEngineBuilder& build,
                                             CalibrationSummary* summary);

}  // namespace edgert::builder
