#include "int8_calibration.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "build_error.h"
#include "calibration_cache.h"
#include "engine_signing.h"
#include "engine_runs.h"
#include "quantization_params.h"

namespace edgert::builder {

int expose_activations(PassContext& context) {
  Graph& graph = context.graph;
  std::vector<bool> is_output(graph.values.size(), false);
  for (int32_t o : graph.outputs) is_output[o] = true;
  for (int32_t i : graph.inputs) is_output[i] = true;
  int exposed = 0;
  for (const std::string& name : quantizable_activations(graph)) {
    const int32_t v = graph.find_value(name);
    if (v < 0 || is_output[v]) continue;
    graph.outputs.push_back(v);
    is_output[v] = true;
    ++exposed;
  }
  return exposed;
}

namespace {


// Runs every batch and adds each activation's values to its histogram.
int64_t collect(const std::vector<uint8_t>& engine, const char* plugin_path, const Int8Calibration& calibration,
                std::map<std::string, CalibrationHistogram>& histograms) {
  auto loaded = load_engine_here(engine, plugin_path, "int8 calibration");
  ExecutionContext context(*loaded);
  const std::vector<std::string>& input_names = loaded->input_names();
  int64_t samples = 0;
  while (std::optional<CalibrationBatch> batch = calibration.next_batch()) {
    run_batch(context, *loaded, *batch, "int8 calibration");
    for (size_t i = 0; i < input_names.size(); ++i) {
      const CalibrationTensor& tensor = batch_tensor(*batch, i, input_names[i]);
      if (tensor.dtype == EDGERT_DTYPE_FLOAT32) histograms[input_names[i]].add(tensor.data);
    }
    for (size_t o = 0; o < loaded->output_names().size(); ++o) {
      const edgert_tensor& out = context.output(static_cast<int32_t>(o));
      if (out.dtype == EDGERT_DTYPE_FLOAT32) histograms[loaded->output_names()[o]].add(output_values(out));
    }
    ++samples;
  }
  if (samples == 0) build_fail(EDGERT_ERR_INVALID_ARGUMENT, "int8 calibration: no calibration input was given");
  return samples;
}

QuantizationTable to_quantization(const std::map<std::string, CalibratedRange>& ranges) {
  QuantizationTable quantization;
  for (const auto& [name, range] : ranges) quantization[name] = activation_quantization(name, range.lo, range.hi);
  return quantization;
}

}  // namespace

QuantizationTable calibrate_activations(const std::string& model_path, const Int8Calibration& calibration,
                                             const char* plugin_path, const CalibrationEngineBuilder& build,
                                             CalibrationSummary* summary) {
  CalibrationStamp stamp;
  stamp.model_sha256 = signing::sha256_file(model_path);
  stamp.calibrator = parse_calibrator(calibration.calibrator);
  stamp.edgert_version = EDGERT_VERSION;
  summary->calibrator = calibrator_name(stamp.calibrator);
  summary->cache_path = calibration.cache_path;
  if (!calibration.cache_path.empty()) {
    if (std::optional<CalibrationCache> cache = read_calibration_cache(calibration.cache_path, stamp)) {
      summary->from_cache = true;
      summary->samples = static_cast<int64_t>(cache->stamp.samples);
      summary->tensors = static_cast<int64_t>(cache->ranges.size());
      return to_quantization(cache->ranges);
    }
  }
  if (!calibration.next_batch)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "int8: calibration cache '%s' does not exist and no calibration inputs "
               "(--calib DIR) were given to make it", calibration.cache_path.c_str());
  std::map<std::string, CalibrationHistogram> histograms;
  const int64_t samples = collect(build(expose_activations), plugin_path, calibration, histograms);
  CalibrationCache cache;
  cache.stamp = stamp;
  cache.stamp.samples = static_cast<uint64_t>(samples);
  for (const auto& [name, histogram] : histograms)
    if (!histogram.empty()) cache.ranges[name] = calibrated_range(histogram, stamp.calibrator);
  if (!calibration.cache_path.empty()) write_calibration_cache(calibration.cache_path, cache);
  summary->samples = samples;
  summary->tensors = static_cast<int64_t>(cache.ranges.size());
  return to_quantization(cache.ranges);
}

}  // namespace edgert::builder
