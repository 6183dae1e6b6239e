// edgert bench ENGINE [--input NAME=FILE ...] [--shapes NAME:DxD...] [--iterations N] [--warmup N]
//                    [--warmUp MS] [--duration S] [--threads N] [--pin-threads] [--profile]
//                    [--json FILE|-] [--exportTimes FILE] [--versus OTHER]
// trtexec in spirit: untimed warm-up runs, then timed runs until both --iterations runs and
// --duration seconds are done; prints min / median / mean / p90 / p99 / max latency and the
// throughput (timed runs per second of timed wall time). With --profile also every layer of the
// main graph (median over the timed runs), sorted by cost, and how much of the run the layers
// account for. --json writes the same as one object (fields in README.md); with "-" it goes to
// stdout and the text report to stderr. --exportTimes writes every timed run (run_flags.h).
// Inputs not given are filled with reproducible pseudo-random values at their --shapes shape,
// else the engine's static shape, or the optimization profile's opt shape for dynamic
// dimensions. --versus OTHER times a second engine in the same process, runs taking turns
// (bench_versus.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "bench_versus.h"
#include "build_error.h"
#include "commands.h"
#include "error.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "engine_inputs.h"
#include "input_shapes.h"
#include "latency_stats.h"
#include "run_flags.h"
#include "tensor_io.h"

