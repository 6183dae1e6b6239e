#include "postprocess.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <stdexcept>

namespace edgert::daemon {
namespace {

int64_t numel(const edgert_tensor& t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= t.dims[d];
  return n;
}

double value_at(const edgert_tensor& t, int64_t i) {
  switch (t.dtype) {
    case EDGERT_DTYPE_FLOAT32: return static_cast<const float*>(t.data)[i];
    case EDGERT_DTYPE_FLOAT64: return static_cast<const double*>(t.data)[i];
    case EDGERT_DTYPE_INT64: return static_cast<double>(static_cast<const int64_t*>(t.data)[i]);
    case EDGERT_DTYPE_INT32: return static_cast<const int32_t*>(t.data)[i];
    case EDGERT_DTYPE_UINT8: case EDGERT_DTYPE_BOOL: return static_cast<const uint8_t*>(t.data)[i];
    case EDGERT_DTYPE_INT8: return static_cast<const int8_t*>(t.data)[i];
    default: return 0;
  }
}

float iou(const float* a, const float* b) {
  float ix = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  float iy = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  float inter = ix * iy;
  float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return uni > 0 ? inter / uni : 0;
}

}  // namespace

Postprocessor::Postprocessor(const PostprocessConfig& config) : config_(config) {
  if (config.labels.empty()) return;
  std::ifstream in(config.labels);
  if (!in) throw std::runtime_error("cannot read labels file '" + config.labels + "'");
  for (std::string line; std::getline(in, line);) labels_.push_back(line);
}

std::string Postprocessor::label(int id) const {
  return id >= 0 && static_cast<size_t>(id) < labels_.size() ? labels_[id] : std::to_string(id);
}

void Postprocessor::run(const std::vector<edgert_tensor>& outputs, const std::vector<std::string>& names,
                        int image_width, int image_height, Result* result) const {
  if (outputs.empty()) throw std::runtime_error("the engine has no outputs");
  if (config_.type == "classification" && reduced_in_engine(outputs)) top_k_from_engine(outputs[0], outputs[1], result);
  else if (config_.type == "classification") classification(outputs[0], result);
  else if (config_.type == "detection") detection(outputs, image_width, image_height, result);
  else if (config_.type == "segmentation") segmentation(outputs[0], result);
  else raw(outputs, names, result);
}

// An engine built with --postprocess classification:K ends in TopK: scores [N, K] (probabilities,
// best first) and classes [N, K] int64.
bool Postprocessor::reduced_in_engine(const std::vector<edgert_tensor>& outputs) {
  if (outputs.size() != 2 || outputs[0].rank != outputs[1].rank || outputs[1].dtype != EDGERT_DTYPE_INT64) return false;
  for (int32_t d = 0; d < outputs[0].rank; ++d)
    if (outputs[0].dims[d] != outputs[1].dims[d]) return false;
  return true;
}

void Postprocessor::top_k_from_engine(const edgert_tensor& scores, const edgert_tensor& classes, Result* result) const {
  const int64_t k = std::min<int64_t>(scores.rank ? scores.dims[scores.rank - 1] : 1, config_.top_k);
  nlohmann::json top = nlohmann::json::array();
  for (int64_t i = 0; i < k; ++i) {
    Detection d;
    d.class_id = static_cast<int>(value_at(classes, i));
    d.label = label(d.class_id);
    d.score = static_cast<float>(value_at(scores, i));
    result->detections.push_back(d);
    top.push_back({{"class", d.class_id}, {"label", d.label}, {"score", d.score}});
  }
  result->payload = {{"type", "classification"}, {"top_k", top}};
}

void Postprocessor::classification(const edgert_tensor& t, Result* result) const {
  int64_t classes = t.rank ? t.dims[t.rank - 1] : 1;
  if (classes <= 0) throw std::runtime_error("classification output has no classes");
  // Scores of the first batch item; logits become probabilities so scores mean the same for
  // every model.
  std::vector<double> p(static_cast<size_t>(classes));
  double mx = -INFINITY, sum = 0;
  bool probabilities = true;
  for (int64_t i = 0; i < classes; ++i) {
    p[i] = value_at(t, i);
    mx = std::max(mx, p[i]);
    sum += p[i];
    probabilities = probabilities && p[i] >= 0 && p[i] <= 1;
  }
  if (!probabilities || std::fabs(sum - 1) > 1e-3) {
    double z = 0;
    for (double& v : p) z += (v = std::exp(v - mx));
    for (double& v : p) v /= z;
  }
  std::vector<int> order(static_cast<size_t>(classes));
  std::iota(order.begin(), order.end(), 0);
  int k = std::min<int>(config_.top_k, static_cast<int>(classes));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return p[a] > p[b]; });
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < k; ++i) {
    Detection d;
    d.class_id = order[i];
    d.label = label(order[i]);
    d.score = static_cast<float>(p[order[i]]);
    result->detections.push_back(d);
    top.push_back({{"class", d.class_id}, {"label", d.label}, {"score", d.score}});
  }
  result->payload = {{"type", "classification"}, {"top_k", top}};
}

