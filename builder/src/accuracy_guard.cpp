#include "accuracy_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "build_error.h"
#include "engine_runs.h"
#include "onnx_import.h"
#include "passes/graph_rewrite.h"

namespace edgert::builder {

AccuracyGuardOptions parse_accuracy_guard(const std::string& text) {
  const size_t colon = text.rfind(':');
  AccuracyGuardOptions guard;
  const std::string name = text.substr(0, colon);
  if (name == "top1")
    guard.metric = GuardMetric::kTop1;
  else if (name == "top1-agreement")
    guard.metric = GuardMetric::kTop1Agreement;
  else if (name == "rel-l2")
    guard.metric = GuardMetric::kRelativeL2;
  else if (name == "box-agreement")
    guard.metric = GuardMetric::kBoxAgreement;
  else
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "--accuracy-guard %s: the metric must be top1, top1-agreement, rel-l2 or box-agreement", text.c_str());
  char* end = nullptr;
  const std::string value = colon == std::string::npos ? std::string() : text.substr(colon + 1);
  guard.tolerance = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(guard.tolerance >= 0) || !std::isfinite(guard.tolerance))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard %s: needs METRIC:TOLERANCE with a tolerance >= 0 "
               "(points for top1, top1-agreement and box-agreement, a relative L2 for rel-l2)", text.c_str());
  return guard;
}

std::string guard_metric_name(GuardMetric metric) {
  switch (metric) {
    case GuardMetric::kTop1: return "top1";
    case GuardMetric::kTop1Agreement: return "top1-agreement";
    case GuardMetric::kRelativeL2: return "rel-l2";
    case GuardMetric::kBoxAgreement: return "box-agreement";
  }
  return "?";
}

namespace {

constexpr float kDetectionScore = 0.3f, kCandidateScore = 0.15f, kMatchIou = 0.5f;

float iou(const float* a, const float* b) {
  const float w = std::min(a[2], b[2]) - std::max(a[0], b[0]), h = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  if (w <= 0 || h <= 0) return 0;
  const float inter = w * h;
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  return inter / (area_a + area_b - inter);
}

bool contains(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// The detector's boxes, scores and labels among `outputs` (scores and labels may be absent).
struct DetectionOutputs {
  std::string boxes, scores, labels;
};

DetectionOutputs detection_outputs(const std::vector<std::string>& outputs,
                                   const std::map<std::string, OutputValues>& batch) {
  DetectionOutputs d;
  for (const std::string& name : outputs) {
    const OutputValues& v = batch.at(name);
    if (d.boxes.empty() && v.shape.size() >= 2 && v.shape.back() == 4) d.boxes = name;
  }
  if (d.boxes.empty())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard box-agreement: no output of the model has boxes "
               "(a last dimension of 4)");
  std::vector<int64_t> per_box = batch.at(d.boxes).shape;
  per_box.pop_back();
  for (const std::string& name : outputs) {
    if (name == d.boxes || batch.at(name).shape != per_box) continue;
    if (d.scores.empty() && contains(name, "score")) d.scores = name;
    if (d.labels.empty() && (contains(name, "label") || contains(name, "class"))) d.labels = name;
  }
  return d;
}

// Output `name`'s element i of batch b (`fallback` when the output is absent or shorter).
float element(const BatchOutputs& side, size_t b, const std::string& name, size_t i, float fallback) {
  if (name.empty()) return fallback;
  const std::vector<float>& v = side[b].at(name).values;
  return i < v.size() ? v[i] : fallback;
}

}  // namespace

