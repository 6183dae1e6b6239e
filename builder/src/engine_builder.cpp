#include "engine_builder.h"

#include <algorithm>
#include <cstdio>

#include "build_error.h"
#include "engine_writer.h"
#include "kernel_selection.h"
#include "onnx_import.h"
#include "host_machine.h"
#include "plugin_loader.h"
#include "self_test.h"
#include "timing_cache.h"

namespace edgert::builder {

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s + "]";
}

// A profile must name real inputs, match their rank and static dims, and keep min <= opt <= max.
void validate_profile(const Graph& graph, const std::map<std::string, InputShapeRange>& profile) {
  for (const auto& [name, range] : profile) {
    const Value* input = nullptr;
    for (int32_t t : graph.inputs)
      if (graph.values[t].name == name) input = &graph.values[t];
    if (!input) {
      std::string names;
      for (int32_t t : graph.inputs) names += (names.empty() ? "" : ", ") + graph.values[t].name;
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "shape profile names '%s', which is not a model input (inputs: %s)",
                 name.c_str(), names.c_str());
    }
    if (range.min.size() != range.opt.size() || range.opt.size() != range.max.size())
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s': min %s, opt %s and max %s shapes must have the same rank",
                 name.c_str(), dims_text(range.min).c_str(), dims_text(range.opt).c_str(), dims_text(range.max).c_str());
    if (input->rank_known && input->shape.size() != range.min.size())
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s' has rank %zu; its profile shapes have rank %zu", name.c_str(),
                 input->shape.size(), range.min.size());
    for (size_t d = 0; d < range.min.size(); ++d) {
      if (range.min[d] < 0 || range.min[d] > range.opt[d] || range.opt[d] > range.max[d])
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s': dimension %zu needs min <= opt <= max, got %lld, %lld, %lld",
                   name.c_str(), d, static_cast<long long>(range.min[d]), static_cast<long long>(range.opt[d]),
                   static_cast<long long>(range.max[d]));
      int64_t fixed = input->rank_known ? input->shape[d].value : -1;
      if (fixed >= 0 && (range.min[d] != fixed || range.max[d] != fixed))
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "input '%s': dimension %zu is fixed at %lld in the model; the profile "
                   "gives %lld..%lld", name.c_str(), d, static_cast<long long>(fixed), static_cast<long long>(range.min[d]),
                   static_cast<long long>(range.max[d]));
    }
  }
}

// Tactics are timed only where the engine will run: this machine must be able to run an
// engine built for the board (same architecture, every CPU feature the profile lists).
bool board_is_this_machine(const config::BoardProfile& board, std::string* why_not) {
  if (board.hardware.architecture != host_architecture()) {
    *why_not = "it is " + board.hardware.architecture + ", this machine is " + host_architecture();
    return false;
  }
  for (const std::string& feature : board.hardware.cpu_features)
    if (!host_has_cpu_feature(feature)) {
      *why_not = "it has CPU feature " + feature + ", this machine lacks it";
      return false;
    }
  return true;
}

TimingCache open_timing_cache(const BuildOptions& options, BuildResult& result) {
  if (options.timing_cache_path.empty() || options.tactics == TacticPolicy::kFirst) return TimingCache();
  try {
    return TimingCache::open(options.timing_cache_path);
  } catch (const BuildError& e) {
    if (!options.ignore_timing_cache_errors) throw;
    result.warnings.push_back(std::string(e.what()) + "; building without a timing cache (--ignore-timing-cache-errors)");
    return TimingCache();
  }
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", s);
  return text;
}

}  // namespace

