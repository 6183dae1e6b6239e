// edgert build MODEL.onnx --board PROFILE -o OUT.engine (TensorRT spellings --onnx= --saveEngine=)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>

#include <sys/stat.h>

#include "board_catalog.h"
#include "board_profile.h"
#include "board_tuning.h"
#include "build_precisions.h"
#include "build_error.h"
#include "commands.h"
#include "engine_builder.h"
#include "engine_inputs.h"
#include "engine_signing.h"
#include "engine_writer.h"

namespace edgert::cli {
namespace {

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
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: '%s' must be NAME:DxDx...", option, item.c_str());
    std::vector<int64_t> dims;
    std::string text = item.substr(colon + 1);
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t x = text.find('x', pos);
      std::string d = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char* end = nullptr;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0)
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: '%s' is not a dimension in '%s'", option, d.c_str(), item.c_str());
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
          builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                              "input '%s' needs all of --min-shapes, --opt-shapes and --max-shapes%s", name.c_str(),
                              count > 1 ? (" in optimization profile " + std::to_string(p)).c_str() : "");
        profiles[p][name] = builder::InputShapeRange{mins[p][name], opts[p][name], maxs[p][name]};
      }
  return profiles;
}

}  // namespace

void add_build_command(CLI::App& app) {
  struct Options {
    std::string model, onnx, output, save_engine, board = "native", plugin_path;
    std::vector<std::string> min_shapes, opt_shapes, max_shapes;
    std::string sign_key;
    bool verbose = false, no_optimize = false, no_self_test = false, no_prepared_weights = false;
    bool fp16 = false, tf32 = false, no_gpu = false;
    PrecisionFlags precision;
    double fp16_tolerance = builder::BuildOptions{}.fp16_tolerance;
    double bf16_tolerance = builder::BuildOptions{}.bf16_tolerance;
    std::string camera, camera_order = "rgb", postprocess;
    std::vector<float> camera_mean, camera_std;
    std::string gpu_layout = "auto";
    std::string timing_cache, tactics = "tune";
    bool no_tune = false, ignore_timing_cache_errors = false;
    int32_t threads = 0;
    RemoteShell tune_on;  // --tune-on USER@BOARD: tactics timed there first (board_tuning.h)
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("build", "Build an engine from an ONNX model for a board profile");
  cmd->add_option("model", options->model, "ONNX model file");
  cmd->add_option("--onnx", options->onnx, "ONNX model file (trtexec spelling)");
  cmd->add_option("-o,--output", options->output, "Engine file to write");
  cmd->add_option("--saveEngine", options->save_engine, "Engine file to write (trtexec spelling)");
  cmd->add_option("--board", options->board,
                  "Board profile name or YAML path; native: the profile this machine matches (edgert boards)")
      ->capture_default_str();
  cmd->add_option("--tune-on", options->tune_on.host,
                  "USER@BOARD: time the tactics on the board over ssh first (edgert tune), then build with its "
                  "records (into --timing-cache, else a temporary cache)");
  cmd->add_option("--tune-port", options->tune_on.port, "ssh port of --tune-on");
  cmd->add_option("--tune-identity", options->tune_on.identity, "ssh identity file for --tune-on");
  cmd->add_option("--tune-ssh-option", options->tune_on.options, "Extra ssh -o option for --tune-on (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--plugin-path", options->plugin_path, "Colon-separated plugin directories");
  cmd->add_flag("-v,--verbose", options->verbose, "Log each build step, pass and the memory plan");
  cmd->add_flag("--no-optimize", options->no_optimize, "Skip the graph passes (folding, fusion): nodes as imported");
  cmd->add_option("--sign", options->sign_key, "Sign the engine with this ed25519 secret key (from edgert keygen)");
  cmd->add_flag("--no-self-test", options->no_self_test, "Do not store a self-test vector in the engine");
  cmd->add_flag("--no-prepared-weights", options->no_prepared_weights,
                "Do not store weights in the layout their kernels read: a smaller file, but every load packs "
                "them into private memory");
  cmd->add_flag("--fp16", options->fp16,
                "Run GPU layers in float16 on tensor cores where it keeps accuracy (softmax, normalizations and "
                "large reductions stay float32; inputs and outputs stay float32); on the CPU of an Armv8.2 board, "
                "let float32 convolutions multiply in float16 where timing finds it faster");
  cmd->add_flag("--bf16", options->precision.bf16,
                "Let float32 convolutions on the CPU multiply in bfloat16 (AVX512_BF16; float32 sums, float32 "
                "tensors between layers) where the board's precisions list bf16 and timing finds it faster");
  cmd->add_option("--fp16-tolerance", options->fp16_tolerance,
                  "With --fp16: the largest relative L2 distance from the float32 engine's outputs (seeded "
                  "random inputs, on this machine); past it the leading float16 layers stay float32 until "
                  "within. 0: no check")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--bf16-tolerance", options->bf16_tolerance,
                  "With --bf16: the same check for the CPU convolutions allowed bfloat16. 0: no check")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_flag("--int8", options->precision.int8,
                "Run convolutions, residual adds and pools in int8 (uint8 activations, per-channel int8 weights) "
                "where the board's precisions allow it, with activation ranges from --calib or --calib-cache");
  cmd->add_flag("--best", options->precision.best,
                "Every precision the board allows: --fp16, --bf16, and --int8 when calibration is given");
  cmd->add_option("--calib", options->precision.calib,
                  "Directory of calibration inputs for --int8, one sample per entry in name order: a NumPy .npy "
                  "file (the model's only input), or a directory with NAME.npy for each input");
  cmd->add_option("--calib-cache", options->precision.calib_cache,
                  "Calibration cache: read when it exists (refused when made for another model, calibrator or "
                  "edgert version), written after calibrating with --calib");
  cmd->add_option("--calibrator", options->precision.calibrator,
                  "entropy (KL divergence, as TensorRT's EntropyCalibrator2), minmax, or percentile[:P] (default "
                  "99.99)")
      ->capture_default_str();
  cmd->add_option("--layer-precisions,--layerPrecisions", options->precision.layer_precisions,
                  "NAME:fp32 keeps a layer in float32, NAME:int8 asks for int8 (comma-separated or repeated; "
                  "names as inspect lists them)")
      ->delimiter(',');
  cmd->add_option("--precision-constraints,--precisionConstraints", options->precision.precision_constraints,
                  "obey: a layer --layer-precisions names that cannot run in that precision is an error; prefer: "
                  "a warning")
      ->check(CLI::IsMember({"obey", "prefer"}))
      ->capture_default_str();
  cmd->add_option("--accuracy-guard", options->precision.accuracy_guard,
                  "METRIC:TOLERANCE for --int8: top1 (points of top-1 accuracy lost, labels in the validation "
                  "directory's labels.npy), top1-agreement (points of disagreement with float32), rel-l2 "
                  "(relative L2 of every output) or box-agreement (points of float32's detections a detector "
                  "loses: boxes [..., K, 4] with scores and labels outputs); out of tolerance, the most sensitive layers fall back to "
                  "float32 until it holds");
  cmd->add_option("--validation", options->precision.validation,
                  "Directory of validation inputs for --accuracy-guard (.npy as --calib, labels.npy for top1)");
  cmd->add_flag("--tf32", options->tf32, "Let float32 GPU convolutions and GEMMs use TF32 tensor cores");
  cmd->add_option("--gpu-layout", options->gpu_layout,
                  "Layout of GPU convolutions' tensors: nhwc (channels-last, what tensor cores read), nchw (as "
                  "ONNX), auto (nhwc where layers run in float16 or TF32, else nchw)")
      ->check(CLI::IsMember({"auto", "nhwc", "nchw"}))
      ->capture_default_str();
  cmd->add_option("--camera", options->camera,
                  "FORMAT:WIDTHxHEIGHT (yuyv, nv12, rgb24): a camera engine, whose input is the raw frame; its first "
                  "node converts, resizes and normalizes it into the model's image input (on the GPU where the "
                  "board has one)");
  cmd->add_option("--camera-order", options->camera_order, "Channel order the model reads: rgb or bgr")
      ->check(CLI::IsMember({"rgb", "bgr"}))
      ->capture_default_str();
  cmd->add_option("--camera-mean", options->camera_mean, "Mean of each channel after scaling pixels to [0, 1] "
                  "(3 values, comma-separated); default 0")
      ->delimiter(',')
      ->expected(3);
  cmd->add_option("--camera-std", options->camera_std, "Standard deviation of each channel after scaling to [0, 1] "
                  "(3 values); default 1")
      ->delimiter(',')
      ->expected(3);
  cmd->add_option("--postprocess", options->postprocess,
                  "classification[:K] (softmax and top K, default 5) or segmentation (per-pixel class map): "
                  "postprocessing inside the engine, on the GPU where the board has one, so only the result "
                  "crosses back (edgertd's postprocess of the same type reads it)");
  cmd->add_flag("--no-gpu", options->no_gpu, "Keep every node on the CPU even when the board has a GPU");
  cmd->add_option("--min-shapes,--minShapes", options->min_shapes,
                  "Optimization profile minimum: NAME:1x3x160x160,... (repeat the flag or join with commas; "
                  "naming an input again starts the next profile)")
      ->take_all();
  cmd->add_option("--opt-shapes,--optShapes", options->opt_shapes,
                  "Optimization profile optimum, where tactics are timed: NAME:1x3x224x224,...")
      ->take_all();
  cmd->add_option("--max-shapes,--maxShapes", options->max_shapes,
                  "Optimization profile maximum, what the memory plan holds: NAME:1x3x640x640,...")
      ->take_all();
  cmd->add_option("--timing-cache,--timingCacheFile", options->timing_cache,
                  "SQLite timing cache to read and update (created if missing); without it timings last one build");
  cmd->add_flag("--ignore-timing-cache-errors", options->ignore_timing_cache_errors,
                "Build without the timing cache (a warning) when it is corrupt or not a timing cache");
  cmd->add_option("--tactics", options->tactics, "tune: time every kernel's tactics (or take the cache's); "
                  "first: each kernel's first-listed tactic, untimed")
      ->check(CLI::IsMember({"tune", "first"}))
      ->capture_default_str();
  cmd->add_flag("--no-tune", options->no_tune, "Same as --tactics first");
  cmd->add_option("--threads", options->threads, "Kernel threads while timing tactics (0: the plugin's default); "
                  "part of the timing cache key")
      ->check(CLI::Range(0, 1024));
  cmd->callback([options] {
    const std::string& model = options->model.empty() ? options->onnx : options->model;
    const std::string& output = options->output.empty() ? options->save_engine : options->output;
    if (model.empty()) throw CLI::RequiredError("MODEL (or --onnx=)");
    if (output.empty()) throw CLI::RequiredError("-o OUT.engine (or --saveEngine=)");
    // The engine replaces `output` by rename: were that the model (the same path, a link to it,
    // a hard link), the model would be gone once the build succeeded.
    struct stat model_stat {}, output_stat {};
    if (::stat(model.c_str(), &model_stat) == 0 && ::stat(output.c_str(), &output_stat) == 0 &&
        model_stat.st_dev == output_stat.st_dev && model_stat.st_ino == output_stat.st_ino)
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                          "-o '%s' is the model '%s' itself; the engine would replace it (write the engine to "
                          "another file, e.g. -o %s.engine)",
                          output.c_str(), model.c_str(), model.c_str());
    warn_if_threads_exceed_cpus(options->threads);
    builder::BuildOptions build;
    build.model_path = model;
    config::ResolvedBoard board = config::resolve_board(options->board);
    build.board = board.profile;
    if (!options->plugin_path.empty()) build.plugin_path = options->plugin_path.c_str();
    build.optimize = !options->no_optimize;
    build.profiles = parse_profiles(options->min_shapes, options->opt_shapes, options->max_shapes);
    build.self_test = !options->no_self_test;
    build.prepared_weights = !options->no_prepared_weights;
    build.fp16 = options->fp16;
    build.fp16_tolerance = options->fp16_tolerance;
    build.bf16_tolerance = options->bf16_tolerance;
    apply_precision_flags(options->precision, build);
    if (!options->camera.empty()) {
      build.camera = builder::parse_camera_input(options->camera);
      build.camera->channel_order = options->camera_order;
      if (!options->camera_mean.empty()) build.camera->mean = options->camera_mean;
      if (!options->camera_std.empty()) build.camera->std = options->camera_std;
      for (float s : build.camera->std)
        if (!(s > 0)) builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera-std: values must be positive, got %g", s);
    } else if (!options->camera_mean.empty() || !options->camera_std.empty() || options->camera_order != "rgb") {
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--camera-order, --camera-mean and --camera-std need --camera");
    }
    if (!options->postprocess.empty()) build.postprocess = builder::parse_output_postprocess(options->postprocess);
    build.tf32 = options->tf32;
    build.gpu_layout = options->gpu_layout == "nhwc"   ? builder::GpuLayout::kChannelsLast
                       : options->gpu_layout == "nchw" ? builder::GpuLayout::kChannelsFirst
                                                        : builder::GpuLayout::kAuto;
    build.use_device = !options->no_gpu;
    build.tactics = options->no_tune || options->tactics == "first" ? builder::TacticPolicy::kFirst
                                                                    : builder::TacticPolicy::kTune;
    build.timing_cache_path = options->timing_cache;
    build.ignore_timing_cache_errors = options->ignore_timing_cache_errors;
    build.threads = options->threads;
    signing::KeyPair key;
    builder::SignerRef signer;
    if (!options->sign_key.empty()) {
      key = signing::read_secret_key(options->sign_key);
      signer = builder::SignerRef{key.name, key.public_key};
      build.signer = &signer;
    }
    if (options->verbose) {
      auto start = std::chrono::steady_clock::now();
      build.log = [start](const std::string& line) {
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "[build %7.3fs] %s\n", s, line.c_str());
      };
    }
    if (build.log && board.native)
      build.log("board native: " + board.profile.name + " (" + board.reason + "); " +
                std::to_string(board.profile.cpu_cores) + " kernel threads");
    TemporaryFile temporary_cache;
    if (!options->tune_on.host.empty()) {
      if (board.native)
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                            "--tune-on %s needs --board naming the board's profile (native is this machine; edgert "
                            "boards on the board says which profile it matches)",
                            options->tune_on.host.c_str());
      if (build.timing_cache_path.empty()) build.timing_cache_path = temporary_cache.make("/tmp/edgert-tune-on-XXXXXX");
      BoardTuning tuning;
      tuning.board = options->tune_on;
      tuning.model = model;
      tuning.profile = build.board;
      tuning.timing_cache = build.timing_cache_path;
      tuning.threads = build.threads;
      tuning.plugin_path = options->plugin_path;
      tune_on_board(tuning);
    }
    builder::BuildResult result = builder::build_engine(build);
    for (const std::string& warning : result.warnings) std::fprintf(stderr, "edgert: warning: %s\n", warning.c_str());
    if (build.signer) signing::sign_engine(result.engine, key);
    builder::write_file_atomically(output, result.engine);
    std::printf("built %s for board %s%s: %zu nodes, %zu bytes -> %s\n", model.c_str(), build.board.name.c_str(),
                board.native ? " (native)" : "", result.model.graphs[0].nodes.size(), result.engine.size(),
                output.c_str());
    if (build.signer) std::printf("signed by '%s' (ed25519)\n", key.name.c_str());
    if ((result.fp16_nodes > 0 || result.cpu_reduced_nodes > 0 || result.fp16_kept_float32 > 0) &&
        !std::isnan(result.fp16_rel_l2)) {
      // GPU layers in float16, else CPU convolutions allowed bfloat16 or float16 (timing picks).
      const bool gpu = result.fp16_nodes > 0;
      const char* flag = build.fp16 ? "fp16" : "bf16";
      const std::string layers = gpu ? std::to_string(result.fp16_nodes) + " layer(s) in float16"
                                     : std::to_string(result.cpu_reduced_nodes) + " CPU convolution(s) allowed " +
                                           (build.fp16 ? "float16" : "bfloat16");
      if (result.fp16_kept_float32 > 0)
        std::printf("%s: %s, the first %d that take it kept float32 for accuracy: relative L2 %.2e against "
                    "float32 (%.2e with none kept; tolerance %.2e)\n",
                    flag, layers.c_str(), result.fp16_kept_float32, result.fp16_rel_l2, result.fp16_rel_l2_all_half,
                    result.fp16_tolerance);
      else
        std::printf("%s: %s: relative L2 %.2e against float32 (tolerance %.2e)\n", flag, layers.c_str(),
                    result.fp16_rel_l2, result.fp16_tolerance);
    }
    if (build.int8 && result.int8.not_applied.empty()) print_int8_summary(result);
    if (result.accuracy_guard) print_accuracy_guard(*result.accuracy_guard);
    const builder::TunerStats& t = result.tuning;
    if (t.nodes > 0 && build.tactics == builder::TacticPolicy::kTune)
      std::printf("tactics: %d node(s) with several; timing cache: %d hits, %d misses; %d timed (%.2f s)%s\n", t.nodes,
                  t.hits, t.misses, t.timed, t.timing_seconds,
                  result.timed_here ? "" : ("; not timed here: " + result.not_timed_why).c_str());
  });
}

}  // namespace edgert::cli
