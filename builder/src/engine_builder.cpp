#include "engine_builder.h"

#include <algorithm>
#include <cstdio>

#include "build_error.h"
#include "device_placement.h"
#include "engine_writer.h"
#include "kernel_selection.h"
#include "onnx_import.h"
#include "host_machine.h"
#include "plugin_loader.h"
#include "accuracy_guard.h"
#include "cpu_reduced_precision.h"
#include "fp16_accuracy.h"
#include "qdq_export.h"
#include "self_test.h"
#include "timing_cache.h"

namespace edgert::builder {

namespace {

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

// What the kernels of every graph keep after prepare at the current shapes (packed weights):
// memory the engine holds once loaded, beside its mapped file and arenas.
uint64_t kernel_state_total(const Model& model) {
  uint64_t total = 0;
  for (const Graph& graph : model.graphs)
    for (const Node& node : graph.nodes)
      if (node.kernel_state_bytes > 0) total += static_cast<uint64_t>(node.kernel_state_bytes);
  return total;
}

// Makes each node's tactic the one chosen for `profile` (Node::profile_tactics), so shape
// inference sizes workspaces for it.
void use_profile_tactics(Graph& graph, size_t profile) {
  for (Node& node : graph.nodes)
    if (profile < node.profile_tactics.size()) {
      node.tactic = node.profile_tactics[profile];
      node.tactic_name = node.profile_tactic_names[profile];
    }
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", s);
  return text;
}

std::string precisions_text(const config::BoardProfile& board) {
  std::string list;
  for (const std::string& p : board.precisions) list += (list.empty() ? "" : ", ") + p;
  return list;
}

bool board_allows(const config::BoardProfile& board, const char* precision) {
  return std::find(board.precisions.begin(), board.precisions.end(), precision) != board.precisions.end();
}

// The int8 rewrite with the calibrated ranges and those a Q/DQ model carries (they win):
// nothing where there are none, on a device, or on a board whose precisions leave out int8.
int run_int8_rewrite(PassContext& context, const QuantizationTable& calibrated, const BuildOptions& options,
                     Int8RewriteReport* report) {
  *report = Int8RewriteReport();
  QuantizationTable table = calibrated;
  if (context.options.explicit_quantization)
    for (const auto& [name, quantization] : *context.options.explicit_quantization) table[name] = quantization;
  if (table.empty()) return 0;
  if (!board_allows(options.board, "int8")) {
    report->not_applied = "board " + options.board.name + " allows precisions " + precisions_text(options.board) +
                          " only (its profile's precisions:); the Q/DQ model's tensors run in float32";
    return 0;
  }
  Int8RewriteOptions rewrite;
  rewrite.keep_float = options.float32_layers;
  rewrite.fell_back = options.fell_back_layers;
  rewrite.expose_uint8_tensors = options.expose_activations;
  rewrite.plugins = context.options.plugins;
  rewrite.dense_convolutions_only = context.options.target_device;
  return rewrite_int8(context.graph, table, rewrite, report);
}

// Every plugin on the search path that runs here, the best-scoring first.
std::vector<const LoadedPlugin*> usable_plugins(const BuildOptions& options) {
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
  return plugins;
}

// The graph passes' options of a build; explicit quantization on (Q/DQ pairs become int8
// layers with or without --int8).
PassOptions pass_options_for(const BuildOptions& options, const std::vector<const LoadedPlugin*>& plugins,
                             bool target_device) {
  PassOptions pass_options;
  pass_options.plugins = plugins;
  pass_options.log = options.log;
  pass_options.profiles = options.profiles;
  pass_options.target_device = target_device;
  pass_options.device_fp16 = target_device && options.fp16;
  pass_options.explicit_quantization = std::make_shared<QuantizationTable>();
  return pass_options;
}

// One build as the options say (the FP16 check runs several); `precision`: the precision pass
// (PassOptions::precision), empty for none.
BuildResult build_once(const BuildOptions& options, const std::function<int(PassContext&)>& precision = {}) {
  BuildResult result;
  result.model = import_onnx(options.model_path);
  if (options.camera) prepend_camera_input(result.model, *options.camera);
  if (options.log) {
    size_t nodes = 0;
    for (const Graph& g : result.model.graphs) nodes += g.nodes.size();
    options.log("imported " + options.model_path + ": " + std::to_string(nodes) + " nodes, " +
                std::to_string(result.model.graphs.size()) + " graphs, opset " +
                std::to_string(result.model.opsets[""]));
  }

  std::vector<const LoadedPlugin*> plugins = usable_plugins(options);
  // Device plugins only for a board with that device, and not with --no-gpu. A GPU board built
  // where no GPU plugin runs gets a host-only engine, and says so.
  const bool board_gpu = options.board.gpu_type == "cuda";
  bool have_device = false;
  for (const LoadedPlugin* p : plugins) have_device = have_device || p->table->device;
  if (board_gpu && options.use_device && !have_device)
    result.warnings.push_back("board " + options.board.name + " has a " + options.board.hardware.gpu +
                              " GPU, but no GPU plugin runs on this machine (no driver or GPU, or the CUDA plugin is "
                              "not installed): every node runs on the CPU; build on the board (or a machine with "
                              "its GPU) for a GPU engine");
  if (!board_gpu || !options.use_device)
    plugins.erase(std::remove_if(plugins.begin(), plugins.end(), [](const LoadedPlugin* p) { return p->table->device; }),
                  plugins.end());
  have_device = have_device && board_gpu && options.use_device;
  if (options.fp16 && !board_allows(options.board, "fp16"))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--fp16: board %s allows precisions %s only (its profile's precisions:)",
               options.board.name.c_str(), precisions_text(options.board).c_str());
  if (options.bf16 && !board_allows(options.board, "bf16"))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--bf16: board %s allows precisions %s only (its profile's precisions:)",
               options.board.name.c_str(), precisions_text(options.board).c_str());

  Graph& main = result.model.graphs[0];
  if (options.postprocess) {
    // Exporters do not always declare the output's shape: the kernels' shape inference gives it.
    if (main.outputs.size() == 1 && (!main.values[main.outputs[0]].rank_known || main.values[main.outputs[0]].dtype == 0))
      infer_shapes(main, plugins);
    append_output_postprocess(result.model, *options.postprocess);
  }
  validate_profiles(main, options.profiles);
  for (int32_t t : main.inputs)
    if (options.profiles.empty() && !main.values[t].shape_is_static())
      result.warnings.push_back("input '" + main.values[t].name + "' is dynamic and no optimization profile was "
                                "given: what depends on it is neither tuned nor memory-planned (give "
                                "--min-shapes, --opt-shapes and --max-shapes)");
  if (options.optimize) {
    PassOptions pass_options = pass_options_for(options, plugins, have_device);
    pass_options.precision = precision ? precision : [&options, &result](PassContext& context) {
      return run_int8_rewrite(context, QuantizationTable(), options, &result.int8);
    };
    result.passes = PassManager::standard(pass_options).run(result.model);
  } else if (!options.profiles.empty()) {
    infer_profile_shapes(main, plugins, options.profiles, 0, ProfilePoint::kOpt);
  }

  // Devices: each node to a plugin, float16 on the device, memory spaces and copies.
  PlacementOptions placement;
  placement.plugins = plugins;
  placement.unified_memory = options.board.unified_memory;
  placement.log = options.log;
  placement.float32_prefix = options.fp16_float32_prefix;
  place_nodes(result.model, placement);
  if (have_device) fuse_int8_residual_adds(result.model, placement);
  if (have_device && options.tf32)
    for (Node& node : main.nodes)
      if (node.on_device) {
        Attribute tf32;
        tf32.name = "allow_tf32";
        tf32.type = EDGERT_ATTR_INT;
        tf32.i = 1;
        node.set_attribute(tf32);
      }
  if (have_device && options.fp16) result.fp16_nodes = convert_device_nodes_to_fp16(result.model, placement);
  result.cpu_reduced_nodes =
      allow_cpu_reduced_precision(result.model, options.bf16, options.fp16, options.fp16_float32_prefix);
  const bool half = result.fp16_nodes > 0;
  // Tensor cores: cuDNN's fast convolutions and the INT8 convolution read channels-last tensors.
  bool int8_on_device = false;
  for (const Node& node : main.nodes)
    int8_on_device = int8_on_device || (node.on_device && (node.op_type == "QLinearConv" || node.op_type == "QLinearConvAdd"));
  const bool channels_last = int8_on_device || options.gpu_layout == GpuLayout::kChannelsLast ||
                             (options.gpu_layout == GpuLayout::kAuto && (half || options.tf32));
  if (have_device && channels_last && convert_device_nodes_to_channels_last(result.model, placement) > 0)
    infer_profile_shapes(main, plugins, options.profiles, 0, ProfilePoint::kOpt);
  else if (half)
    infer_profile_shapes(main, plugins, options.profiles, 0, ProfilePoint::kOpt);
  if (have_device && assign_memory_spaces(result.model, placement) > 0) infer_shapes(main, plugins);

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
  // Further profiles: the same kernels, tactics timed again at each one's opt shapes.
  const size_t num_profiles = std::max<size_t>(options.profiles.size(), 1);
  for (size_t p = 1; p < num_profiles; ++p) {
    specialize_inputs(main, options.profiles[p], ProfilePoint::kOpt);
    infer_shapes(main, plugins);
    if (options.log) options.log("tactics for optimization profile " + std::to_string(p));
    select_profile_tactics(result.model, selection, p, num_profiles);
  }
  note_cpu_reduced_precision(result.model, result.timed_here && options.tactics == TacticPolicy::kTune);
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

  // Prepared weights for each node's (profile 0) tactic, exported at profile 0's opt shapes.
  // The kernel state each profile's plan records below is what remains beside them: the
  // shape inference that follows hands them to prepare as the runtime will.
  if (options.prepared_weights) {
    if (!options.profiles.empty()) {
      use_profile_tactics(main, 0);
      specialize_inputs(main, options.profiles[0], ProfilePoint::kOpt);
      infer_shapes(main, plugins);
    }
    result.prepared_weights = export_prepared_weights(main, plugins);
    if (options.profiles.empty()) infer_shapes(main, plugins);
    if (options.log)
      options.log("prepared weights: " + std::to_string(result.prepared_weights.nodes) + " node(s), " +
                  std::to_string(result.prepared_weights.bytes) + " bytes stored in the layout their tactics read");
  }

  // One plan per profile, made at its max shapes with its tactics' workspaces: every shape the
  // profile accepts fits its arena. The kernels' state at the same shapes goes beside it.
  std::vector<uint64_t> kernel_state_bytes;
  for (size_t p = 0; p < num_profiles; ++p) {
    if (!options.profiles.empty()) {
      use_profile_tactics(main, p);
      specialize_inputs(main, options.profiles[p], ProfilePoint::kMax);
      infer_shapes(main, plugins);
    }
    result.memory_plans.push_back(plan_memory(result.model));
    kernel_state_bytes.push_back(kernel_state_total(result.model));
    if (options.log) {
      const MemoryPlan& plan = result.memory_plans.back();
      options.log("memory plan" + (options.profiles.empty() ? std::string() : " of profile " + std::to_string(p) +
                                   " (max shapes)") + ": " + std::to_string(plan.planned_tensors) + " tensors, " +
                  std::to_string(plan.activation_bytes) + " activation bytes in a " + std::to_string(plan.arena_bytes) +
                  "-byte arena (largest tensor " + std::to_string(plan.largest_tensor_bytes) + " bytes, " +
                  std::to_string(plan.in_place) + " in place, " + std::to_string(plan.concats_in_place) +
                  " Concat(s) with inputs in place), workspace " + std::to_string(plan.workspace_bytes) + " bytes");
    }
  }
  result.memory_plan = result.memory_plans.front();
  if (!options.profiles.empty()) {
    // The engine describes the graph at profile 0's opt, with what varies made dynamic again.
    use_profile_tactics(main, 0);
    specialize_inputs(main, options.profiles[0], ProfilePoint::kOpt);
    infer_shapes(main, plugins);
    generalize_shapes(main);
    if (num_profiles == 1)
      for (Node& node : main.nodes) {
        node.profile_tactics.clear();
        node.profile_tactic_names.clear();
      }
  }
  WriterInputs writer;
  for (const MemoryPlan& plan : result.memory_plans) writer.memory_plans.push_back(&plan);
  writer.kernel_state_bytes = kernel_state_bytes;
  writer.profiles = options.profiles;
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


// The activation ranges of --int8: calibrated on the float32 model, or read from the cache.
QuantizationTable calibrated_table(const BuildOptions& options, CalibrationSummary* summary) {
  auto calibration_engine = [&options](const std::function<int(PassContext&)>& expose) {
    // The float32 model as the user gave it, every activation an output, on the CPU (the
    // values are the same on any plugin), untimed and without what only deployment needs.
    BuildOptions float32 = options;
    float32.int8 = false;
    float32.fp16 = false;
    float32.bf16 = false;
    float32.camera.reset();
    float32.postprocess.reset();
    float32.use_device = false;
    float32.self_test = false;
    float32.prepared_weights = false;
    float32.tactics = TacticPolicy::kFirst;
    float32.timing_cache_path.clear();
    return build_once(float32, expose).engine;
  };
  QuantizationTable table =
      calibrate_activations(options.model_path, options.calibration, options.plugin_path, calibration_engine, summary);
  if (options.log)
    options.log(std::string("int8: ") + std::to_string(summary->tensors) + " activation ranges (" +
                summary->calibrator + ", " + std::to_string(summary->samples) + " samples) " +
                (summary->from_cache ? "read from " : "calibrated") +
                (summary->from_cache ? summary->cache_path
                                     : summary->cache_path.empty() ? std::string() : ", saved to " + summary->cache_path));
  return table;
}

// The activation ranges of an --int8 build (calibrated once for every build that follows);
// null without --int8.
std::shared_ptr<const QuantizationTable> int8_table(const BuildOptions& options, CalibrationSummary* summary) {
  if (!options.int8) {
    if (!options.int8_layers.empty())
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--layer-precisions %s:int8 needs --int8 (or --best)",
                 options.int8_layers.begin()->c_str());
    return nullptr;
  }
  if (!board_allows(options.board, "int8"))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--int8: board %s allows precisions %s only (its profile's precisions:)",
               options.board.name.c_str(), precisions_text(options.board).c_str());
  if (options.optimize == false)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--int8 needs the graph passes (it is one of them): drop --no-optimize");
  return std::make_shared<const QuantizationTable>(calibrated_table(options, summary));
}

// The precision pass of one build with `options` (which outlive it): the int8 rewrite with
// `table` (null: only a Q/DQ model's own quantization), exposing the activations for the
// accuracy guard where the options ask.
std::function<int(PassContext&)> precision_pass(const BuildOptions& options,
                                                std::shared_ptr<const QuantizationTable> table,
                                                Int8RewriteReport* report) {
  if (!table && options.expose_activations) return expose_activations;
  if (!table) return {};
  return [table, report, &options](PassContext& context) {
    for (const std::set<std::string>* names : {&options.float32_layers, &options.int8_layers})
      for (const std::string& name : *names)
        if (std::none_of(context.graph.nodes.begin(), context.graph.nodes.end(),
                         [&](const Node& n) { return n.name == name; }))
          build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                     "--layer-precisions: no layer named '%s' in %s (edgert build -v lists the layers int8 made)",
                     name.c_str(), options.model_path.c_str());
    return run_int8_rewrite(context, *table, options, report);
  };
}

// Layers --layer-precisions names int8 that the rewrite left in float32: an error with
// --precision-constraints obey, else a warning.
void check_int8_layers(const BuildOptions& options, BuildResult& result) {
  for (const std::string& name : options.int8_layers) {
    bool made = false;
    for (const auto& [int8_node, replaced] : result.int8.replaced) made = made || replaced == name;
    if (made) continue;
    std::string why = "no int8 kernel takes it";
    for (const std::string& kept : result.int8.kept_float)
      if (kept.rfind(name + ": ", 0) == 0) why = kept.substr(name.size() + 2);
    if (options.precision_constraints_obey)
      build_fail(EDGERT_ERR_UNSUPPORTED, "--layer-precisions %s:int8 with --precision-constraints obey: %s",
                 name.c_str(), why.c_str());
    result.warnings.push_back("--layer-precisions " + name + ":int8: runs in float32 (" + why + ")");
  }
}

}  // namespace

