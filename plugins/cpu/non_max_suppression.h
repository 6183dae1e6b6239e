// Greedy NonMaxSuppression for one (batch, class) of the ONNX op: walk the boxes from the highest
// score down and keep each one that no box kept before overlaps by more than the IoU threshold.
//
// Two implementations that keep exactly the same boxes: the plain reference, which checks every
// candidate against every box kept so far, and SweepNms, which finds the kept boxes a candidate
// can overlap through an index sorted by x. Detectors exported from torchvision run one NMS over
// all classes at once, their boxes shifted apart per class, so tens of thousands of candidates
// keep thousands of boxes: the reference's quadratic walk took hundreds of milliseconds there.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace edgert::cpu {

struct NmsParams {
  bool center_point_box = false;  // boxes are [x_center, y_center, width, height], else [y1, x1, y2, x2]
  float iou_threshold = 0.0f;     // a candidate is dropped when its IoU with a kept box exceeds this
  bool has_score_threshold = false;
  float score_threshold = 0.0f;   // when set, only boxes scoring strictly above it are candidates
  int64_t max_output_boxes = 0;   // stop after keeping this many
};

// A box as the IoU test reads it: corners ordered (x0 <= x1 and y0 <= y1 for the corner
// encoding; the center encoding keeps a negative width as given) and its area.
struct NmsBox {
  float x0, y0, x1, y1, area;
};

NmsBox nms_box(const float* box, bool center_point_box);

// Whether kept box `kept` suppresses `candidate`. Both implementations decide with this one
// function, so they agree bit for bit, NaN and degenerate boxes included.
bool nms_suppresses(const NmsBox& candidate, const NmsBox& kept, float iou_threshold);

// The candidates (score above the threshold, if any) from the highest score down; equal scores
// keep the lower index first. `order` is overwritten.
void nms_candidates_by_score(const float* scores, int64_t count, const NmsParams& params, std::vector<int64_t>& order);

// `boxes` holds count boxes of 4 floats, `scores` count floats; both are only read during the
// call. The kept boxes' indices are appended to `kept`, highest score first.
void nms_reference(const float* boxes, const float* scores, int64_t count, const NmsParams& params,
                   std::vector<int64_t>& kept);

// The same selection as nms_reference, checking each candidate only against the kept boxes near
// it in x (and in y, by blocks) rather than against every kept box. Holds scratch memory between
// calls, so one instance per kernel and no sharing between threads.
class SweepNms {
 public:
  void select(const float* boxes, const float* scores, int64_t count, const NmsParams& params,
              std::vector<int64_t>& kept);

 private:
  // Whether a kept box in ranks [lo, hi) of the x index overlaps candidate `box` enough.
  bool suppressed_in_index(const NmsBox& box, int64_t lo, int64_t hi) const;
  bool suppressed_by_any(const NmsBox& box, const std::vector<int32_t>& kept_positions) const;

  float iou_threshold_ = 0.0f;
  std::vector<int64_t> order_;           // candidates' box indices, by score
  std::vector<NmsBox> by_score_;         // their boxes, same order
  std::vector<int32_t> rank_;            // candidate position -> rank in the x index, or a negative kind
  // The x index: the indexed boxes sorted by x0, one array per coordinate the scan compares.
  std::vector<float> x0_by_rank_;
  std::vector<float> y0_by_rank_;
  std::vector<float> y1_by_rank_;
  std::vector<float> kept_x1_by_rank_;   // x1 of a kept box, -inf for one not (yet) kept
  std::vector<NmsBox> box_by_rank_;
  struct KeptBounds {
    float max_x1, min_y0, max_y1;
  };
  std::vector<KeptBounds> block_bounds_;  // per block of ranks: the extent of its kept boxes
  std::vector<int32_t> kept_indexed_;    // candidate positions of kept indexed boxes, in keeping order
  std::vector<int32_t> kept_unindexed_;  // candidate positions of kept boxes left out of the index
  std::vector<std::pair<float, int32_t>> x_order_;  // (x0, candidate position) of the indexed boxes
};

}  // namespace edgert::cpu
