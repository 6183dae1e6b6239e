#include "build_request.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "board_catalog.h"
#include "build_error.h"
#include "engine_signing.h"

namespace edgert::api {
namespace {

using builder::build_fail;

bool parse_switch(const std::string& name, const std::string& value) {
  if (value == "1" || value == "true" || value == "on" || value.empty()) return true;
  if (value == "0" || value == "false" || value == "off") return false;
  build_fail(EDGERT_ERR_INVALID_ARGUMENT, "option '%s': '%s' is not 1/true/on or 0/false/off", name.c_str(),
             value.c_str());
}

double parse_number(const std::string& name, const std::string& value, double low, double high) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= low && v <= high))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "option '%s': '%s' is not a number in [%g, %g]", name.c_str(),
               value.c_str(), low, high);
  return v;
}

std::string one_of(const std::string& name, const std::string& value, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return value;
    list += list.empty() ? a : std::string(", ") + a;
  }
  build_fail(EDGERT_ERR_INVALID_ARGUMENT, "option '%s': '%s' is not one of %s", name.c_str(), value.c_str(),
             list.c_str());
}

std::vector<float> three_floats(const std::string& name, const std::string& value) {
  std::vector<float> values;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = value.find(',', start);
    const std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    values.push_back(static_cast<float>(parse_number(name, item, -HUGE_VAL, HUGE_VAL)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (values.size() != 3)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "option '%s': '%s' must be 3 comma-separated values", name.c_str(),
               value.c_str());
  return values;
}

// "input:1x3x224x224,mask:1x224x224" -> (name, dims) in order. The name ends at the last ':'
// so names with ':' (common in TF exports) work.
std::vector<std::pair<std::string, std::vector<int64_t>>> parse_shape_list(const std::string& spec,
                                                                          const char* option) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? spec.size() : comma + 1;
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: '%s' must be NAME:DxDx...", option, item.c_str());
    std::vector<int64_t> dims;
    std::string text = item.substr(colon + 1);
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t x = text.find('x', pos);
      std::string d = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: '%s' is not a dimension in '%s'", option, d.c_str(), item.c_str());
      dims.push_back(v);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    shapes.emplace_back(item.substr(0, colon), dims);
  }
  return shapes;
}

// Every --min-shapes (--opt-shapes, --max-shapes) value, repeated or comma-joined, in order:
// the k-th shape given for an input belongs to optimization profile k (as polygraphy's
// --trt-min-shapes), so `--minShapes=a:1x3,b:1x4` and `--minShapes=a:1x3 --minShapes=b:1x4`
// are one profile, and naming an input again starts the next profile.
std::vector<std::map<std::string, std::vector<int64_t>>> shapes_by_profile(const std::vector<std::string>& specs,
                                                                          const char* option) {
  std::vector<std::map<std::string, std::vector<int64_t>>> profiles;
  for (const std::string& spec : specs)
    for (auto& [name, dims] : parse_shape_list(spec, option)) {
      size_t p = 0;
      while (p < profiles.size() && profiles[p].count(name)) ++p;
      if (p == profiles.size()) profiles.emplace_back();
      profiles[p][name] = dims;
    }
  return profiles;
}

std::vector<builder::ShapeProfile> parse_profiles(const std::vector<std::string>& min,
                                                  const std::vector<std::string>& opt,
                                                  const std::vector<std::string>& max) {
  auto mins = shapes_by_profile(min, "--min-shapes"), opts = shapes_by_profile(opt, "--opt-shapes"),
       maxs = shapes_by_profile(max, "--max-shapes");
  const size_t count = std::max({mins.size(), opts.size(), maxs.size()});
  mins.resize(count);
  opts.resize(count);
  maxs.resize(count);
  std::vector<builder::ShapeProfile> profiles(count);
  for (size_t p = 0; p < count; ++p)
    for (const auto* list : {&mins[p], &opts[p], &maxs[p]})
      for (const auto& [name, dims] : *list) {
        if (!mins[p].count(name) || !opts[p].count(name) || !maxs[p].count(name))
          build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                     "input '%s' needs all of --min-shapes, --opt-shapes and --max-shapes%s", name.c_str(),
                     count > 1 ? (" in optimization profile " + std::to_string(p)).c_str() : "");
        profiles[p][name] = builder::InputShapeRange{mins[p][name], opts[p][name], maxs[p][name]};
      }
  return profiles;
}

}  // namespace

BuildRequest::BuildRequest(std::string model_path) : model_path_(std::move(model_path)) {}