double box_agreement(const std::vector<std::string>& outputs, const BatchOutputs& reference,
                     const BatchOutputs& candidate) {
  size_t detections = 0, matched = 0;
  for (size_t b = 0; b < reference.size() && b < candidate.size(); ++b) {
    const DetectionOutputs names = detection_outputs(outputs, reference[b]);
    const OutputValues &rb = reference[b].at(names.boxes), &cb = candidate[b].at(names.boxes);
    size_t images = 1;  // [..., K, 4]: the leading dimensions are images (none: one image)
    for (size_t d = 0; d + 2 < rb.shape.size(); ++d) images *= static_cast<size_t>(rb.shape[d]);
    if (images == 0) continue;
    const size_t r_per = rb.values.size() / 4 / images, c_per = cb.values.size() / 4 / images;
    for (size_t image = 0; image < images; ++image) {
      auto r_score = [&](size_t k) { return element(reference, b, names.scores, image * r_per + k, 1.0f); };
      std::vector<size_t> order;
      for (size_t k = 0; k < r_per; ++k)
        if (r_score(k) >= kDetectionScore) order.push_back(k);
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return r_score(x) > r_score(y); });
      std::vector<bool> taken(c_per, false);
      for (size_t k : order) {
        ++detections;
        const float* box = rb.values.data() + 4 * (image * r_per + k);
        const float label = element(reference, b, names.labels, image * r_per + k, 0.0f);
        size_t best = c_per;
        float best_iou = kMatchIou;
        for (size_t j = 0; j < c_per; ++j) {
          const size_t at = image * c_per + j;
          if (taken[j] || element(candidate, b, names.scores, at, 1.0f) < kCandidateScore ||
              element(candidate, b, names.labels, at, 0.0f) != label)
            continue;
          const float overlap = iou(box, cb.values.data() + 4 * at);
          if (overlap >= best_iou) best_iou = overlap, best = j;
        }
        if (best < c_per) taken[best] = true, ++matched;
      }
    }
  }
  return detections ? 100.0 * static_cast<double>(matched) / static_cast<double>(detections) : 100.0;
}

namespace {

size_t argmax(const float* row, size_t n) { return static_cast<size_t>(std::max_element(row, row + n) - row); }

// The metric of `candidate` against `reference` on the model's outputs `outputs` (the first one
// for the top-1 metrics).
double measure(const AccuracyGuardOptions& guard, const std::vector<std::string>& outputs,
               const BatchOutputs& reference, const BatchOutputs& candidate) {
  if (guard.metric == GuardMetric::kBoxAgreement) return box_agreement(outputs, reference, candidate);
  if (guard.metric == GuardMetric::kRelativeL2) {
    double worst = 0;
    for (const std::string& name : outputs) {
      double diff = 0, norm = 0;
      for (size_t b = 0; b < reference.size(); ++b) {
        const OutputValues& r = reference[b].at(name);
        const OutputValues& c = candidate[b].at(name);
        for (size_t i = 0; i < r.values.size() && i < c.values.size(); ++i) {
          diff += (double(c.values[i]) - r.values[i]) * (double(c.values[i]) - r.values[i]);
          norm += double(r.values[i]) * r.values[i];
        }
      }
      worst = std::max(worst, norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff));
    }
    return worst;
  }
  size_t rows = 0, hits = 0, label = 0;
  for (size_t b = 0; b < reference.size(); ++b) {
    const OutputValues& r = reference[b].at(outputs.front());
    const OutputValues& c = candidate[b].at(outputs.front());
    const size_t classes = r.shape.empty() ? r.values.size() : static_cast<size_t>(r.shape.back());
    for (size_t row = 0; classes > 0 && (row + 1) * classes <= r.values.size(); ++row, ++rows) {
      const size_t got = argmax(c.values.data() + row * classes, classes);
      if (guard.metric == GuardMetric::kTop1Agreement) {
        hits += got == argmax(r.values.data() + row * classes, classes);
      } else {
        if (label >= guard.labels.size())
          build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard top1: %zu label(s) for more rows of '%s' than that",
                     guard.labels.size(), outputs.front().c_str());
        hits += static_cast<int64_t>(got) == guard.labels[label++];
      }
    }
  }
  if (guard.metric == GuardMetric::kTop1 && label != guard.labels.size())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard top1: %zu label(s) for %zu row(s) of '%s'",
               guard.labels.size(), label, outputs.front().c_str());
  return rows ? 100.0 * static_cast<double>(hits) / static_cast<double>(rows) : 0.0;
}

