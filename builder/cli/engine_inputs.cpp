#include "engine_inputs.h"

#include <sched.h>

#include <cstdio>

#include "board_catalog.h"
#include "build_error.h"
#include "error.h"
#include "plugin_loader.h"

namespace edgert::cli {

void EngineLoadFlags::add_to(CLI::App* command) {
  command->add_option("--plugin-path", plugin_path, "Colon-separated plugin directories");
  command->add_option("--board", board,
                      "Board this machine is (refuse engines built for others); native: the profile it matches");
  command->add_flag("--allow-board-mismatch", allow_board_mismatch, "Load an engine built for another board");
  command->add_option("--threads", threads, "Threads each kernel may use, this one included (0: the plugin's default)")
      ->check(CLI::Range(0, 1024));
  command->add_flag("--pin-threads", pin_threads, "Pin kernel worker threads to CPUs, one each");
  command->add_flag("--no-cuda-graph", no_cuda_graph,
                    "Enqueue a device engine's kernels one by one on every run instead of replaying a CUDA graph");
}

void warn_if_threads_exceed_cpus(int32_t threads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (threads <= 0 || sched_getaffinity(0, sizeof set, &set) != 0) return;
  const int cpus = CPU_COUNT(&set);
  if (threads > cpus)
    std::fprintf(stderr, "edgert: warning: --threads %d is more than the %d CPU(s) this process may run on; kernel "
                 "threads will share CPUs and run slower than with --threads %d\n", threads, cpus, cpus);
}

std::unique_ptr<LoadedEngine> EngineLoadFlags::load(const std::string& path) const {
  warn_if_threads_exceed_cpus(threads);
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = plugin_path.empty() ? nullptr : plugin_path.c_str();
  // What a refusal calls this machine, and what --board native stands for: the profile
  // `edgert build` picks here by default.
  const std::string native =
      config::pick_native_board(config::load_board_catalog().profiles, this_host_machine()).profile.name;
  options.host_board = native.c_str();
  options.expected_board = board.empty() ? nullptr : board == "native" ? native.c_str() : board.c_str();
  options.allow_board_mismatch = allow_board_mismatch;
  options.num_threads = threads;
  options.pin_threads = pin_threads;
  edgert_error error{};
  // LoadedEngine::load is below the C API, which applies these itself.
  if ((threads || pin_threads) && configure_plugins(threads, pin_threads, &error) != EDGERT_OK)
    builder::build_fail(error.status, "--threads %d%s: %s", threads, pin_threads ? " --pin-threads" : "", error.message);
  auto engine = LoadedEngine::load(path, options, &error);
  if (!engine) builder::build_fail(error.status, "%s", error.message);
  return engine;
}

std::map<std::string, HostTensor> read_input_specs(const std::vector<std::string>& specs) {
  std::map<std::string, HostTensor> given;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--input '%s' must be NAME=FILE", spec.c_str());
    given[spec.substr(0, eq)] = read_tensor_file(spec.substr(eq + 1));
  }
  return given;
}

HostTensor synthetic_input(const LoadedEngine& engine, size_t index, std::mt19937& rng) {
  const std::string& name = engine.input_names()[index];
  const LoadedTensor& t = engine.main_graph().tensors[engine.input_tensors()[index]];
  HostTensor h;
  h.name = name;
  h.dtype = static_cast<edgert_dtype>(t.dtype ? t.dtype : EDGERT_DTYPE_FLOAT32);
  const LoadedEngine::ShapeRange* range = engine.profile_range(index);
  if (!t.rank_known && !range)
    builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s' has an unknown rank; give it with --input", name.c_str());
  int32_t rank = range ? static_cast<int32_t>(range->opt.size()) : t.rank;
  for (int32_t d = 0; d < rank; ++d) {
    int64_t v = t.rank_known && d < t.rank ? t.dims[d] : -1;
    if (v < 0 && range) v = range->opt[d];
    if (v < 0)
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s' dimension %d is dynamic and the engine has no "
                          "profile; give the input with --input", name.c_str(), d);
    h.shape.push_back(v);
  }
  size_t elem = dtype_size(h.dtype);
  if (elem == 0)
    builder::build_fail(EDGERT_ERR_UNSUPPORTED, "input '%s' has dtype %s, which cannot be synthesised", name.c_str(),
                        dtype_name(h.dtype));
  h.data.assign(static_cast<size_t>(h.numel()) * elem, 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (h.dtype == EDGERT_DTYPE_FLOAT32) {
    float* p = reinterpret_cast<float*>(h.data.data());
    for (int64_t i = 0; i < h.numel(); ++i) p[i] = normal(rng);
  } else if (h.dtype == EDGERT_DTYPE_FLOAT64) {
    double* p = reinterpret_cast<double*>(h.data.data());
    for (int64_t i = 0; i < h.numel(); ++i) p[i] = normal(rng);
  }
  return h;
}

}  // namespace edgert::cli