void BuildRequest::set_option(const std::string& name, const std::string& value) {
  // Switches, then valued options, by `edgert build`'s long flag names (cmd_build.cpp).
  std::map<std::string, bool*> switches = {
      {"fp16", &fp16_},          {"bf16", &precision_.bf16},    {"int8", &precision_.int8},
      {"best", &precision_.best}, {"tf32", &tf32_},              {"ignore-timing-cache-errors", &ignore_timing_cache_errors_}};
  std::map<std::string, bool*> negated = {{"no-optimize", &optimize_},
                                          {"no-self-test", &self_test_},
                                          {"no-prepared-weights", &prepared_weights_},
                                          {"no-gpu", &use_gpu_},
                                          {"no-tune", &tune_}};
  std::map<std::string, std::string*> texts = {
      {"board", &board_},          {"plugin-path", &plugin_path_},   {"sign", &sign_key_},
      {"timing-cache", &timing_cache_}, {"calib", &precision_.calib}, {"calib-cache", &precision_.calib_cache},
      {"accuracy-guard", &precision_.accuracy_guard}, {"validation", &precision_.validation},
      {"camera", &camera_},        {"postprocess", &postprocess_}};
  std::map<std::string, std::vector<std::string>*> repeated = {{"min-shapes", &min_shapes_},
                                                               {"opt-shapes", &opt_shapes_},
                                                               {"max-shapes", &max_shapes_},
                                                               {"layer-precisions", &precision_.layer_precisions}};
  if (auto s = switches.find(name); s != switches.end()) {
    *s->second = parse_switch(name, value);
  } else if (auto n = negated.find(name); n != negated.end()) {
    *n->second = !parse_switch(name, value);
  } else if (auto t = texts.find(name); t != texts.end()) {
    *t->second = value;
  } else if (auto r = repeated.find(name); r != repeated.end()) {
    r->second->push_back(value);
  } else if (name == "fp16-tolerance") {
    fp16_tolerance_ = parse_number(name, value, 0, 1);
  } else if (name == "bf16-tolerance") {
    bf16_tolerance_ = parse_number(name, value, 0, 1);
  } else if (name == "threads") {
    const double threads = parse_number(name, value, 0, 1024);
    if (threads != static_cast<int32_t>(threads))
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "option 'threads': '%s' is not a whole number", value.c_str());
    threads_ = static_cast<int32_t>(threads);
  } else if (name == "calibrator") {
    precision_.calibrator = value;  // the calibration checks the name (calibrators.h)
  } else if (name == "precision-constraints") {
    precision_.precision_constraints = one_of(name, value, {"obey", "prefer"});
  } else if (name == "gpu-layout") {
    gpu_layout_ = one_of(name, value, {"auto", "nhwc", "nchw"});
  } else if (name == "camera-order") {
    camera_order_ = one_of(name, value, {"rgb", "bgr"});
  } else if (name == "camera-mean") {
    camera_mean_ = three_floats(name, value);
  } else if (name == "camera-std") {
    camera_std_ = three_floats(name, value);
  } else if (name == "tactics") {
    tune_ = one_of(name, value, {"tune", "first"}) == "tune";
  } else {
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "no build option '%s' (options are edgert build's long flags, without "
               "the dashes: see edgert build --help)", name.c_str());
  }
}

void BuildRequest::set_calibration(std::function<std::optional<builder::CalibrationBatch>()> next_batch) {
  precision_.calib_samples = std::move(next_batch);
}

BuildOutcome BuildRequest::build() const {
  BuildOutcome outcome;
  builder::BuildOptions build;
  build.model_path = model_path_;
  config::ResolvedBoard board = config::resolve_board(board_);
  build.board = board.profile;
  outcome.board = board.profile.name;
  outcome.native_board = board.native;
  if (!plugin_path_.empty()) build.plugin_path = plugin_path_.c_str();
  build.optimize = optimize_;
  build.profiles = parse_profiles(min_shapes_, opt_shapes_, max_shapes_);
  build.self_test = self_test_;
  build.prepared_weights = prepared_weights_;
  build.fp16 = fp16_;
  build.fp16_tolerance = fp16_tolerance_;
  build.bf16_tolerance = bf16_tolerance_;
  outcome.warnings = cli::apply_precision_flags(precision_, build);
  if (!camera_.empty()) {
    build.camera = builder::parse_camera_input(camera_);
    build.camera->channel_order = camera_order_;
    if (!camera_mean_.empty()) build.camera->mean = camera_mean_;
    if (!camera_std_.empty()) build.camera->std = camera_std_;
    for (float s : build.camera->std)
      if (!(s > 0)) build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera-std: values must be positive, got %g", s);
  } else if (!camera_mean_.empty() || !camera_std_.empty() || camera_order_ != "rgb") {
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera-order, --camera-mean and --camera-std need --camera");
  }
  if (!postprocess_.empty()) build.postprocess = builder::parse_output_postprocess(postprocess_);
  build.tf32 = tf32_;
  build.gpu_layout = gpu_layout_ == "nhwc"   ? builder::GpuLayout::kChannelsLast
                     : gpu_layout_ == "nchw" ? builder::GpuLayout::kChannelsFirst
                                             : builder::GpuLayout::kAuto;
  build.use_device = use_gpu_;
  build.tactics = tune_ ? builder::TacticPolicy::kTune : builder::TacticPolicy::kFirst;
  build.timing_cache_path = timing_cache_;
  build.ignore_timing_cache_errors = ignore_timing_cache_errors_;
  build.threads = threads_;
  build.log = log_;
  signing::KeyPair key;
  builder::SignerRef signer;
  if (!sign_key_.empty()) {
    key = signing::read_secret_key(sign_key_);
    signer = builder::SignerRef{key.name, key.public_key};
    build.signer = &signer;
  }
  if (build.log && board.native)
    build.log("board native: " + board.profile.name + " (" + board.reason + "); " +
              std::to_string(board.profile.cpu_cores) + " kernel threads");
  outcome.fp16 = build.fp16;
  outcome.int8 = build.int8;
  outcome.tuned = build.tactics == builder::TacticPolicy::kTune;
  outcome.result = builder::build_engine(build);
  if (build.signer) {
    signing::sign_engine(outcome.result.engine, key);
    outcome.signed_by = key.name;
  }
  outcome.warnings.insert(outcome.warnings.end(), outcome.result.warnings.begin(), outcome.result.warnings.end());
  return outcome;
}

