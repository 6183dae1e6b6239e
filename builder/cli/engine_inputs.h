// What the run-type commands (run, bench, compare) share: the engine-loading flags, reading
// NAME=FILE inputs, and reproducible synthetic inputs for inputs not given.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "execution_context.h"
#include "loaded_engine.h"
#include "tensor_io.h"

namespace edgert::cli {

// --threads above the CPUs of this process's affinity mask gets a warning, not a refusal: the
// plugin caps it (1024), and more threads than CPUs is a legitimate experiment (timing for a
// board with more cores, measuring oversubscription), only a slow default to fall into unawares.
void warn_if_threads_exceed_cpus(int32_t threads);

struct EngineLoadFlags {
  std::string plugin_path, board;
  bool allow_board_mismatch = false;
  int32_t threads = 0;  // --threads: kernel threads (edgert_load_options.num_threads); 0: plugin default
  bool pin_threads = false;
  bool no_cuda_graph = false;  // --no-cuda-graph: device engines run node by node every time

  void add_to(CLI::App* command);
  // What these flags set on a context (CUDA graphs).
  void apply(ExecutionContext& context) const { context.set_cuda_graphs(!no_cuda_graph); }
  // Loads and verifies `path` with the thread settings applied to its plugins; throws
  // BuildError with the runtime's message.
  std::unique_ptr<LoadedEngine> load(const std::string& path) const;
};

// "NAME=FILE" specs -> tensors by name; throws on a malformed spec or unreadable file.
std::map<std::string, HostTensor> read_input_specs(const std::vector<std::string>& specs);

// Seeded pseudo-random data at the engine's static shape (the profile's opt value where a
// dimension is dynamic): normal floats, zeros for other dtypes (random integers would be
// meaningless indices). Throws when a dimension cannot be decided.
HostTensor synthetic_input(const LoadedEngine& engine, size_t index, std::mt19937& rng);

}  // namespace edgert::cli