// How far past the tolerance `value` is (<= 0: within).
double excess(const AccuracyGuardOptions& guard, double float32_value, double value) {
  switch (guard.metric) {
    case GuardMetric::kTop1: return (float32_value - value) - guard.tolerance;
    case GuardMetric::kTop1Agreement: case GuardMetric::kBoxAgreement: return (100.0 - value) - guard.tolerance;
    case GuardMetric::kRelativeL2: return value - guard.tolerance;
  }
  return 0;
}

// Relative L2 of each exposed tensor of `candidate` against `reference` over every batch.
std::map<std::string, double> tensor_errors(const BatchOutputs& reference, const BatchOutputs& candidate) {
  std::map<std::string, std::pair<double, double>> sums;
  for (size_t b = 0; b < reference.size() && b < candidate.size(); ++b)
    for (const auto& [name, c] : candidate[b]) {
      auto r = reference[b].find(name);
      if (r == reference[b].end() || r->second.values.size() != c.values.size()) continue;
      auto& [diff, norm] = sums[name];
      for (size_t i = 0; i < c.values.size(); ++i) {
        const double d = double(c.values[i]) - r->second.values[i];
        diff += d * d;
        norm += double(r->second.values[i]) * r->second.values[i];
      }
    }
  std::map<std::string, double> errors;
  for (const auto& [name, s] : sums) errors[name] = s.second > 0 ? std::sqrt(s.first / s.second) : std::sqrt(s.first);
  return errors;
}

// The int8 layers, the one adding the most error first.
std::vector<AccuracyGuardReport::FallBack> rank_layers(const Int8RewriteReport& int8,
                                                       const std::map<std::string, double>& errors) {
  auto error_of = [&](const std::string& tensor) {
    auto it = errors.find(tensor);
    return it == errors.end() ? 0.0 : it->second;
  };
  std::vector<AccuracyGuardReport::FallBack> ranked;
  for (const Int8RewriteReport::Layer& layer : int8.layers) {
    double in = 0, out = 0;
    for (const std::string& t : layer.inputs) in = std::max(in, error_of(t));
    for (const std::string& t : layer.outputs) out = std::max(out, error_of(t));
    AccuracyGuardReport::FallBack f;
    f.layer = layer.name;
    f.added_error = out - in;
    ranked.push_back(f);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.added_error > b.added_error; });
  return ranked;
}

// A node's time in `times` by its name or as a part of a fused node's name, and how many
// layers that node holds.
double time_of(const std::map<std::string, double>& times, const std::string& layer, size_t* layers = nullptr) {
  for (const auto& [name, ms] : times) {
    size_t count = 0;
    for (const std::string& part : fused_name_parts(name, &count))
      if (part == layer) {
        if (layers) *layers = count;
        return ms;
      }
  }
  return 0;
}

}  // namespace

