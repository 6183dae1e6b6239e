#include "fp16_accuracy.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "self_test.h"

namespace edgert::builder {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

double relative_l2(const SelfTestTensor& reference, const SelfTestTensor& candidate) {
  if (reference.shape != candidate.shape || reference.data.size() != candidate.data.size()) return kInfinity;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < reference.data.size(); ++i) {
    const double c = candidate.data[i], r = reference.data[i];
    if (!std::isfinite(c)) return kInfinity;
    diff += (c - r) * (c - r);
    norm += r * r;
  }
  // An all-zero reference: exact agreement or none.
  if (norm == 0) return diff == 0 ? 0 : kInfinity;
  return std::sqrt(diff / norm);
}

std::string error_text(double e) {
  if (!std::isfinite(e)) return "unbounded (shapes differ or values not finite)";
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", e);
  return text;
}

}  // namespace

double largest_relative_error(const std::vector<SelfTestVector>& reference,
                              const std::vector<SelfTestVector>& candidate) {
  if (reference.size() != candidate.size()) return kInfinity;
  double largest = 0;
  for (size_t r = 0; r < reference.size(); ++r) {
    for (const SelfTestTensor& expected : reference[r].outputs) {
      const SelfTestTensor* got = nullptr;
      for (const SelfTestTensor& t : candidate[r].outputs)
        if (t.name == expected.name) got = &t;
      if (!got) return kInfinity;
      largest = std::max(largest, relative_l2(expected, *got));
    }
  }
  return largest;
}

std::vector<uint64_t> fp16_check_seeds() { return {11, 12, 13, 14}; }

BuildResult keep_fp16_accuracy(const BuildOptions& options, BuildResult first,
                               const std::function<BuildResult(const BuildOptions&)>& build) {
  const double tolerance = options.reduced_tolerance();
  first.fp16_tolerance = tolerance;
  // Layers the check may keep in float32, counted from the front: the GPU's float16 layers, and
  // the CPU's convolutions allowed bfloat16 or float16 (each list keeps its own first ones).
  const int32_t candidates = std::max(first.fp16_nodes, first.cpu_reduced_nodes);
  if ((!options.fp16 && !options.bf16) || tolerance <= 0 || candidates == 0) return first;
  const std::string flag = options.fp16 ? "--fp16" : "--bf16", check = flag.substr(2) + " check";
  const std::string type = options.fp16 ? "float16" : "bfloat16";
  auto unchecked = [&](const std::string& why) {
    first.warnings.push_back(flag + ": accuracy not checked against float32 (" + why +
                             "); every layer that takes the reduced precision runs in it");
    return std::move(first);
  };
  if (!first.timed_here) return unchecked(first.not_timed_why);

  // The float32 engine: the reference. No self-test or prepared weights: it only runs here.
  BuildOptions fp32 = options;
  fp32.fp16 = false;
  fp32.bf16 = false;
  fp32.self_test = false;
  fp32.prepared_weights = false;
  fp32.log = nullptr;
  std::string why_not;
  const std::vector<uint64_t> seeds = fp16_check_seeds();
  std::optional<std::vector<SelfTestVector>> reference =
      run_on_seeds(build(fp32).engine, options.plugin_path, seeds, &why_not);
  if (!reference) return unchecked("the float32 engine: " + why_not);
  auto error_of = [&](const BuildResult& candidate) {
    std::optional<std::vector<SelfTestVector>> runs = run_on_seeds(candidate.engine, options.plugin_path, seeds, &why_not);
    return runs ? largest_relative_error(*reference, *runs) : kInfinity;
  };
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };

  first.fp16_rel_l2 = error_of(first);
  log(check + ": relative L2 " + error_text(first.fp16_rel_l2) + " against float32 over " +
      std::to_string(seeds.size()) + " seeded inputs (tolerance " + error_text(tolerance) + ")");
  if (first.fp16_rel_l2 <= tolerance) return first;

  auto build_keeping = [&](int32_t kept) {
    BuildOptions trial = options;
    trial.fp16_float32_prefix = kept;
    trial.log = nullptr;
    BuildResult result = build(trial);
    result.fp16_rel_l2 = error_of(result);
    result.fp16_kept_float32 = kept;
    result.fp16_tolerance = tolerance;
    log(check + ": first " + std::to_string(kept) + " of " + std::to_string(candidates) +
        " " + type + " layers in float32: relative L2 " + error_text(result.fp16_rel_l2));
    return result;
  };
  // Invariant: keeping `fails` layers is measured past the tolerance, keeping `passes` within.
  BuildResult best = build_keeping(candidates);
  if (best.fp16_rel_l2 > tolerance) {
    // Even the float16-free build differs: the outputs vary by themselves (data-dependent
    // post-processing that float32 rounding reorders, nondeterministic kernels), not by float16.
    first.warnings.push_back(flag + ": outputs differ from float32 by " + error_text(first.fp16_rel_l2) +
                             " and still by " + error_text(best.fp16_rel_l2) +
                             " with every layer in float32, so the reduced precision is not the cause; every layer "
                             "that takes it runs in it");
    return first;
  }
  int32_t fails = 0, passes = candidates;
  while (passes - fails > 1) {
    const int32_t mid = fails + (passes - fails) / 2;
    BuildResult trial = build_keeping(mid);
    if (trial.fp16_rel_l2 <= tolerance) {
      passes = mid;
      best = std::move(trial);
    } else {
      fails = mid;
    }
  }
  best.warnings.insert(best.warnings.begin(), first.warnings.begin(), first.warnings.end());
  log(check + ": the first " + std::to_string(passes) + " of " + std::to_string(candidates) +
      " " + type + " layers stay float32 (relative L2 " + error_text(best.fp16_rel_l2) + " against " +
      error_text(first.fp16_rel_l2) + " with none)");
  best.fp16_rel_l2_all_half = first.fp16_rel_l2;
  return best;
}

}  // namespace edgert::builder