BuildResult build_engine(const BuildOptions& options) {
  BuildResult result;
  result.model = import_onnx(options.model_path);
  if (options.log) {
    size_t nodes = 0;
    for (const Graph& g : result.model.graphs) nodes += g.nodes.size();
    options.log("imported " + options.model_path + ": " + std::to_string(nodes) + " nodes, " +
                std::to_string(result.model.graphs.size()) + " graphs, opset " +
                std::to_string(result.model.opsets[""]));
  }

  std::vector<std::string> search_path = plugin_search_path(options.plugin_path);
  edgert_error error{};
  std::vector<const LoadedPlugin*> plugins = load_all_plugins(search_path, &error);
  if (plugins.empty()) {
    std::string dirs;
    for (const std::string& d : search_path) dirs += (dirs.empty() ? "" : ", ") + d;
    build_fail(EDGERT_ERR_PLUGIN, "no usable plugin found in %s%s%s", dirs.c_str(),
               error.message[0] ? ": " : "", error.message);
  }
  plugins.erase(std::remove_if(plugins.begin(), plugins.end(),
                               [](const LoadedPlugin* p) { return p->table->score && p->table->score() <= 0; }),
                plugins.end());
  std::stable_sort(plugins.begin(), plugins.end(), [](const LoadedPlugin* a, const LoadedPlugin* b) {
    return (a->table->score ? a->table->score() : 0) > (b->table->score ? b->table->score() : 0);
  });

  if (options.optimize) {
    PassOptions pass_options;
    pass_options.plugins = plugins;
    pass_options.log = options.log;
    result.passes = PassManager::standard(pass_options).run(result.model);
  }

  // Kernel threads while timing, and in every cache record's key: --threads, else the board's
  // cores (the profile's cpu.cores; for --board native this machine's kernel threads), which
  // is what the engine runs with there. Not this machine's CPU count when the board is another:
  // a build here then looks up the key a build on the board wrote (board_tuning.h).
  const int32_t threads = options.threads > 0 ? options.threads : std::max(1, options.board.cpu_cores);
  TimingCache cache = open_timing_cache(options, result);
  std::string not_here;
  result.timed_here = board_is_this_machine(options.board, &not_here);
  if (!result.timed_here) {
    result.not_timed_why = "board " + options.board.name + " is not this machine (" + not_here + ")";
  } else if (options.threads == 0 && threads > std::max(this_host_machine().cpu_count, default_kernel_threads())) {
    // Timing its threads on fewer CPUs would measure the contention, not the kernels.
    result.timed_here = false;
    result.not_timed_why = "board " + options.board.name + " runs " + std::to_string(threads) +
                           " kernel threads and this machine has " + std::to_string(this_host_machine().cpu_count) +
                           " CPUs (--threads N times at N here; --board native builds for this machine)";
  }
  if (options.threads > 0 || (result.timed_here && options.tactics == TacticPolicy::kTune)) {
    edgert_error config_error{};
    if (configure_plugins(threads, 0, &config_error) != EDGERT_OK)
      build_fail(config_error.status, "--threads %d: %s", threads, config_error.message);
  }
  TunerOptions tuning;
  tuning.policy = options.tactics;
  tuning.time_here = result.timed_here;
  tuning.board_fingerprint = options.board.fingerprint();
  tuning.board_cpu_features = options.board.hardware.cpu_features;
  tuning.threads = threads;
  if (options.tuning_together_bytes) tuning.together_bytes = *options.tuning_together_bytes;
  tuning.cache = &cache;
  tuning.log = options.log;
  TacticTuner tuner(tuning);
  if (options.log && options.tactics == TacticPolicy::kTune)
    options.log(result.timed_here ? "tactics: timing on this machine for board " + options.board.name + " (fingerprint " +
                                        tuning.board_fingerprint + ") at " + std::to_string(threads) + " kernel thread(s)"
                                  : "tactics: not timing, " + result.not_timed_why +
                                        "; taking timing cache records for fingerprint " + tuning.board_fingerprint +
                                        " at " + std::to_string(threads) +
                                        " thread(s), else each kernel's first-listed tactic");

  SelectionOptions selection;
  selection.plugins = plugins;
  selection.log = options.log;
  selection.tuner = &tuner;
  select_kernels(result.model, selection);
  result.tuning = tuner.stats();
  if (cache.read_only() && cache.pending() > 0)
    result.warnings.push_back("timing cache '" + cache.path() + "' is read-only: " + std::to_string(cache.pending()) +
                              " new record(s) not saved");
  else
    cache.save();
  if (options.log && options.tactics == TacticPolicy::kTune) {
    const TunerStats& t = result.tuning;
    options.log("timing cache: " + std::to_string(t.hits) + " hits, " + std::to_string(t.misses) + " misses (" +
                std::to_string(t.nodes) + " nodes with several tactics, " + std::to_string(t.timed) + " timed in " +
                seconds_text(t.timing_seconds) + ", " + std::to_string(t.first_listed) + " first-listed; " +
                (cache.path().empty() ? std::string("no cache file") : "file " + cache.path()) + ")");
  }

  validate_profile(result.model.graphs[0], options.profile);
  result.memory_plan = plan_memory(result.model);
  if (options.log) {
    const MemoryPlan& p = result.memory_plan;
    options.log("memory plan: " + std::to_string(p.planned_tensors) + " tensors, " +
                std::to_string(p.activation_bytes) + " activation bytes in a " + std::to_string(p.arena_bytes) +
                "-byte arena (largest tensor " + std::to_string(p.largest_tensor_bytes) + " bytes, " +
                std::to_string(p.in_place) + " in place, " + std::to_string(p.concats_in_place) +
                " Concat(s) with inputs in place), workspace " + std::to_string(p.workspace_bytes) + " bytes");
  }
  WriterInputs writer;
  writer.memory_plan = &result.memory_plan;
  writer.profile = options.profile;
  writer.model = &result.model;
  writer.board = &options.board;
  writer.plugins = plugins;
  writer.signer = options.signer;
  result.engine = serialize_engine(writer);
  if (options.self_test) {
    // The engine runs once as written; the second serialization adds what it computed.
    std::optional<SelfTestVector> vector =
        make_self_test(result.engine, options.plugin_path, options.self_test_seed, &result.self_test_skipped);
    if (vector) {
      writer.self_test = &*vector;
      result.engine = serialize_engine(writer, std::move(result.engine));
      result.has_self_test = true;
    }
    if (options.log)
      options.log(vector ? "self-test vector: seed " + std::to_string(options.self_test_seed) + ", " +
                               std::to_string(vector->inputs.size()) + " input(s), " +
                               std::to_string(vector->outputs.size()) + " output(s)"
                         : "no self-test vector: " + result.self_test_skipped);
  }
  if (options.log) options.log("engine: " + std::to_string(result.engine.size()) + " bytes");
  return result;
}

}  // namespace edgert::builder
