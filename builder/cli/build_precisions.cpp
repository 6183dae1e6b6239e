#include "build_precisions.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "build_error.h"
#include "edgert/dtype_info.h"
#include "tensor_io.h"

namespace edgert::cli {

using builder::build_fail;

namespace {

std::string format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  char line[1024];
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  return line;
}

}  // namespace

std::vector<std::string> apply_precision_flags(const PrecisionFlags& flags, builder::BuildOptions& build) {
  std::vector<std::string> warnings;
  auto board_allows = [&](const char* p) {
    return std::find(build.board.precisions.begin(), build.board.precisions.end(), p) != build.board.precisions.end();
  };
  const bool calibrated = !flags.calib.empty() || !flags.calib_cache.empty() || flags.calib_samples;
  build.int8 = flags.int8;
  build.bf16 = flags.bf16;
  if (flags.best) {
    if (board_allows("fp16")) build.fp16 = true;
    if (board_allows("bf16")) build.bf16 = true;
    if (board_allows("int8")) {
      if (calibrated)
        build.int8 = true;
      else
        warnings.push_back(format("--best: int8 left off: board %s allows it, but no --calib DIR or --calib-cache FILE "
                                  "was given to calibrate it", build.board.name.c_str()));
    }
  }
  if (!build.int8 && calibrated)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--calib and --calib-cache calibrate int8: add --int8 (or --best)");
  if (build.int8 && !calibrated)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "--int8 needs activation ranges: --calib DIR (inputs to calibrate on) or --calib-cache FILE");
  build.calibration.calibrator = flags.calibrator;
  build.calibration.cache_path = flags.calib_cache;
  if (!flags.calib.empty() && flags.calib_samples)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--calib DIR and a calibration source were both given; pick one");
  if (flags.calib_samples)
    build.calibration.next_batch = flags.calib_samples;
  else if (!flags.calib.empty())
    build.calibration.next_batch = npy_directory_batches(flags.calib);
  build.precision_constraints_obey = flags.precision_constraints == "obey";
  if (!flags.accuracy_guard.empty() || !flags.validation.empty()) {
    if (flags.accuracy_guard.empty() || flags.validation.empty())
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard and --validation go together");
    if (!build.int8) build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard guards --int8: add it (or --best)");
    builder::AccuracyGuardOptions guard = builder::parse_accuracy_guard(flags.accuracy_guard);
    auto next = npy_directory_batches(flags.validation, "labels.npy");
    while (std::optional<builder::CalibrationBatch> batch = next()) guard.validation.push_back(std::move(*batch));
    const std::string labels = flags.validation + "/labels.npy";
    if (guard.metric == builder::GuardMetric::kTop1) {
      HostTensor tensor = read_tensor_npy(labels);
      if (tensor.dtype != EDGERT_DTYPE_INT64 && tensor.dtype != EDGERT_DTYPE_INT32)
        build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s holds %s; labels are int64 or int32 class indices", labels.c_str(),
                   edgert_dtype_name(tensor.dtype));
      for (int64_t i = 0; i < tensor.numel(); ++i)
        guard.labels.push_back(tensor.dtype == EDGERT_DTYPE_INT64
                                   ? reinterpret_cast<const int64_t*>(tensor.data.data())[i]
                                   : reinterpret_cast<const int32_t*>(tensor.data.data())[i]);
    }
    build.accuracy_guard = std::move(guard);
  }
  for (const std::string& item : flags.layer_precisions) {
    const size_t colon = item.rfind(':');
    const std::string name = colon == std::string::npos ? std::string() : item.substr(0, colon);
    const std::string precision = colon == std::string::npos ? std::string() : item.substr(colon + 1);
    if (name.empty() || (precision != "fp32" && precision != "int8"))
      build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--layer-precisions: '%s' must be NAME:fp32 or NAME:int8", item.c_str());
    (precision == "fp32" ? build.float32_layers : build.int8_layers).insert(name);
  }
  return warnings;
}

