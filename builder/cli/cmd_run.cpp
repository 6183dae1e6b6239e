// edgert run ENGINE --input NAME=FILE ... [--shapes NAME:DxD...] [--output-dir DIR] [--npy]
//                   [--iterations N] [--warmup N] [--warmUp MS] [--duration S] [--exportTimes FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include <sys/stat.h>
#include <cerrno>
#include <cstring>

#include "build_error.h"
#include "commands.h"
#include "engine_inputs.h"
#include "error.h"
#include "execution_context.h"
#include "input_shapes.h"
#include "loaded_engine.h"
#include "run_flags.h"
#include "tensor_compare.h"
#include "tensor_io.h"

namespace edgert::cli {
namespace {

void print_summary(const HostTensor& t) {
  std::printf("  %s: %s %s [", t.name.c_str(), dtype_name(t.dtype), shape_string(t.shape).c_str());
  int64_t shown = std::min<int64_t>(t.numel(), 8);
  for (int64_t i = 0; i < shown; ++i) std::printf("%s%.6g", i ? ", " : "", element_as_double(t, i));
  std::printf("%s]\n", t.numel() > shown ? ", ..." : "");
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void add_run_command(CLI::App& app) {
  struct Options {
    std::string output_dir;
    bool npy = false, quiet = false;
    RunFlags run;
    EngineLoadFlags load;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Run an engine on input tensors and write its outputs");
  options->run.add_to(cmd);
  cmd->add_option("--output-dir", options->output_dir, "Write one file per output, named after it");
  cmd->add_flag("--npy", options->npy, "Write outputs as .npy instead of .pb");
  options->load.add_to(cmd);
  cmd->add_flag("-q,--quiet", options->quiet, "Do not print output values");
  cmd->callback([options] {
    const RunFlags& flags = options->run;
    const std::string& engine_path = flags.engine_path();
    const auto load_start = std::chrono::steady_clock::now();
    auto engine = options->load.load(engine_path);
    if (g_verbose) std::fprintf(stderr, "[run] loaded %s in %.1f ms\n", engine_path.c_str(), ms_since(load_start));
    edgert_error error{};
    std::mt19937 rng(1234);
    // Only inputs named by --shapes are synthesised: run's outputs mean something only on real
    // data unless the user asks for random values.
    std::vector<HostTensor> host = engine_inputs(*engine, read_input_specs(flags.inputs),
                                                 parse_input_shapes(flags.shapes), false, rng);
    std::vector<edgert_tensor> inputs;  // views into `host`, which must outlive the runs
    for (const HostTensor& h : host) {
      inputs.push_back(h.view());
      if (g_verbose)
        std::fprintf(stderr, "[run] input %s: %s %s\n", h.name.c_str(), dtype_name(h.dtype), shape_string(h.shape).c_str());
    }

    ExecutionContext context(*engine);
    options->load.apply(context);
    // The first run prepares every kernel (packing weights where a tactic keeps them packed):
    // with the load, what a swap waits for before the engine answers.
    double first_run_ms = -1;
    auto run_once = [&] {
      const auto start = std::chrono::steady_clock::now();
      if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
        builder::build_fail(error.status, "%s", error.message);
      if (first_run_ms < 0) {
        first_run_ms = ms_since(start);
        if (g_verbose)
          std::fprintf(stderr, "[run] first run in %.1f ms (kernels prepared, %llu bytes of kernel state)\n",
                       first_run_ms, static_cast<unsigned long long>(context.kernel_state_bytes()));
      }
    };
    const auto warmup_start = std::chrono::steady_clock::now();
    int warmups = flags.warm_up(run_once);
    if (g_verbose && warmups)
      std::fprintf(stderr, "[run] %d warm-up run(s) in %.1f ms\n", warmups, ms_since(warmup_start));
    std::vector<RunTime> runs;
    const auto timed_start = std::chrono::steady_clock::now();
    while (flags.more_timed_runs(runs.size(), ms_since(timed_start) / 1000)) {
      RunTime t;
      t.start_ms = ms_since(timed_start);
      run_once();
      t.end_ms = ms_since(timed_start);
      runs.push_back(t);
    }
    if (!flags.export_times.empty()) write_export_times(flags.export_times, runs);
    std::vector<double> times_ms;
    for (const RunTime& t : runs) times_ms.push_back(t.end_ms - t.start_ms);
    std::sort(times_ms.begin(), times_ms.end());
    if (!options->output_dir.empty()) {
      if (mkdir(options->output_dir.c_str(), 0755) != 0 && errno != EEXIST)
        builder::build_fail(EDGERT_ERR_IO, "cannot create '%s': %s", options->output_dir.c_str(), strerror(errno));
    }
    std::printf("outputs:\n");
    for (size_t o = 0; o < engine->output_names().size(); ++o) {
      HostTensor out = HostTensor::from(context.output(static_cast<int32_t>(o)), engine->output_names()[o]);
      if (!options->quiet) print_summary(out);
      if (!options->output_dir.empty()) {
        std::string file = options->output_dir + "/" + out.name + (options->npy ? ".npy" : ".pb");
        if (out.name.find('/') != std::string::npos) builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
            "output name '%s' contains '/', cannot name a file after it", out.name.c_str());
        options->npy ? write_tensor_npy(file, out) : write_tensor_pb(file, out);
      }
    }
    std::printf("latency: median %.3f ms, min %.3f ms over %zu run(s)\n", times_ms[times_ms.size() / 2], times_ms.front(),
                times_ms.size());
  });
}

}  // namespace edgert::cli