namespace edgert::cli {

namespace {

// --json FILE: the object to FILE, or to stdout for "-".
void write_json(const nlohmann::ordered_json& j, const std::string& path) {
  if (path == "-") {
    std::printf("%s\n", j.dump(2).c_str());
  } else if (!path.empty()) {
    write_file_checked(path, j.dump(2) + "\n");
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Options {
    std::string json, versus;
    bool profile = false;
    RunFlags run;
    EngineLoadFlags load;
  };
  auto options = std::make_shared<Options>();
  options->run.iterations = 20;
  options->run.warmup_runs = 2;
  CLI::App* cmd = app.add_subcommand("bench", "Time an engine: latency percentiles, throughput, per layer (--profile)");
  options->run.add_to(cmd);
  cmd->add_flag("--profile", options->profile, "Per-layer times (median over the timed runs), most expensive first");
  cmd->add_option("--json", options->json, "Also write the results as JSON to FILE ('-': stdout, text to stderr)");
  cmd->add_option("--versus", options->versus,
                  "Another engine to time in the same process, runs taking turns: prints the median of the pairs' "
                  "OTHER / ENGINE ratios (--iterations pairs)");
  options->load.add_to(cmd);
  cmd->callback([options] {
    const RunFlags& flags = options->run;
    const std::string& engine_path = flags.engine_path();
    auto engine = options->load.load(engine_path);
    edgert_error error{};
    std::mt19937 rng(1234);
    std::vector<HostTensor> host =
        engine_inputs(*engine, read_input_specs(flags.inputs), parse_input_shapes(flags.shapes), true, rng);
    std::vector<edgert_tensor> inputs;
    for (const HostTensor& h : host) {
      inputs.push_back(h.view());
      if (g_verbose)
        std::fprintf(stderr, "[bench] input %s: %s %s\n", h.name.c_str(), dtype_name(h.dtype), shape_string(h.shape).c_str());
    }
    if (!options->versus.empty()) {
      if (options->profile) builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--profile and --versus do not go together");
      if (!flags.export_times.empty())
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--exportTimes and --versus do not go together");
      auto other = options->load.load(options->versus);
      FILE* text = options->json == "-" ? stderr : stdout;
      nlohmann::ordered_json j = bench_versus(*engine, engine_path, *other, options->versus, inputs,
                                              {flags.warmup_runs, flags.iterations, flags.duration_s, flags.warmup_ms},
                                              text);
      j["threads"] = options->load.threads;
      j["pin_threads"] = options->load.pin_threads;
      write_json(j, options->json);
      return;
    }

    ExecutionContext context(*engine);
    options->load.apply(context);
    // A device engine's compute time is measured on the device too (timers on the stream).
    const bool device = engine->device() != nullptr;
    context.set_device_timing(device);
    std::vector<double> device_ms;
    const LoadedGraph& graph = engine->main_graph();
    std::vector<double> layer_ns(graph.nodes.size(), 0.0);
    std::vector<std::vector<double>> per_layer(graph.nodes.size());
    std::vector<double> runs_ms;
    std::vector<double> layer_sums_ms;  // per timed run: its layers' times added up
    auto run_once = [&](bool timed) {
      std::fill(layer_ns.begin(), layer_ns.end(), 0.0);
      context.set_layer_times(options->profile && timed ? &layer_ns : nullptr);
      auto start = std::chrono::steady_clock::now();
      if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
        builder::build_fail(error.status, "%s", error.message);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!timed) return;
      runs_ms.push_back(ms);
      if (device) device_ms.push_back(context.device_ms());
      if (!options->profile) return;
      double sum_ms = 0;
      for (size_t n = 0; n < layer_ns.size(); ++n) {
        per_layer[n].push_back(layer_ns[n] / 1e6);
        sum_ms += layer_ns[n] / 1e6;
      }
      layer_sums_ms.push_back(sum_ms);
    };
    const auto warmup_start = std::chrono::steady_clock::now();
    const int warmups = flags.warm_up([&] { run_once(false); });
    if (g_verbose)
      std::fprintf(stderr, "[bench] %d warm-up run(s) in %.1f ms\n", warmups,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_start).count());
    std::vector<RunTime> times;
    auto timed_start = std::chrono::steady_clock::now();
    auto ms_since_start = [&] {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - timed_start).count();
    };
    double wall_s = 0;
    while (flags.more_timed_runs(runs_ms.size(), wall_s)) {
      RunTime t;
      t.start_ms = ms_since_start();
      run_once(true);
      t.end_ms = t.start_ms + runs_ms.back();  // the run's own time, as its latency counts it
      times.push_back(t);
      wall_s = ms_since_start() / 1000;
    }
    if (!flags.export_times.empty()) write_export_times(flags.export_times, times);

    std::vector<double> sorted = runs_ms;
    std::sort(sorted.begin(), sorted.end());
    const double run_median = median(runs_ms);
    double sum = 0;
    for (double ms : runs_ms) sum += ms;
    const double mean = sum / static_cast<double>(runs_ms.size());
    const double p90 = percentile(sorted, 90), p99 = percentile(sorted, 99);
    const double throughput = wall_s > 0 ? static_cast<double>(runs_ms.size()) / wall_s : 0;
    const bool json_to_stdout = options->json == "-";
    FILE* text = json_to_stdout ? stderr : stdout;
    std::fprintf(text, "engine %s: %zu layers, arena %zu bytes, threads %s\n", engine_path.c_str(),
                 graph.nodes.size(), context.arena_bytes(),
                 options->load.threads ? std::to_string(options->load.threads).c_str() : "plugin default");
    std::fprintf(text, "latency: median %.3f ms, min %.3f ms, max %.3f ms over %zu run(s)\n", run_median,
                 sorted.front(), sorted.back(), runs_ms.size());
    std::fprintf(text, "latency: mean %.3f ms, p90 %.3f ms, p99 %.3f ms; throughput %.2f inferences/s (%zu runs in %.3f s, "
                 "after %d warm-up run(s))\n", mean, p90, p99, throughput, runs_ms.size(), wall_s, warmups);
    if (device && !device_ms.empty() && device_ms.front() < 0) {
      std::fprintf(text, "gpu compute: not measured (host kernels in the run wait for the device; latency above is "
                   "the whole run)\n");
    } else if (device) {
      std::vector<double> sorted_device = device_ms;
      std::sort(sorted_device.begin(), sorted_device.end());
      // As trtexec's "GPU Compute Time": the device's time from the run's first kernel to its
      // last; latency above is the host's, from the call to the outputs on the host.
      std::fprintf(text, "gpu compute: median %.3f ms, min %.3f ms, p90 %.3f ms (%s; %s)\n", median(device_ms),
                   sorted_device.front(), percentile(sorted_device, 90),
                   context.replaying_graph() ? "CUDA graph replay" : "kernels enqueued one by one",
                   engine->device()->describe());
    }

    nlohmann::ordered_json j = {
        {"engine", engine_path},
        {"threads", options->load.threads},
        {"pin_threads", options->load.pin_threads},
        {"warmup_runs", warmups},
        {"iterations", runs_ms.size()},
        {"duration_s", wall_s},
        {"latency_ms", latency_json(runs_ms)},
        {"throughput_ips", throughput},
        {"layers", nullptr}};
    if (device) {
      j["gpu_compute_ms"] = device_ms.empty() || device_ms.front() < 0 ? nlohmann::ordered_json(nullptr)
                                                                       : latency_json(device_ms);
      j["cuda_graph"] = context.replaying_graph();
      j["device"] = engine->device()->describe();
    }
    if (options->profile) {
      struct Row {
        size_t node;
        double ms;
      };
      std::vector<Row> rows;
      double medians_sum = 0;
      for (size_t n = 0; n < per_layer.size(); ++n) {
        rows.push_back({n, median(per_layer[n])});
        medians_sum += rows.back().ms;
      }
      // The median of per-run sums, not the sum of per-layer medians: on a busy machine a run
      // that was preempted is slow in one layer, and per-layer medians would drop that time
      // from the layers while the run's median keeps it.
      const double total = median(layer_sums_ms);
      std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
      std::fprintf(text, "%10s %7s  %-24s %-28s %-36s %s\n", "median ms", "share", "op", "kernel", "tactic", "layer");
      const auto* fb_nodes = engine->file().engine()->graphs()->Get(0)->nodes();
      j["layers"] = nlohmann::ordered_json::array();
      for (const Row& r : rows) {
        const LoadedNode& node = graph.nodes[r.node];
        std::string op = (node.node.domain && *node.node.domain ? std::string(node.node.domain) + "." : "") + node.node.op_type;
        std::string kernel = node.plugin ? node.plugin->name + "/" + node.kernel->name : "builtin";
        double share = medians_sum > 0 ? 100.0 * r.ms / medians_sum : 0.0;
        const auto* tactic_name = fb_nodes && r.node < fb_nodes->size() ? fb_nodes->Get(r.node)->tactic_name() : nullptr;
        std::string tactic = tactic_name ? tactic_name->str() : std::to_string(node.tactic);
        std::fprintf(text, "%10.4f %6.1f%%  %-24s %-28s %-36s %s\n", r.ms, share, op.c_str(), kernel.c_str(),
                     tactic.c_str(), node.node.name);
        j["layers"].push_back({{"name", node.node.name}, {"op", op}, {"kernel", kernel}, {"tactic", node.tactic},
                               {"tactic_name", tactic_name ? nlohmann::ordered_json(tactic_name->str())
                                                           : nlohmann::ordered_json(nullptr)},
                               {"median_ms", r.ms}, {"share", share / 100.0}});
      }
      std::fprintf(text, "layers total: %.3f ms = %.1f%% of the median run (%.3f ms)\n", total,
                   run_median > 0 ? 100.0 * total / run_median : 0.0, run_median);
      j["layers_total_ms"] = total;
    }
    write_json(j, options->json);
  });
}

}  // namespace edgert::cli