void Postprocessor::detection(const std::vector<edgert_tensor>& outputs, int image_width, int image_height,
                              Result* result) const {
  std::vector<Detection> found;
  if (outputs.size() >= 3 && outputs[0].rank == 2 && outputs[0].dims[1] == 4) {
    // torchvision style: boxes [N, 4] (x1, y1, x2, y2 in input pixels), scores [N], labels [N]; NMS done.
    int64_t n = outputs[0].dims[0];
    for (int64_t i = 0; i < n; ++i) {
      float score = static_cast<float>(value_at(outputs[1], i));
      if (score < config_.score_threshold) continue;
      Detection d;
      d.class_id = static_cast<int>(value_at(outputs[2], i));
      d.label = label(d.class_id);
      d.score = score;
      for (int c = 0; c < 4; ++c) d.box[c] = static_cast<float>(value_at(outputs[0], i * 4 + c));
      found.push_back(d);
    }
  } else if (outputs[0].rank == 3 && outputs[0].dims[2] >= 6) {
    // YOLO style: [1, N, 5 + classes] = cx, cy, w, h, objectness, class scores; needs NMS here.
    int64_t n = outputs[0].dims[1], stride = outputs[0].dims[2];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t base = i * stride;
      double objectness = value_at(outputs[0], base + 4);
      int best = 0;
      double best_score = 0;
      for (int64_t c = 5; c < stride; ++c) {
        double s = objectness * value_at(outputs[0], base + c);
        if (s > best_score) best_score = s, best = static_cast<int>(c - 5);
      }
      if (best_score < config_.score_threshold) continue;
      double cx = value_at(outputs[0], base), cy = value_at(outputs[0], base + 1);
      double w = value_at(outputs[0], base + 2), h = value_at(outputs[0], base + 3);
      Detection d;
      d.class_id = best;
      d.label = label(best);
      d.score = static_cast<float>(best_score);
      d.box[0] = static_cast<float>(cx - w / 2), d.box[1] = static_cast<float>(cy - h / 2);
      d.box[2] = static_cast<float>(cx + w / 2), d.box[3] = static_cast<float>(cy + h / 2);
      found.push_back(d);
    }
    std::sort(found.begin(), found.end(), [](const Detection& a, const Detection& b) { return a.score > b.score; });
    std::vector<Detection> kept;
    for (const Detection& d : found) {
      bool suppressed = false;
      for (const Detection& k : kept) suppressed = suppressed || (k.class_id == d.class_id && iou(k.box, d.box) > config_.iou_threshold);
      if (!suppressed) kept.push_back(d);
    }
    found.swap(kept);
  } else {
    throw std::runtime_error("detection postprocess expects boxes/scores/labels outputs or a [1, N, 5+C] tensor");
  }
  nlohmann::json objects = nlohmann::json::array();
  for (const Detection& d : found)
    objects.push_back({{"class", d.class_id}, {"label", d.label}, {"score", d.score},
                       {"box", {d.box[0], d.box[1], d.box[2], d.box[3]}}});
  result->detections = std::move(found);
  result->payload = {{"type", "detection"}, {"image", {image_width, image_height}}, {"objects", objects}};
}

void Postprocessor::segmentation(const edgert_tensor& t, Result* result) const {
  if (t.rank != 4) throw std::runtime_error("segmentation output must be [1, classes, H, W] or a class map [1, 1, H, W]");
  const int64_t pixels = t.dims[2] * t.dims[3];
  std::vector<int64_t> counts;
  if (t.dtype == EDGERT_DTYPE_INT64 && t.dims[1] == 1) {
    // The engine's own arg-max (--postprocess segmentation): a class per pixel.
    const int64_t* map = static_cast<const int64_t*>(t.data);
    for (int64_t p = 0; p < pixels; ++p) {
      if (map[p] < 0 || map[p] > 65535)
        throw std::runtime_error("segmentation class map holds class " + std::to_string(map[p]));
      if (static_cast<size_t>(map[p]) >= counts.size()) counts.resize(static_cast<size_t>(map[p]) + 1, 0);
      ++counts[static_cast<size_t>(map[p])];
    }
  } else {
    counts.assign(static_cast<size_t>(t.dims[1]), 0);
    for (int64_t p = 0; p < pixels; ++p) {
      int64_t best = 0;
      double best_v = value_at(t, p);
      for (int64_t c = 1; c < t.dims[1]; ++c) {
        double v = value_at(t, c * pixels + p);
        if (v > best_v) best_v = v, best = c;
      }
      ++counts[best];
    }
  }
  const int64_t classes = static_cast<int64_t>(counts.size());
  nlohmann::json summary = nlohmann::json::array();
  std::vector<int> order(static_cast<size_t>(classes));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
  for (int c : order) {
    if (counts[c] == 0) break;
    double fraction = static_cast<double>(counts[c]) / pixels;
    summary.push_back({{"class", c}, {"label", label(c)}, {"fraction", fraction}});
    Detection d;
    d.class_id = c;
    d.label = label(c);
    d.score = static_cast<float>(fraction);
    result->detections.push_back(d);
  }
  result->payload = {{"type", "segmentation"}, {"size", {t.dims[3], t.dims[2]}}, {"classes", summary}};
}

void Postprocessor::raw(const std::vector<edgert_tensor>& outputs, const std::vector<std::string>& names,
                        Result* result) const {
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t o = 0; o < outputs.size(); ++o) {
    const edgert_tensor& t = outputs[o];
    nlohmann::json shape = nlohmann::json::array(), head = nlohmann::json::array();
    for (int32_t d = 0; d < t.rank; ++d) shape.push_back(t.dims[d]);
    int64_t n = numel(t);
    for (int64_t i = 0; i < std::min<int64_t>(n, 16); ++i) head.push_back(value_at(t, i));
    tensors.push_back({{"name", o < names.size() ? names[o] : ""}, {"shape", shape}, {"values", head}});
  }
  result->payload = {{"type", "raw"}, {"outputs", tensors}};
}

}  // namespace edgert::daemon
