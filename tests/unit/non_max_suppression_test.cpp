// The CPU plugin's NonMaxSuppression selection, built from its source: SweepNms against the
// reference on random boxes of awkward counts, torchvision's per-class shifted boxes, and boxes
// the x index leaves out (zero or negative area, NaN, infinities, very wide ones).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "non_max_suppression.h"

namespace edgert::cpu {
namespace {

struct Case {
  std::vector<float> boxes;   // count x 4
  std::vector<float> scores;  // count
  int64_t count() const { return static_cast<int64_t>(scores.size()); }
};

// Boxes of the given encoding inside an extent x extent image, sizes from tiny to most of it;
// scores drawn from few values, so ties are common.
Case random_case(std::mt19937& rng, int64_t count, bool center, float extent) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> score_level(0, 15);
  Case c;
  for (int64_t i = 0; i < count; ++i) {
    float w = extent * (0.02f + 0.6f * unit(rng)), h = extent * (0.02f + 0.6f * unit(rng));
    float x = extent * unit(rng), y = extent * unit(rng);
    if (center) {
      c.boxes.insert(c.boxes.end(), {x, y, w, h});
    } else if (unit(rng) < 0.5f) {
      c.boxes.insert(c.boxes.end(), {y, x, y + h, x + w});
    } else {  // the other diagonal
      c.boxes.insert(c.boxes.end(), {y + h, x + w, y, x});
    }
    c.scores.push_back(score_level(rng) < 4 ? 0.5f : unit(rng));
  }
  return c;
}

void expect_same_selection(const Case& c, const NmsParams& params, SweepNms& sweep, const char* what) {
  std::vector<int64_t> expected, found;
  nms_reference(c.boxes.data(), c.scores.data(), c.count(), params, expected);
  sweep.select(c.boxes.data(), c.scores.data(), c.count(), params, found);
  EXPECT_EQ(found, expected) << what << ": " << c.count() << " boxes, center " << params.center_point_box
                             << ", iou " << params.iou_threshold << ", score threshold "
                             << (params.has_score_threshold ? params.score_threshold : -1.0f) << ", max "
                             << params.max_output_boxes;
}

TEST(NonMaxSuppression, SweepMatchesTheReferenceOnRandomBoxes) {
  std::mt19937 rng(7);
  SweepNms sweep;  // one instance throughout: its scratch is reused across sizes
  for (int64_t count : {0, 1, 2, 7, 33, 100, 257, 1001}) {
    for (bool center : {false, true}) {
      Case c = random_case(rng, count, center, 97.0f);
      for (float iou : {0.0f, 0.3f, 0.5f, 0.9f, 1.0f}) {
        for (int64_t max_boxes : {int64_t{1}, int64_t{5}, std::numeric_limits<int64_t>::max()}) {
          NmsParams params;
          params.center_point_box = center;
          params.iou_threshold = iou;
          params.max_output_boxes = max_boxes;
          expect_same_selection(c, params, sweep, "random");
          params.has_score_threshold = true;
          params.score_threshold = 0.5f;
          expect_same_selection(c, params, sweep, "random, score threshold");
        }
      }
    }
  }
}

TEST(NonMaxSuppression, SweepMatchesTheReferenceOnClassesShiftedApart) {
  // torchvision's batched NMS: every class's boxes moved by class * (largest coordinate + 1), so
  // one NMS over all classes never lets two classes suppress each other.
  std::mt19937 rng(11);
  SweepNms sweep;
  for (int classes : {1, 3, 41}) {
    Case all;
    for (int k = 0; k < classes; ++k) {
      Case c = random_case(rng, 149, false, 320.0f);
      float shift = k * 321.0f;
      for (float& v : c.boxes) v += shift;
      all.boxes.insert(all.boxes.end(), c.boxes.begin(), c.boxes.end());
      all.scores.insert(all.scores.end(), c.scores.begin(), c.scores.end());
    }
    NmsParams params;
    params.iou_threshold = 0.5f;
    params.has_score_threshold = true;
    params.score_threshold = 0.01f;
    params.max_output_boxes = std::numeric_limits<int64_t>::max();
    expect_same_selection(all, params, sweep, "shifted classes");
  }
}

TEST(NonMaxSuppression, SweepMatchesTheReferenceOnBoxesTheIndexLeavesOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(0, 11);
  SweepNms sweep;
  for (bool center : {false, true}) {
    for (int round = 0; round < 20; ++round) {
      Case c = random_case(rng, 301, center, 50.0f);
      for (int64_t i = 0; i < c.count(); ++i) {
        float* b = &c.boxes[i * 4];
        switch (pick(rng)) {
          case 0: b[2] = b[0]; break;                  // zero extent
          case 1: b[1] = nan; break;
          case 2: b[3] = inf; break;
          case 3: b[0] = -inf; break;
          case 4: b[2] = -b[2]; b[3] = -b[3]; break;   // negative width and height (center encoding)
          case 5: b[0] = -1e30f; b[2] = 1e30f; break;  // very wide: the window spans everything
          case 6: if (i > 0) std::copy(b - 4, b, b); break;  // a duplicate of the previous box
          case 7: b[0] = b[1] = b[2] = b[3] = 0.0f; break;
          default: break;
        }
      }
      // A negative threshold (the op refuses it) lets a box of infinite area suppress others.
      for (float iou : {-0.5f, 0.0f, 0.5f}) {
        NmsParams params;
        params.center_point_box = center;
        params.iou_threshold = iou;
        params.max_output_boxes = std::numeric_limits<int64_t>::max();
        expect_same_selection(c, params, sweep, "degenerate boxes");
      }
    }
  }
}

TEST(NonMaxSuppression, AWideBoxKeptFirstStillSuppressesItsNeighbours) {
  // The widest kept box sets how far left of a candidate the index looks; a candidate far to
  // the right of every other box must still be checked against it.
  Case c;
  c.boxes = {0, 0, 10, 1000,     // [y1, x1, y2, x2]: 1000 wide, kept first
             0, 990, 10, 1000,   // inside it at its right end: IoU 0.01, kept
             0, 0, 10, 990,      // IoU 0.99 with the first: dropped
             0, 995, 10, 1000};  // IoU 0.5 with the second: dropped at 0.4
  c.scores = {0.9f, 0.8f, 0.7f, 0.6f};
  NmsParams params;
  params.iou_threshold = 0.4f;
  params.max_output_boxes = 10;
  std::vector<int64_t> kept;
  SweepNms sweep;
  sweep.select(c.boxes.data(), c.scores.data(), c.count(), params, kept);
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 1}));
  expect_same_selection(c, params, sweep, "wide box");
}

}  // namespace
}  // namespace edgert::cpu
