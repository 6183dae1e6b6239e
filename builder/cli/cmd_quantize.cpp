// edgert quantize MODEL.onnx --calib DIR --export-qdq OUT.onnx: the model calibrated as
// `edgert build --int8` calibrates it, written as a Q/DQ ONNX model (ONNX Runtime's QDQ format)
// so that other runtimes run the same quantization, and edgert builds it back into the same
// int8 layers without calibration inputs.
#include <cstdio>

#include "board_catalog.h"
#include "build_error.h"
#include "build_precisions.h"
#include "commands.h"
#include "engine_builder.h"
#include "onnx_export.h"

namespace edgert::cli {

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string model, output, board = "native", plugin_path, calib, calib_cache, calibrator = "entropy";
    std::vector<std::string> layer_precisions;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("quantize", "Calibrate a float32 ONNX model for int8 and write it as a Q/DQ "
                                     "ONNX model");
  cmd->add_option("model", options->model, "ONNX model file")->required();
  cmd->add_option("--export-qdq,-o", options->output, "Q/DQ ONNX model to write")->required();
  cmd->add_option("--board", options->board, "Board profile (its precisions must list int8)")->capture_default_str();
  cmd->add_option("--plugin-path", options->plugin_path, "Colon-separated plugin directories");
  cmd->add_option("--calib", options->calib, "Directory of calibration inputs (.npy, as edgert build --calib)");
  cmd->add_option("--calib-cache", options->calib_cache, "Calibration cache to read or write (as edgert build)");
  cmd->add_option("--calibrator", options->calibrator, "entropy, minmax or percentile[:P]")->capture_default_str();
  cmd->add_option("--layer-precisions", options->layer_precisions, "NAME:fp32 keeps a layer unquantized")
      ->delimiter(',');
  cmd->callback([options] {
    builder::BuildOptions build;
    build.model_path = options->model;
    build.board = config::resolve_board(options->board).profile;
    if (!options->plugin_path.empty()) build.plugin_path = options->plugin_path.c_str();
    PrecisionFlags flags;
    flags.int8 = true;
    flags.calib = options->calib;
    flags.calib_cache = options->calib_cache;
    flags.calibrator = options->calibrator;
    flags.layer_precisions = options->layer_precisions;
    for (const std::string& warning : apply_precision_flags(flags, build))
      std::fprintf(stderr, "edgert: warning: %s\n", warning.c_str());
    if (!build.int8_layers.empty())
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "quantize: --layer-precisions takes NAME:fp32 only");
    if (g_verbose)
      build.log = [](const std::string& line) { std::fprintf(stderr, "[quantize] %s\n", line.c_str()); };
    builder::Int8RewriteReport report;
    builder::CalibrationSummary calibration;
    builder::Model model = builder::quantized_qdq_model(build, &report, &calibration);
    if (model.opsets[""] < 13)
      builder::build_fail(EDGERT_ERR_UNSUPPORTED, "quantize: %s uses opset %lld; per-channel DequantizeLinear needs "
                          "opset 13 or later (re-export the model at opset 13+)",
                          options->model.c_str(), static_cast<long long>(model.opsets[""]));
    builder::write_onnx_model(model, options->output);
    std::printf("quantized %s -> %s: %zu activation(s) with Q/DQ pairs, %d convolution(s) with int8 weights; ranges "
                "%s %s from %lld sample(s)\n",
                options->model.c_str(), options->output.c_str(), report.uint8_tensors.size(), report.convolutions,
                calibration.from_cache ? "read from" : "calibrated with",
                calibration.from_cache ? calibration.cache_path.c_str() : calibration.calibrator.c_str(),
                static_cast<long long>(calibration.samples));
    for (const std::string& kept : report.kept_float) std::printf("kept float32: %s\n", kept.c_str());
  });
}

}  // namespace edgert::cli
