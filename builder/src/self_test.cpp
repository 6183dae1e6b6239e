#include "self_test.h"

#include <cstdint>
#include <memory>
#include <random>

#include "execution_context.h"
#include "loaded_engine.h"

namespace edgert::builder {

namespace {

std::unique_ptr<LoadedEngine> load_here(const std::vector<uint8_t>& engine, const char* plugin_path,
                                        std::string* why_not) {
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = plugin_path;
  options.allow_board_mismatch = 1;  // cross builds: the kernels are the plugin's, the board is not ours
  edgert_error error{};
  // load_memory needs storage that outlives the engine and starts 16-byte aligned: `engine`
  // does (operator new aligns to 16), and the caller drops the engine before `engine`.
  auto loaded = LoadedEngine::load_memory(engine.data(), engine.size(), options, &error);
  if (!loaded) *why_not = std::string("cannot load it here: ") + error.message;
  return loaded;
}

// One run on inputs drawn from `seed`; nothing (and `why_not`) past `max_bytes` of inputs and
// outputs or where the engine's IO is not float32 of a known shape (integer outputs held as
// floats with `integers_as_floats`: class labels, counts).
std::optional<SelfTestVector> run_seeded(LoadedEngine* loaded, uint64_t seed, size_t max_bytes, bool integers_as_floats,
                                         std::string* why_not) {
  edgert_error error{};
  SelfTestVector vector;
  vector.seed = seed;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  size_t bytes = 0;
  std::vector<edgert_tensor> inputs;
  for (size_t i = 0; i < loaded->input_names().size(); ++i) {
    edgert_tensor_info info{};
    fill_tensor_info(loaded->main_graph().tensors[loaded->input_tensors()[i]], loaded->input_names()[i], &info);
    if (info.dtype != EDGERT_DTYPE_FLOAT32) {
      *why_not = "input '" + loaded->input_names()[i] + "' is not float32";
      return std::nullopt;
    }
    SelfTestTensor t;
    t.name = loaded->input_names()[i];
    if (info.rank < 0) {
      *why_not = "input '" + t.name + "' has an unknown rank";
      return std::nullopt;
    }
    // A dynamic input is tested at profile 0's min shapes: the smallest vector, and a shape the
    // engine accepts by construction.
    const LoadedEngine::ShapeRange* range = loaded->profile_range(i);
    size_t count = 1;
    for (int32_t d = 0; d < info.rank; ++d) {
      int64_t dim = info.dims[d];
      if (dim < 0 && range && static_cast<size_t>(d) < range->min.size()) dim = range->min[d];
      if (dim < 0) {
        *why_not = "input '" + t.name + "' has a dynamic shape and no optimization profile";
        return std::nullopt;
      }
      t.shape.push_back(dim);
      count *= static_cast<size_t>(dim);
    }
    bytes += count * sizeof(float);
    if (bytes > max_bytes) {
      *why_not = "inputs exceed " + std::to_string(max_bytes) + " bytes";
      return std::nullopt;
    }
    t.data.resize(count);
    for (float& v : t.data) v = uniform(rng);
    vector.inputs.push_back(std::move(t));
  }
  for (SelfTestTensor& t : vector.inputs) {
    edgert_tensor view{};
    view.dtype = EDGERT_DTYPE_FLOAT32;
    view.rank = static_cast<int32_t>(t.shape.size());
    std::copy(t.shape.begin(), t.shape.end(), view.dims);
    view.data = t.data.data();
    inputs.push_back(view);
  }
  ExecutionContext context(*loaded);
  if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK) {
    *why_not = std::string("running it failed: ") + error.message;
    return std::nullopt;
  }
  for (size_t o = 0; o < loaded->output_names().size(); ++o) {
    const edgert_tensor& out = context.output(static_cast<int32_t>(o));
    const bool integer = out.dtype == EDGERT_DTYPE_INT64 || out.dtype == EDGERT_DTYPE_INT32;
    if (out.dtype != EDGERT_DTYPE_FLOAT32 && !(integer && integers_as_floats)) {
      *why_not = "output '" + loaded->output_names()[o] + "' is not float32";
      return std::nullopt;
    }
    SelfTestTensor t;
    t.name = loaded->output_names()[o];
    size_t count = 1;
    for (int32_t d = 0; d < out.rank; ++d) {
      t.shape.push_back(out.dims[d]);
      count *= static_cast<size_t>(out.dims[d]);
    }
    bytes += count * sizeof(float);
    if (bytes > max_bytes) {
      *why_not = "inputs and outputs exceed " + std::to_string(max_bytes) + " bytes";
      return std::nullopt;
    }
    if (out.dtype == EDGERT_DTYPE_INT64) {
      const int64_t* data = static_cast<const int64_t*>(out.data);
      t.data.assign(data, data + count);
    } else if (out.dtype == EDGERT_DTYPE_INT32) {
      const int32_t* data = static_cast<const int32_t*>(out.data);
      t.data.assign(data, data + count);
    } else {
      const float* data = static_cast<const float*>(out.data);
      t.data.assign(data, data + count);
    }
    vector.outputs.push_back(std::move(t));
  }
  return vector;
}

}  // namespace

std::optional<SelfTestVector> make_self_test(const std::vector<uint8_t>& engine, const char* plugin_path,
                                             uint64_t seed, std::string* why_not) {
  auto loaded = load_here(engine, plugin_path, why_not);
  if (!loaded) return std::nullopt;
  return run_seeded(loaded.get(), seed, kMaxSelfTestBytes, false, why_not);
}

std::optional<std::vector<SelfTestVector>> run_on_seeds(const std::vector<uint8_t>& engine, const char* plugin_path,
                                                        const std::vector<uint64_t>& seeds, std::string* why_not) {
  auto loaded = load_here(engine, plugin_path, why_not);
  if (!loaded) return std::nullopt;
  std::vector<SelfTestVector> runs;
  for (uint64_t seed : seeds) {
    std::optional<SelfTestVector> run = run_seeded(loaded.get(), seed, SIZE_MAX, true, why_not);
    if (!run) return std::nullopt;
    runs.push_back(std::move(*run));
  }
  return runs;
}

}  // namespace edgert::builder