Model quantized_qdq_model(const BuildOptions& options, Int8RewriteReport* report, CalibrationSummary* summary) {
  if (!board_allows(options.board, "int8"))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "quantize: board %s allows precisions %s only (its profile's precisions:)",
               options.board.name.c_str(), precisions_text(options.board).c_str());
  const QuantizationTable table = calibrated_table(options, summary);
  Model model = import_onnx(options.model_path);
  std::vector<const LoadedPlugin*> plugins = usable_plugins(options);
  plugins.erase(std::remove_if(plugins.begin(), plugins.end(), [](const LoadedPlugin* p) { return p->table->device; }),
                plugins.end());
  PassOptions pass_options = pass_options_for(options, plugins, false);
  pass_options.stop_after_precision = true;
  pass_options.precision = [&](PassContext& context) {
    QuantizationTable merged = table;
    for (const auto& [name, quantization] : *context.options.explicit_quantization) merged[name] = quantization;
    Int8RewriteOptions rewrite;
    rewrite.keep_float = options.float32_layers;
    rewrite.fell_back = options.fell_back_layers;
    rewrite.plugins = context.options.plugins;
    return insert_qdq(context.graph, merged, rewrite, report);
  };
  PassManager::standard(pass_options).run(model);
  return model;
}

BuildResult build_engine(const BuildOptions& options) {
  CalibrationSummary calibration;
  const std::shared_ptr<const QuantizationTable> table = int8_table(options, &calibration);
  auto build = [&](const BuildOptions& o) {
    Int8RewriteReport int8_report;
    BuildResult result = build_once(o, precision_pass(o, o.int8 ? table : nullptr, &int8_report));
    if (o.int8) {
      result.int8 = int8_report;
      result.calibration = calibration;
    }
    if (!result.int8.not_applied.empty()) result.warnings.push_back("int8 not applied: " + result.int8.not_applied);
    check_int8_layers(o, result);
    return result;
  };
  if (options.int8 && options.accuracy_guard) return guard_int8_accuracy(options, build);
  if (!options.fp16 && !options.bf16) return build(options);
  if (!options.postprocess || options.reduced_tolerance() <= 0)
    return keep_fp16_accuracy(options, build(options), build);
  // The FP16 check measures the model's scores: the reduced outputs (class indices, a class
  // map) jump wherever two scores nearly tie, whatever the precision. The layers it keeps in
  // float32 are counted from the front, so they are the same layers with the postprocess
  // appended.
  BuildOptions scores = options;
  scores.postprocess.reset();
  const BuildResult checked = keep_fp16_accuracy(scores, build(scores), build);
  BuildOptions with_postprocess = options;
  with_postprocess.fp16_float32_prefix = checked.fp16_kept_float32;
  BuildResult result = build(with_postprocess);
  result.fp16_kept_float32 = checked.fp16_kept_float32;
  result.fp16_tolerance = checked.fp16_tolerance;
  result.fp16_rel_l2 = checked.fp16_rel_l2;
  result.fp16_rel_l2_all_half = checked.fp16_rel_l2_all_half;
  for (const std::string& warning : checked.warnings)
    if (warning.rfind("--fp16:", 0) == 0) result.warnings.push_back(warning);
  return result;
}

}  // namespace edgert::builder
