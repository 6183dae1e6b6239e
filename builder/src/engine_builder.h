// The whole build: ONNX import -> kernel selection and shape inference -> engine bytes.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "accuracy_guard_options.h"
#include "board_profile.h"
#include "camera_input.h"
#include "output_postprocess.h"
#include "engine_writer.h"
#include "int8_calibration.h"
#include "int8_rewrite.h"
#include "ir.h"
#include "memory_planner.h"
#include "passes/pass_manager.h"
#include "prepared_weights.h"
#include "shape_profiles.h"
#include "tactic_tuner.h"

namespace edgert::builder {

// kAuto: channels-last where device layers use tensor cores (float16, TF32), whose cuDNN and
// cuBLASLt kernels read NHWC; channels-first (ONNX's NCHW, no reformats) otherwise.
enum class GpuLayout { kAuto, kChannelsFirst, kChannelsLast };

struct BuildOptions {
  std::string model_path;
  config::BoardProfile board;
  const char* plugin_path = nullptr;  // as edgert_load_options.plugin_path
  std::function<void(const std::string&)> log;  // -v output; may be empty
  // Optimization profiles (--min/opt/max-shapes), each naming every dynamic input. Tactics are
  // tuned at each profile's opt shapes and a memory plan made at its max (shape_profiles.h).
  // Empty: dynamic inputs stay dynamic (no tuning or plan for what depends on them).
  std::vector<ShapeProfile> profiles;
  bool optimize = true;  // run the graph passes (PassManager::standard); false: as imported
  // A camera engine (--camera): the raw frame in, converted by the engine's first node.
  std::optional<CameraInput> camera;
  // Postprocessing inside the engine (--postprocess): the output reduced to the result.
  std::optional<OutputPostprocess> postprocess;
  bool self_test = true;  // store a self-test vector (see self_test.h) when the model allows
  uint64_t self_test_seed = 2026;
  // Store weights in the layout each tactic reads (prepared_weights.h): loads map them instead
  // of packing into private memory, at the price of a larger file (--no-prepared-weights).
  bool prepared_weights = true;
  const SignerRef* signer = nullptr;  // leave room for this key's signature (signing::sign_engine)
  TacticPolicy tactics = TacticPolicy::kTune;
  // Devices: a board with a GPU gets its nodes on the GPU plugin where it has kernels, unless
  // use_device is false (--no-gpu); fp16 (--fp16) runs device nodes in float16 where the
  // board's precisions allow it; tf32 (--tf32) lets float32 convolutions and GEMMs use TF32.
  // gpu_layout: the layout of device convolutions' tensors (--gpu-layout).
  bool use_device = true;
  bool fp16 = false;
  // FP16's accuracy check (fp16_accuracy.h): outputs within this relative L2 of the float32
  // engine's on seeded inputs, else the leading float16 layers stay float32 until they are;
  // 0: no check. fp16_float32_prefix: how many leading float16 layers stay float32 (the check
  // sets it; 0 otherwise).
  double fp16_tolerance = 3e-3;
  // The same check for --bf16 (its layers on the CPU), bfloat16 keeping 3 fewer bits than
  // float16: 8x the rounding, so a wider default.
  double bf16_tolerance = 2e-2;
  int32_t fp16_float32_prefix = 0;
  bool tf32 = false;
  // bf16 (--bf16): float32 convolutions on the CPU may multiply in bfloat16 where the board's
  // precisions list bf16 (cpu_reduced_precision.h); fp16 does the same in float16 on CPUs with
  // half-precision arithmetic.
  bool bf16 = false;
  // The accuracy check's tolerance for this build: float16's when --fp16 is on (the stricter).
  double reduced_tolerance() const { return fp16 ? fp16_tolerance : bf16_tolerance; }
  // INT8 (--int8): convolutions, residual adds and pools run on uint8 activations and int8
  // weights where the board's precisions list int8 (int8_rewrite.h), quantized with activation
  // ranges calibrated on the float32 model or read from a calibration cache (int8_calibration.h).
  bool int8 = false;
  Int8Calibration calibration;
  // --layer-precisions: nodes (by name, as inspect lists them) kept in float32, and nodes that
  // must run in int8. precision_constraints_obey: a node that cannot take its named precision is
  // an error (--precision-constraints obey), else a warning (prefer).
  std::set<std::string> float32_layers;
  // Of float32_layers: those the accuracy guard moved back (inspect's notes say so).
  std::set<std::string> fell_back_layers;
  std::set<std::string> int8_layers;
  bool precision_constraints_obey = false;
  // --accuracy-guard with --validation: after the int8 rewrite, the metric on the validation
  // set against the float32 engine; out of tolerance, the most sensitive layers fall back to
  // float32 until it holds (accuracy_guard.h).
  std::optional<AccuracyGuardOptions> accuracy_guard;
  // The guard's own builds: every activation an engine output (float32), every uint8 tensor's
  // float value too (int8).
  bool expose_activations = false;
  GpuLayout gpu_layout = GpuLayout::kAuto;
  // SQLite timing cache to read and update (see timing_cache.h); empty: timings last one build.
  std::string timing_cache_path;
  // A timing cache that cannot be used (corrupt, another program's file) is a warning and the
  // build goes on without it; otherwise it is an error.
  bool ignore_timing_cache_errors = false;
  // Kernel threads while timing, part of the cache key; 0: the board's cores (profile cpu.cores).
  int32_t threads = 0;
  // TunerOptions::together_bytes when set (tests use 0: every node timed one tactic at a time).
  std::optional<size_t> tuning_together_bytes;
};

struct BuildResult {
  Model model;                 // after selection: what the engine describes
  std::vector<uint8_t> engine; // the engine file's bytes
  std::vector<PassReport> passes;
  MemoryPlan memory_plan;                // profile 0's (the only one without profiles)
  std::vector<MemoryPlan> memory_plans;  // one per profile, at its max shapes
  bool has_self_test = false;
  std::string self_test_skipped;  // why no self-test vector was stored
  PreparedWeightsReport prepared_weights;
  TunerStats tuning;
  bool timed_here = false;  // false: the board is not this machine, tactics came from the cache
  std::string not_timed_why;  // when not timed here: why (another board, more threads than CPUs here)
  std::vector<std::string> warnings;  // for the caller to show; the build went on
  // FP16: device layers in float16, of which the leading fp16_kept_float32 were kept float32
  // by the accuracy check; its measured relative L2 against float32 (NaN: not measured), and
  // what every layer in float16 gave when the check had to keep some.
  int32_t fp16_nodes = 0;
  // --bf16 / --fp16 on the CPU: convolutions allowed the reduced precision (cpu_reduced_precision.h),
  // counting the leading fp16_kept_float32 the same check kept float32 (it bounds those too).
  int32_t cpu_reduced_nodes = 0;
  int32_t fp16_kept_float32 = 0;
  double fp16_tolerance = 0;
  double fp16_rel_l2 = std::numeric_limits<double>::quiet_NaN();
  double fp16_rel_l2_all_half = std::numeric_limits<double>::quiet_NaN();
  // INT8: what the rewrite made and kept float, and where the activation ranges came from.
  Int8RewriteReport int8;
  CalibrationSummary calibration;
  std::optional<AccuracyGuardReport> accuracy_guard;
};

// Throws BuildError (or config::ConfigError) with a message naming the file and node at fault.
BuildResult build_engine(const BuildOptions& options);

// The model the options' INT8 build would run, written back in explicit quantization: the
// graph after the passes that precede the int8 rewrite, with a QuantizeLinear ->
// DequantizeLinear pair on every activation the rewrite puts in uint8 and each int8 layer's
// weights and bias as int8 / int32 constants behind a DequantizeLinear (qdq_export.h).
// Calibrates as build_engine does (options.calibration).
Model quantized_qdq_model(const BuildOptions& options, Int8RewriteReport* report, CalibrationSummary* summary);

}  // namespace edgert::builder