namespace {

std::string fp16_line(const BuildOutcome& outcome) {
  const bool fp16_flag = outcome.fp16;
  const builder::BuildResult& result = outcome.result;
  if ((result.fp16_nodes == 0 && result.cpu_reduced_nodes == 0 && result.fp16_kept_float32 == 0) ||
      std::isnan(result.fp16_rel_l2))
    return "";
  // GPU layers in float16, else CPU convolutions allowed bfloat16 or float16 (timing picks).
  const bool gpu = result.fp16_nodes > 0;
  const char* flag = fp16_flag ? "fp16" : "bf16";
  const std::string layers = gpu ? std::to_string(result.fp16_nodes) + " layer(s) in float16"
                                 : std::to_string(result.cpu_reduced_nodes) + " CPU convolution(s) allowed " +
                                       (fp16_flag ? "float16" : "bfloat16");
  char line[512];
  if (result.fp16_kept_float32 > 0)
    std::snprintf(line, sizeof line,
                  "%s: %s, the first %d that take it kept float32 for accuracy: relative L2 %.2e against float32 "
                  "(%.2e with none kept; tolerance %.2e)",
                  flag, layers.c_str(), result.fp16_kept_float32, result.fp16_rel_l2, result.fp16_rel_l2_all_half,
                  result.fp16_tolerance);
  else
    std::snprintf(line, sizeof line, "%s: %s: relative L2 %.2e against float32 (tolerance %.2e)", flag,
                  layers.c_str(), result.fp16_rel_l2, result.fp16_tolerance);
  return line;
}

}  // namespace

std::string build_report_json(const BuildOutcome& outcome, const std::string& model_path) {
  const builder::BuildResult& result = outcome.result;
  nlohmann::ordered_json summary = nlohmann::ordered_json::array();
  if (!outcome.signed_by.empty()) summary.push_back("signed by '" + outcome.signed_by + "' (ed25519)");
  if (std::string line = fp16_line(outcome); !line.empty()) summary.push_back(line);
  if (outcome.int8 && result.int8.not_applied.empty())
    for (const std::string& line : cli::int8_summary_lines(result)) summary.push_back(line);
  if (result.accuracy_guard)
    for (const std::string& line : cli::accuracy_guard_lines(*result.accuracy_guard)) summary.push_back(line);
  const builder::TunerStats& t = result.tuning;
  if (t.nodes > 0 && outcome.tuned) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "tactics: %d node(s) with several; timing cache: %d hits, %d misses; %d timed (%.2f s)%s", t.nodes,
                  t.hits, t.misses, t.timed, t.timing_seconds,
                  result.timed_here ? "" : ("; not timed here: " + result.not_timed_why).c_str());
    summary.push_back(line);
  }
  nlohmann::ordered_json report = {
      {"model", model_path},
      {"board", outcome.board},
      {"native_board", outcome.native_board},
      {"nodes", result.model.graphs.empty() ? 0 : result.model.graphs[0].nodes.size()},
      {"bytes", result.engine.size()},
      {"warnings", outcome.warnings},
      {"summary", summary},
      {"fp16_nodes", result.fp16_nodes},
      {"int8", {{"convolutions", result.int8.convolutions}, {"kept_float", result.int8.kept_float}}},
      {"calibration",
       {{"from_cache", result.calibration.from_cache},
        {"calibrator", result.calibration.calibrator},
        {"samples", result.calibration.samples},
        {"tensors", result.calibration.tensors},
        {"cache_path", result.calibration.cache_path}}},
      {"tuning", {{"nodes", t.nodes}, {"hits", t.hits}, {"misses", t.misses}, {"timed", t.timed}}},
      {"self_test", result.has_self_test},
      {"signed_by", outcome.signed_by.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(outcome.signed_by)}};
  return report.dump();
}

}  // namespace edgert::api