BuildResult guard_int8_accuracy(const BuildOptions& options, const std::function<BuildResult(const BuildOptions&)>& build) {
  const AccuracyGuardOptions& guard = *options.accuracy_guard;
  if (guard.validation.empty())
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard needs a validation set (--validation DIR)");
  std::vector<std::string> outputs;
  {
    const Model model = import_onnx(options.model_path);
    for (int32_t v : model.graphs[0].outputs) outputs.push_back(model.graphs[0].values[v].name);
  }
  if (options.postprocess)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--accuracy-guard measures the model's own outputs: build without "
               "--postprocess (or guard a build without it first)");
  auto log = [&](const std::string& line) {
    if (options.log) options.log("accuracy guard: " + line);
  };
  // The searches' builds: untimed and without what only deployment needs.
  BuildOptions search = options;
  search.tactics = TacticPolicy::kFirst;
  search.self_test = false;
  search.prepared_weights = false;
  search.timing_cache_path.clear();
  search.accuracy_guard.reset();
  AccuracyGuardReport report;
  report.metric = guard.metric;
  report.tolerance = guard.tolerance;

  BuildOptions float32 = search;
  float32.int8 = false;
  float32.expose_activations = true;
  const BatchOutputs reference =
      run_batches(build(float32).engine, options.plugin_path, guard.validation, "accuracy guard (float32)");
  report.float32_value = guard.metric == GuardMetric::kTop1 ? measure(guard, outputs, reference, reference)
                         : guard.metric == GuardMetric::kRelativeL2 ? 0.0
                                                                    : 100.0;  // agreement with itself
  BuildOptions exposed = search;
  exposed.expose_activations = true;
  const BuildResult all_int8 = build(exposed);
  const BatchOutputs all_int8_outputs =
      run_batches(all_int8.engine, options.plugin_path, guard.validation, "accuracy guard (int8)");
  report.all_int8_value = measure(guard, outputs, reference, all_int8_outputs);
  report.builds = 2;
  log(guard_metric_name(guard.metric) + ": float32 " + std::to_string(report.float32_value) + ", int8 " +
      std::to_string(report.all_int8_value));

  std::vector<AccuracyGuardReport::FallBack> ranked =
      rank_layers(all_int8.int8, tensor_errors(reference, all_int8_outputs));
  size_t keep = 0;  // how many of the ranked layers stay float32
  if (excess(guard, report.float32_value, report.all_int8_value) > 0 && !ranked.empty()) {
    auto holds_with = [&](size_t count) {
      BuildOptions candidate = search;
      for (size_t i = 0; i < count; ++i) {
        candidate.float32_layers.insert(ranked[i].layer);
        candidate.fell_back_layers.insert(ranked[i].layer);
      }
      const double value = measure(guard, outputs, reference,
                                   run_batches(build(candidate).engine, options.plugin_path, guard.validation,
                                               "accuracy guard"));
      ++report.builds;
      log(std::to_string(count) + " layer(s) in float32: " + std::to_string(value));
      return excess(guard, report.float32_value, value) <= 0;
    };
    size_t failing = 0, passing = 1;
    while (passing < ranked.size() && !holds_with(passing)) {
      failing = passing;
      passing = std::min(ranked.size(), passing * 2);
    }
    while (passing - failing > 1) {
      const size_t middle = failing + (passing - failing) / 2;
      (holds_with(middle) ? passing : failing) = middle;
    }
    keep = passing;
  }

  BuildOptions final_options = options;
  final_options.accuracy_guard.reset();
  for (size_t i = 0; i < keep; ++i) {
    final_options.float32_layers.insert(ranked[i].layer);
    final_options.fell_back_layers.insert(ranked[i].layer);
  }
  BuildResult result = build(final_options);
  report.final_value = measure(guard, outputs, reference,
                               run_batches(result.engine, options.plugin_path, guard.validation, "accuracy guard"));
  ++report.builds;
  report.within = excess(guard, report.float32_value, report.final_value) <= 0;
  if (keep > 0) {
    const std::map<std::string, double> int8_times =
        layer_times_ms(all_int8.engine, options.plugin_path, guard.validation.front(), 10);
    const std::map<std::string, double> final_times =
        layer_times_ms(result.engine, options.plugin_path, guard.validation.front(), 10);
    for (size_t i = 0; i < keep; ++i) {
      AccuracyGuardReport::FallBack f = ranked[i];
      f.int8_ms = time_of(int8_times, f.layer);
      f.float32_ms = time_of(final_times, f.layer, &f.float32_node_layers);
      report.fallen_back.push_back(f);
    }
  }
  if (!report.within)
    result.warnings.push_back("--accuracy-guard " + guard_metric_name(guard.metric) + ": " +
                              std::to_string(report.final_value) + " is out of tolerance even with " +
                              std::to_string(keep) + " layer(s) in float32");
  result.accuracy_guard = report;
  return result;
}

}  // namespace edgert::builder
