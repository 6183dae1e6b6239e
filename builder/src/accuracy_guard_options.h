// What the INT8 accuracy guard measures (--accuracy-guard METRIC:TOLERANCE --validation DIR)
// and what it reports; the guard itself is accuracy_guard.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "int8_calibration.h"

namespace edgert::builder {

// Metrics on the model's first output, against the float32 engine on the same inputs:
//   top1           top-1 accuracy with labels: the loss in percentage points must be at most
//                  the tolerance (top1:0.5 -> at most half a point lost)
//   top1-agreement the share of rows whose top-1 class is float32's: at most `tolerance` points
//                  below 100
//   rel-l2         ||int8 - float32|| / ||float32|| over the validation set, on every output of
//                  the model: at most the tolerance
//   box-agreement  a detector's: the share of float32's detections (score >= 0.3) that the int8
//                  engine also makes (the same label, IoU >= 0.5, score >= 0.15: a box whose
//                  score drifts across the line is not lost), matched one to one, best scores
//                  first: at most `tolerance` points below 100. Boxes are the output whose last
//                  dimension is 4 ([..., K, 4], corners); scores and labels the outputs of shape
//                  [..., K] named with "score" and "label" or "class" (none: every box counts,
//                  any label matches).
// Rows are the output's leading dimensions; classes its last.
enum class GuardMetric { kTop1, kTop1Agreement, kRelativeL2, kBoxAgreement };

struct AccuracyGuardOptions {
  GuardMetric metric = GuardMetric::kTop1Agreement;
  double tolerance = 0.5;
  std::vector<CalibrationBatch> validation;
  std::vector<int64_t> labels;  // top1: one per row of the first output, over the batches in order
};

// "top1:0.5", "top1-agreement:1", "rel-l2:0.05", "box-agreement:2"; throws BuildError on
// anything else.
AccuracyGuardOptions parse_accuracy_guard(const std::string& text);
std::string guard_metric_name(GuardMetric metric);

struct AccuracyGuardReport {
  GuardMetric metric = GuardMetric::kTop1Agreement;
  double tolerance = 0;
  // The metric's value (accuracy in percent for top1 and top1-agreement, the relative L2
  // otherwise) of the float32 engine, of every int8 layer, and of the engine built.
  double float32_value = 0, all_int8_value = 0, final_value = 0;
  bool within = false;  // the engine built holds the tolerance
  struct FallBack {
    std::string layer;
    double added_error = 0;  // relative L2 the layer added to what it read (its sensitivity)
    double float32_ms = 0, int8_ms = 0;  // its time in each precision (first validation batch)
    // Layers in the float32 node that holds it (a fused convolution + activation + pool counts
    // them all; its time is theirs together).
    size_t float32_node_layers = 1;
  };
  std::vector<FallBack> fallen_back;  // most sensitive first
  int builds = 0;                     // engines built and measured to find them
};

}  // namespace edgert::builder
