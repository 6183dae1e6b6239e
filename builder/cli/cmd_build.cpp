// edgert build MODEL.onnx --board PROFILE -o OUT.engine (TensorRT spellings --onnx= --saveEngine=)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "board_catalog.h"
#include "board_tuning.h"
#include "build_precisions.h"
#include "build_error.h"
#include "commands.h"
#include "edgert/builder.hpp"
#include "engine_builder.h"
#include "engine_inputs.h"

namespace edgert::cli {
namespace {

std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string join(const std::vector<float>& values) {
  std::string text;
  for (float v : values) text += (text.empty() ? "" : ",") + number_text(v);
  return text;
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
    // The build itself runs in libedgert-builder, as every program's does: the flags become its
    // options by the same names (edgert/builder.h).
    edgert::Builder builder(model);
    const auto set_text = [&](const char* name, const std::string& value) {
      if (!value.empty()) builder.set(name, value);
    };
    const auto set_switch = [&](const char* name, bool on) {
      if (on) builder.set(name, true);
    };
    builder.set("board", options->board);
    set_text("plugin-path", options->plugin_path);
    set_switch("no-optimize", options->no_optimize);
    set_switch("no-self-test", options->no_self_test);
    set_switch("no-prepared-weights", options->no_prepared_weights);
    set_switch("fp16", options->fp16);
    set_switch("bf16", options->precision.bf16);
    set_switch("int8", options->precision.int8);
    set_switch("best", options->precision.best);
    builder.set("fp16-tolerance", number_text(options->fp16_tolerance));
    builder.set("bf16-tolerance", number_text(options->bf16_tolerance));
    set_text("calib", options->precision.calib);
    set_text("calib-cache", options->precision.calib_cache);
    builder.set("calibrator", options->precision.calibrator);
    for (const std::string& item : options->precision.layer_precisions) builder.set("layer-precisions", item);
    builder.set("precision-constraints", options->precision.precision_constraints);
    set_text("accuracy-guard", options->precision.accuracy_guard);
    set_text("validation", options->precision.validation);
    set_switch("tf32", options->tf32);
    builder.set("gpu-layout", options->gpu_layout);
    set_text("camera", options->camera);
    if (options->camera_order != "rgb") builder.set("camera-order", options->camera_order);
    set_text("camera-mean", join(options->camera_mean));
    set_text("camera-std", join(options->camera_std));
    set_text("postprocess", options->postprocess);
    set_switch("no-gpu", options->no_gpu);
    for (const std::string& spec : options->min_shapes) builder.set("min-shapes", spec);
    for (const std::string& spec : options->opt_shapes) builder.set("opt-shapes", spec);
    for (const std::string& spec : options->max_shapes) builder.set("max-shapes", spec);
    set_switch("ignore-timing-cache-errors", options->ignore_timing_cache_errors);
    builder.set("tactics", options->no_tune ? "first" : options->tactics);
    builder.set("threads", std::to_string(options->threads));
    set_text("sign", options->sign_key);
    if (options->verbose) {
      auto start = std::chrono::steady_clock::now();
      builder.log_to([start](const std::string& line) {
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "[build %7.3fs] %s\n", s, line.c_str());
      });
    }
    std::string timing_cache = options->timing_cache;
    TemporaryFile temporary_cache;
    if (!options->tune_on.host.empty()) {
      config::ResolvedBoard board = config::resolve_board(options->board);
      if (board.native)
        builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                            "--tune-on %s needs --board naming the board's profile (native is this machine; edgert "
                            "boards on the board says which profile it matches)",
                            options->tune_on.host.c_str());
      if (timing_cache.empty()) timing_cache = temporary_cache.make("/tmp/edgert-tune-on-XXXXXX");
      BoardTuning tuning;
      tuning.board = options->tune_on;
      tuning.model = model;
      tuning.profile = board.profile;
      tuning.timing_cache = timing_cache;
      tuning.threads = options->threads;
      tuning.plugin_path = options->plugin_path;
      tune_on_board(tuning);
    }
    set_text("timing-cache", timing_cache);
    edgert::BuiltEngine built = builder.build();
    const nlohmann::json report = nlohmann::json::parse(built.report());
    for (const auto& warning : report["warnings"])
      std::fprintf(stderr, "edgert: warning: %s\n", warning.get<std::string>().c_str());
    built.save(output);
    std::printf("built %s for board %s%s: %llu nodes, %llu bytes -> %s\n", model.c_str(),
                report["board"].get<std::string>().c_str(), report["native_board"].get<bool>() ? " (native)" : "",
                report["nodes"].get<unsigned long long>(), report["bytes"].get<unsigned long long>(), output.c_str());
    for (const auto& line : report["summary"]) std::printf("%s\n", line.get<std::string>().c_str());
  });
}

}  // namespace edgert::cli