std::vector<std::string> int8_summary_lines(const builder::BuildResult& result) {
  const builder::Int8RewriteReport& r = result.int8;
  const builder::CalibrationSummary& c = result.calibration;
  std::vector<std::string> lines;
  lines.push_back(format("int8: %d convolution(s), %d add(s), %d mul(s), %d pool(s), %d activation table(s), %d byte move(s) in "
              "int8 (%d activation(s) absorbed); "
              "%d quantize and %d dequantize node(s) at float boundaries; ranges %s %s, %lld sample(s)%s%s",
              r.convolutions, r.adds, r.muls, r.pools, r.lookups, r.moves, r.absorbed_activations, r.quantize, r.dequantize,
              c.from_cache ? "read from" : "calibrated", c.from_cache ? c.cache_path.c_str() : c.calibrator.c_str(),
              static_cast<long long>(c.samples), !c.from_cache && !c.cache_path.empty() ? ", saved to " : "",
              !c.from_cache ? c.cache_path.c_str() : ""));
  for (const std::string& kept : r.kept_float) lines.push_back("int8: kept float32: " + kept);
  return lines;
}

std::vector<std::string> accuracy_guard_lines(const builder::AccuracyGuardReport& r) {
  const bool points = r.metric != builder::GuardMetric::kRelativeL2;
  std::vector<std::string> lines;
  lines.push_back(format("accuracy guard %s:%g: float32 %.4g%s, all int8 %.4g%s, built %.4g%s (%s, %d engine(s) measured)\n",
              builder::guard_metric_name(r.metric).c_str(), r.tolerance, r.float32_value, points ? "%" : "",
              r.all_int8_value, points ? "%" : "", r.final_value, points ? "%" : "",
              r.within ? "within tolerance" : "OUT OF TOLERANCE", r.builds));
  for (const builder::AccuracyGuardReport::FallBack& f : r.fallen_back) {
    const std::string fused =
        f.float32_node_layers > 1 ? " (a node of " + std::to_string(f.float32_node_layers) + " fused layers)" : "";
    lines.push_back(format("accuracy guard: kept float32: %s (adds relative L2 %.3g in int8; %.3f ms in float32%s, "
                           "%.3f ms in int8)", f.layer.c_str(), f.added_error, f.float32_ms, fused.c_str(), f.int8_ms));
  }
  return lines;
}

namespace {

builder::CalibrationTensor calibration_tensor(const std::string& path, const std::string& name) {
  HostTensor tensor = read_tensor_npy(path);
  builder::CalibrationTensor input;
  input.name = name;
  input.shape = tensor.shape;
  input.dtype = tensor.dtype;
  input.source = path;
  if (tensor.dtype == EDGERT_DTYPE_FLOAT32) {
    input.data.resize(tensor.data.size() / sizeof(float));
    std::copy(tensor.data.begin(), tensor.data.end(), reinterpret_cast<uint8_t*>(input.data.data()));
  } else {
    input.bytes = std::move(tensor.data);
  }
  return input;
}

// The entries of `dir` in name order that are regular .npy files (not `skip`) or, with
// `directories`, directories; links are not followed.
std::vector<std::string> entries(const std::string& dir, const std::string& skip, bool directories) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<std::string> found;
  fs::directory_iterator it(dir, error);
  if (error) build_fail(EDGERT_ERR_IO, "%s: %s", dir.c_str(), error.message().c_str());
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) build_fail(EDGERT_ERR_IO, "%s: %s", dir.c_str(), error.message().c_str());
    const fs::path& path = it->path();
    if (it->is_symlink(error)) continue;
    if ((path.extension() == ".npy" && path.filename() != skip && it->is_regular_file(error)) ||
        (directories && it->is_directory(error)))
      found.push_back(path.string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::function<std::optional<builder::CalibrationBatch>()> npy_directory_batches(const std::string& dir,
                                                                               const std::string& skip) {
  auto samples = std::make_shared<std::vector<std::string>>(entries(dir, skip, true));
  if (samples->empty())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: no .npy file or sample directory in it", dir.c_str());
  auto next = std::make_shared<size_t>(0);
  return [samples, next]() -> std::optional<builder::CalibrationBatch> {
    if (*next >= samples->size()) return std::nullopt;
    const std::string& path = (*samples)[(*next)++];
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
      return builder::CalibrationBatch{calibration_tensor(path, "")};
    // A directory: one sample of a model with several inputs, NAME.npy for each.
    builder::CalibrationBatch batch;
    for (const std::string& file : entries(path, "", false)) {
      const std::string base = file.substr(file.rfind('/') + 1);
      batch.push_back(calibration_tensor(file, base.substr(0, base.size() - 4)));
    }
    if (batch.empty()) build_fail(EDGERT_ERR_INVALID_ARGUMENT, "%s: no NAME.npy input in this sample directory", path.c_str());
    return batch;
  };
}

}  // namespace edgert::cli
