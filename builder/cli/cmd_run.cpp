// edgert run ENGINE --input NAME=FILE ... [--output-dir DIR] [--npy] [--iterations N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include <sys/stat.h>
#include <cerrno>
#include <cstring>

#include "build_error.h"
#include "commands.h"
#include "error.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "tensor_compare.h"
#include "engine_inputs.h"
#include "tensor_io.h"

namespace edgert::cli {
namespace {

void print_summary(const HostTensor& t) {
  std::printf("  %s: %s %s [", t.name.c_str(), dtype_name(t.dtype), shape_string(t.shape).c_str());
  int64_t shown = std::min<int64_t>(t.numel(), 8);
  for (int64_t i = 0; i < shown; ++i) std::printf("%s%.6g", i ? ", " : "", element_as_double(t, i));
  std::printf("%s]\n", t.numel() > shown ? ", ..." : "");
}

}  // namespace

void add_run_command(CLI::App& app) {
  struct Options {
    std::string engine, output_dir;
    std::vector<std::string> inputs;
    bool npy = false, quiet = false;
    EngineLoadFlags load;
    int iterations = 1;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Run an engine on input tensors and write its outputs");
  cmd->add_option("engine", options->engine, "Engine file")->required();
  cmd->add_option("-i,--input", options->inputs, "NAME=FILE (.pb TensorProto or .npy); repeat per input");
  cmd->add_option("--output-dir", options->output_dir, "Write one file per output, named after it");
  cmd->add_flag("--npy", options->npy, "Write outputs as .npy instead of .pb");
  cmd->add_option("--iterations", options->iterations, "Runs to time (latency is the median)")->check(CLI::Range(1, 1000000));
  options->load.add_to(cmd);
  cmd->add_flag("-q,--quiet", options->quiet, "Do not print output values");
  cmd->callback([options] {
    auto engine = options->load.load(options->engine);
    edgert_error error{};
    std::map<std::string, HostTensor> given = read_input_specs(options->inputs);
    std::vector<edgert_tensor> inputs;  // views into `given`, which must outlive the runs
    std::set<std::string> used;
    for (const std::string& name : engine->input_names()) {
      auto it = given.find(name);
      if (it == given.end()) {
        std::string all;
        for (const std::string& n : engine->input_names()) all += (all.empty() ? "" : ", ") + n;
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "no --input given for engine input '%s' (inputs: %s)",
                            name.c_str(), all.c_str());
      }
      inputs.push_back(it->second.view());
      used.insert(name);
    }
    for (const auto& [name, tensor] : given)
      if (!used.count(name))
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "the engine has no input named '%s'", name.c_str());

    ExecutionContext context(*engine);
    std::vector<double> times_ms;
    for (int i = 0; i < options->iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
        builder::build_fail(error.status, "%s", error.message);
      times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
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
    std::printf("latency: median %.3f ms, min %.3f ms over %d run(s)\n", times_ms[times_ms.size() / 2], times_ms.front(),
                options->iterations);
  });
}

}  // namespace edgert::cli
