// One build's settings by name, as `edgert build`'s long flags (builder.h): what the CLI, the C
// API and the Python package hand over, turned into builder::BuildOptions here and nowhere else.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "build_precisions.h"
#include "engine_builder.h"

namespace edgert::api {

struct BuildOutcome {
  builder::BuildResult result;
  std::string board;         // the profile built for
  bool native_board = false;
  std::string signed_by;     // the key's name; empty: unsigned
  bool fp16 = false, int8 = false, tuned = false;  // what was asked: the summary's wording
  std::vector<std::string> warnings;  // the build's and the options' (e.g. --best leaving int8 off)
};

class BuildRequest {
 public:
  explicit BuildRequest(std::string model_path);

  // Throws BuildError (EDGERT_ERR_INVALID_ARGUMENT) naming the option for an unknown name or
  // a value it cannot take.
  void set_option(const std::string& name, const std::string& value);
  // Calibration samples from the caller; counts as calibration given, like --calib.
  void set_calibration(std::function<std::optional<builder::CalibrationBatch>()> next_batch);
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }

  // Resolves the board, checks the options together and builds. Throws BuildError or
  // config::ConfigError with a message naming the file, node or option at fault.
  BuildOutcome build() const;

  const std::string& model_path() const { return model_path_; }

 private:
  std::string model_path_;
  std::string board_ = "native", plugin_path_, sign_key_, timing_cache_;
  std::vector<std::string> min_shapes_, opt_shapes_, max_shapes_;
  bool optimize_ = true, self_test_ = true, prepared_weights_ = true, fp16_ = false, tf32_ = false, use_gpu_ = true;
  bool tune_ = true, ignore_timing_cache_errors_ = false;
  double fp16_tolerance_ = builder::BuildOptions{}.fp16_tolerance;
  double bf16_tolerance_ = builder::BuildOptions{}.bf16_tolerance;
  cli::PrecisionFlags precision_;
  std::string camera_, camera_order_ = "rgb", postprocess_, gpu_layout_ = "auto";
  std::vector<float> camera_mean_, camera_std_;
  int32_t threads_ = 0;
  std::function<void(const std::string&)> log_;
};

// The JSON report of edgert_built_engine_report (builder.h), with `summary`: the lines
// `edgert build` prints after the engine is written.
std::string build_report_json(const BuildOutcome& outcome, const std::string& model_path);

}  // namespace edgert::api
