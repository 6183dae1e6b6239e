// edgert bench ENGINE [--input NAME=FILE ...] [--iterations N] [--warmup N] [--profile]
// Times whole runs (median, min, max); with --profile also every layer of the main graph
// (median over the timed runs), sorted by cost, and how much of the run the layers account for.
// Inputs not given are filled with reproducible pseudo-random values at the engine's static
// shape, or the optimization profile's opt shape for dynamic dimensions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>

#include "build_error.h"
#include "commands.h"
#include "error.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "engine_inputs.h"
#include "tensor_io.h"

namespace edgert::cli {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Options {
    std::string engine;
    std::vector<std::string> inputs;
    int iterations = 20, warmup = 2;
    bool profile = false;
    EngineLoadFlags load;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("bench", "Time an engine, optionally per layer (--profile)");
  cmd->add_option("engine", options->engine, "Engine file")->required();
  cmd->add_option("-i,--input", options->inputs, "NAME=FILE (.pb or .npy); inputs not given are synthesised");
  cmd->add_option("--iterations", options->iterations, "Timed runs")->check(CLI::Range(1, 1000000))->capture_default_str();
  cmd->add_option("--warmup", options->warmup, "Untimed runs first")->check(CLI::Range(0, 1000000))->capture_default_str();
  cmd->add_flag("--profile", options->profile, "Per-layer times (median over the timed runs), most expensive first");
  options->load.add_to(cmd);
  cmd->callback([options] {
    auto engine = options->load.load(options->engine);
    edgert_error error{};
    std::map<std::string, HostTensor> given = read_input_specs(options->inputs);
    std::mt19937 rng(1234);
    std::vector<HostTensor> host;
    for (size_t i = 0; i < engine->input_names().size(); ++i) {
      auto it = given.find(engine->input_names()[i]);
      host.push_back(it != given.end() ? it->second : synthetic_input(*engine, i, rng));
    }
    std::vector<edgert_tensor> inputs;
    for (const HostTensor& h : host) inputs.push_back(h.view());

    ExecutionContext context(*engine);
    const LoadedGraph& graph = engine->main_graph();
    std::vector<double> layer_ns(graph.nodes.size(), 0.0);
    std::vector<std::vector<double>> per_layer(graph.nodes.size());
    std::vector<double> runs_ms;
    for (int i = 0; i < options->warmup + options->iterations; ++i) {
      const bool timed = i >= options->warmup;
      std::fill(layer_ns.begin(), layer_ns.end(), 0.0);
      context.set_layer_times(options->profile && timed ? &layer_ns : nullptr);
      auto start = std::chrono::steady_clock::now();
      if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
        builder::build_fail(error.status, "%s", error.message);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!timed) continue;
      runs_ms.push_back(ms);
      if (options->profile)
        for (size_t n = 0; n < layer_ns.size(); ++n) per_layer[n].push_back(layer_ns[n] / 1e6);
    }
    std::vector<double> sorted = runs_ms;
    std::sort(sorted.begin(), sorted.end());
    const double run_median = median(runs_ms);
    std::printf("engine %s: %zu layers, arena %zu bytes\n", options->engine.c_str(), graph.nodes.size(),
                context.arena_bytes());
    std::printf("latency: median %.3f ms, min %.3f ms, max %.3f ms over %d run(s)\n", run_median, sorted.front(),
                sorted.back(), options->iterations);
    if (!options->profile) return;
    struct Row {
      size_t node;
      double ms;
    };
    std::vector<Row> rows;
    double total = 0;
    for (size_t n = 0; n < per_layer.size(); ++n) {
      rows.push_back({n, median(per_layer[n])});
      total += rows.back().ms;
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
    std::printf("%10s %7s  %-24s %-28s %s\n", "median ms", "share", "op", "kernel", "layer");
    for (const Row& r : rows) {
      const LoadedNode& node = graph.nodes[r.node];
      std::string op = (node.node.domain && *node.node.domain ? std::string(node.node.domain) + "." : "") + node.node.op_type;
      std::string kernel = node.plugin ? node.plugin->name + "/" + node.kernel->name : "builtin";
      std::printf("%10.4f %6.1f%%  %-24s %-28s %s\n", r.ms, total > 0 ? 100.0 * r.ms / total : 0.0, op.c_str(),
                  kernel.c_str(), node.node.name);
    }
    std::printf("layers total: %.3f ms = %.1f%% of the median run (%.3f ms)\n", total,
                run_median > 0 ? 100.0 * total / run_median : 0.0, run_median);
  });
}

}  // namespace edgert::cli
