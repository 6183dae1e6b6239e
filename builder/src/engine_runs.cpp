#include "engine_runs.h"

#include <algorithm>

#include "build_error.h"

namespace edgert::builder {

std::unique_ptr<LoadedEngine> load_engine_here(const std::vector<uint8_t>& engine, const char* plugin_path,
                                               const char* what) {
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = plugin_path;
  options.allow_board_mismatch = 1;  // built for the board, run here: only the values matter
  edgert_error error{};
  auto loaded = LoadedEngine::load_memory(engine.data(), engine.size(), options, &error);
  if (!loaded) build_fail(error.status, "%s: cannot run the engine here: %s", what, error.message);
  return loaded;
}

const CalibrationTensor& batch_tensor(const CalibrationBatch& batch, size_t index, const std::string& name) {
  for (const CalibrationTensor& t : batch)
    if (t.name == name) return t;
  if (!batch[index].name.empty())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input %s: the sample has no tensor for the model's input '%s'",
               batch[index].source.c_str(), name.c_str());
  return batch[index];
}

void run_batch(ExecutionContext& context, const LoadedEngine& engine, const CalibrationBatch& batch, const char* what) {
  const std::vector<std::string>& input_names = engine.input_names();
  const std::string source = batch.empty() ? std::string("an empty batch") : batch.front().source;
  if (batch.size() != input_names.size())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: input %s: %zu tensor(s) for a model with %zu input(s)", what,
               source.c_str(), batch.size(), input_names.size());
  std::vector<edgert_tensor> inputs(input_names.size());
  for (size_t i = 0; i < input_names.size(); ++i) {
    const CalibrationTensor* tensor = &batch_tensor(batch, i, input_names[i]);
    if (tensor->shape.size() > EDGERT_MAX_RANK)
      build_fail(EDGERT_ERR_SHAPE, "%s: input %s has rank %zu", what, tensor->source.c_str(), tensor->shape.size());
    edgert_tensor& view = inputs[i];
    view.dtype = tensor->dtype;
    view.rank = static_cast<int32_t>(tensor->shape.size());
    std::copy(tensor->shape.begin(), tensor->shape.end(), view.dims);
    view.data = tensor->dtype == EDGERT_DTYPE_FLOAT32 ? static_cast<void*>(const_cast<float*>(tensor->data.data()))
                                                      : static_cast<void*>(const_cast<uint8_t*>(tensor->bytes.data()));
  }
  edgert_error error{};
  if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
    build_fail(error.status, "%s: the model failed on %s: %s", what, source.c_str(), error.message);
}

std::vector<float> output_values(const edgert_tensor& out) {
  size_t count = 1;
  for (int32_t d = 0; d < out.rank; ++d) count *= static_cast<size_t>(out.dims[d]);
  switch (out.dtype) {
    case EDGERT_DTYPE_FLOAT32: {
      const float* p = static_cast<const float*>(out.data);
      return std::vector<float>(p, p + count);
    }
    case EDGERT_DTYPE_INT64: {
      const int64_t* p = static_cast<const int64_t*>(out.data);
      return std::vector<float>(p, p + count);
    }
    case EDGERT_DTYPE_INT32: {
      const int32_t* p = static_cast<const int32_t*>(out.data);
      return std::vector<float>(p, p + count);
    }
    default:
      return {};
  }
}

BatchOutputs run_batches(const std::vector<uint8_t>& engine, const char* plugin_path,
                         const std::vector<CalibrationBatch>& batches, const char* what) {
  auto loaded = load_engine_here(engine, plugin_path, what);
  ExecutionContext context(*loaded);
  BatchOutputs all;
  for (const CalibrationBatch& batch : batches) {
    run_batch(context, *loaded, batch, what);
    std::map<std::string, OutputValues>& outputs = all.emplace_back();
    for (size_t o = 0; o < loaded->output_names().size(); ++o) {
      const edgert_tensor& out = context.output(static_cast<int32_t>(o));
      OutputValues& values = outputs[loaded->output_names()[o]];
      values.shape.assign(out.dims, out.dims + out.rank);
      values.values = output_values(out);
    }
  }
  return all;
}

std::map<std::string, double> layer_times_ms(const std::vector<uint8_t>& engine, const char* plugin_path,
                                             const CalibrationBatch& batch, int runs) {
  auto loaded = load_engine_here(engine, plugin_path, "layer timing");
  ExecutionContext context(*loaded);
  const LoadedGraph& graph = loaded->main_graph();
  std::vector<double> ns(graph.nodes.size());
  std::vector<std::vector<double>> per_node(graph.nodes.size());
  run_batch(context, *loaded, batch, "layer timing");  // warm-up: first-run preparation
  for (int r = 0; r < runs; ++r) {
    std::fill(ns.begin(), ns.end(), 0.0);
    context.set_layer_times(&ns);
    run_batch(context, *loaded, batch, "layer timing");
    for (size_t n = 0; n < ns.size(); ++n) per_node[n].push_back(ns[n] / 1e6);
  }
  context.set_layer_times(nullptr);
  std::map<std::string, double> times;
  for (size_t n = 0; n < per_node.size(); ++n) {
    std::vector<double>& t = per_node[n];
    if (t.empty()) continue;
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    times[graph.nodes[n].node.name ? graph.nodes[n].node.name : ""] += t[t.size() / 2];
  }
  return times;
}

}  // namespace edgert::builder
