#include "non_max_suppression.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace edgert::cpu {

NmsBox nms_box(const float* box, bool center_point_box) {
  NmsBox b;
  if (center_point_box) {
    float half_w = box[2] / 2, half_h = box[3] / 2;
    b.x0 = box[0] - half_w;
    b.y0 = box[1] - half_h;
    b.x1 = box[0] + half_w;
    b.y1 = box[1] + half_h;
  } else {  // [y1, x1, y2, x2], any diagonal pair
    b.x0 = std::min(box[1], box[3]);
    b.y0 = std::min(box[0], box[2]);
    b.x1 = std::max(box[1], box[3]);
    b.y1 = std::max(box[0], box[2]);
  }
  b.area = (b.x1 - b.x0) * (b.y1 - b.y0);
  return b;
}

bool nms_suppresses(const NmsBox& a, const NmsBox& b, float iou_threshold) {
  float iw = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  float ih = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  if (iw <= 0 || ih <= 0) return false;
  float inter = iw * ih;
  float uni = a.area + b.area - inter;
  if (a.area <= 0 || b.area <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

void nms_candidates_by_score(const float* scores, int64_t count, const NmsParams& params, std::vector<int64_t>& order) {
  order.clear();
  for (int64_t i = 0; i < count; ++i)
    if (!params.has_score_threshold || scores[i] > params.score_threshold) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [scores](int64_t l, int64_t r) { return scores[l] > scores[r]; });
}

void nms_reference(const float* boxes, const float* scores, int64_t count, const NmsParams& params,
                   std::vector<int64_t>& kept) {
  std::vector<int64_t> order;
  nms_candidates_by_score(scores, count, params, order);
  const size_t first = kept.size();
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size() - first) >= params.max_output_boxes) break;
    NmsBox box = nms_box(boxes + i * 4, params.center_point_box);
    bool keep = true;
    for (size_t k = first; k < kept.size() && keep; ++k)
      keep = !nms_suppresses(box, nms_box(boxes + kept[k] * 4, params.center_point_box), params.iou_threshold);
    if (keep) kept.push_back(i);
  }
}

namespace {

// rank_ values of boxes left out of the x index.
constexpr int32_t kNeverOverlaps = -2;  // area not positive (or NaN): nms_suppresses is false with any box
// Non-finite corners or area, or both sides inverted: checked against every kept box. With an IoU
// threshold of at least 0 (all the op allows) none of them can suppress or be suppressed, but
// SweepNms stays exact for any threshold nms_reference is given.
constexpr int32_t kUnindexed = -1;

constexpr int64_t kBlock = 32;  // ranks per entry of block_bounds_

// For finite corners with x0 < x1 and y0 < y1, nms_suppresses can only hold where the float
// differences iw and ih are positive, that is where the boxes' x and y ranges overlap: the
// index and the prefilters below drop only pairs for which it is false.
bool indexable(const NmsBox& b) {
  return std::isfinite(b.x0) && std::isfinite(b.y0) && std::isfinite(b.x1) && std::isfinite(b.y1) &&
         std::isfinite(b.area) && b.x0 < b.x1 && b.y0 < b.y1;
}

// Searches of the ascending x0 array that start from the candidate's own rank: the ends of its
// window are a few hundred ranks away at most where boxes are spread out, and a galloping search
// finds them in cache lines near the start instead of the whole array's binary search.
// The first rank in [from, n) whose x0 is at least x (n if none).
int64_t first_x0_at_least(const float* x0, int64_t n, int64_t from, float x) {
  int64_t width = 1;
  while (from + width < n && x0[from + width] < x) {
    from += width;
    width *= 2;
  }
  return std::lower_bound(x0 + from, x0 + std::min(n, from + width), x) - x0;
}

// The first rank in [0, to] whose x0 is above bound, given that x0[to] is.
int64_t first_x0_above(const float* x0, int64_t to, double bound) {
  int64_t width = 1;
  while (to - width >= 0 && static_cast<double>(x0[to - width]) > bound) {
    to -= width;
    width *= 2;
  }
  auto at_most = [](double x, float b) { return x < static_cast<double>(b); };
  return std::upper_bound(x0 + std::max<int64_t>(0, to - width), x0 + to, bound, at_most) - x0;
}

bool ranges_overlap(const NmsBox& a, const NmsBox& b) {
  return b.x0 < a.x1 && b.x1 > a.x0 && b.y0 < a.y1 && b.y1 > a.y0;
}

}  // namespace

bool SweepNms::suppressed_by_any(const NmsBox& box, const std::vector<int32_t>& kept_positions) const {
  for (int32_t p : kept_positions)
    if (nms_suppresses(box, by_score_[p], iou_threshold_)) return true;
  return false;
}

bool SweepNms::suppressed_in_index(const NmsBox& box, int64_t lo, int64_t hi) const {
  const float* kept_x1 = kept_x1_by_rank_.data();
  const float* y0 = y0_by_rank_.data();
  const float* y1 = y1_by_rank_.data();
  for (int64_t block = lo / kBlock; block * kBlock < hi; ++block) {
    // Skip a block when every kept box in it ends left of the candidate, or lies wholly above or
    // below it (with no kept box, the bounds are -inf and +inf and it is skipped too).
    const KeptBounds& kb = block_bounds_[block];
    if (!(kb.max_x1 > box.x0 && kb.max_y1 > box.y0 && kb.min_y0 < box.y1)) continue;
    const int64_t begin = std::max(lo, block * kBlock), end = std::min(hi, (block + 1) * kBlock);
    // Ranks below hi start left of the candidate's x1; this finds the kept ones that also end
    // right of its x0 and overlap it in y, without branches, for the vectorizer.
    uint8_t overlaps[kBlock];
    uint8_t any = 0;
    for (int64_t r = begin; r < end; ++r) {
      uint8_t o = (kept_x1[r] > box.x0) & (y0[r] < box.y1) & (y1[r] > box.y0);
      overlaps[r - begin] = o;
      any |= o;
    }
    if (!any) continue;
    for (int64_t r = begin; r < end; ++r)
      if (overlaps[r - begin] && nms_suppresses(box, box_by_rank_[r], iou_threshold_)) return true;
  }
  return false;
}

void SweepNms::select(const float* boxes, const float* scores, int64_t count, const NmsParams& params,
                      std::vector<int64_t>& kept) {
  if (params.max_output_boxes <= 0) return;
  if (count > std::numeric_limits<int32_t>::max()) return nms_reference(boxes, scores, count, params, kept);
  iou_threshold_ = params.iou_threshold;
  nms_candidates_by_score(scores, count, params, order_);
  const int64_t n = static_cast<int64_t>(order_.size());

  by_score_.resize(n);
  rank_.resize(n);
  x_order_.clear();
  for (int64_t p = 0; p < n; ++p) {
    by_score_[p] = nms_box(boxes + order_[p] * 4, params.center_point_box);
    if (!(by_score_[p].area > 0)) {
      rank_[p] = kNeverOverlaps;
    } else if (indexable(by_score_[p])) {
      x_order_.emplace_back(by_score_[p].x0, static_cast<int32_t>(p));
    } else {
      rank_[p] = kUnindexed;
    }
  }
  std::sort(x_order_.begin(), x_order_.end());
  const int64_t indexed = static_cast<int64_t>(x_order_.size());
  x0_by_rank_.resize(indexed);
  y0_by_rank_.resize(indexed);
  y1_by_rank_.resize(indexed);
  box_by_rank_.resize(indexed);
  for (int64_t r = 0; r < indexed; ++r) {
    const int32_t p = x_order_[r].second;
    const NmsBox& b = by_score_[p];
    x0_by_rank_[r] = b.x0;
    y0_by_rank_[r] = b.y0;
    y1_by_rank_[r] = b.y1;
    box_by_rank_[r] = b;
    rank_[p] = static_cast<int32_t>(r);
  }
  kept_x1_by_rank_.assign(indexed, -std::numeric_limits<float>::infinity());
  const float inf = std::numeric_limits<float>::infinity();
  block_bounds_.assign((indexed + kBlock - 1) / kBlock, KeptBounds{-inf, inf, -inf});
  kept_indexed_.clear();
  kept_unindexed_.clear();
  // An upper bound on x1 - x0 of the kept indexed boxes, rounded up: a kept box whose x0 is at
  // most the candidate's x0 minus this ends at or before the candidate's x0.
  double max_kept_width = 0;

  int64_t kept_count = 0;
  for (int64_t p = 0; p < n && kept_count < params.max_output_boxes; ++p) {
    const NmsBox& box = by_score_[p];
    const int32_t rank = rank_[p];
    bool drop = false;
    if (rank >= 0) {
      drop = suppressed_by_any(box, kept_unindexed_);
      if (!drop && !kept_indexed_.empty()) {
        int64_t hi = first_x0_at_least(x0_by_rank_.data(), indexed, rank + 1, box.x1);
        double bound = std::nextafter(static_cast<double>(box.x0) - max_kept_width, -HUGE_VAL);
        int64_t lo = first_x0_above(x0_by_rank_.data(), rank, bound);
        // Where the candidate's x range spans many more boxes than were kept (a very wide box was
        // kept, or the boxes pile up in x), the kept ones are fewer to walk.
        if (hi - lo <= 4 * static_cast<int64_t>(kept_indexed_.size())) {
          drop = suppressed_in_index(box, lo, hi);
        } else {
          for (int32_t k : kept_indexed_)
            if (ranges_overlap(box, by_score_[k]) && nms_suppresses(box, by_score_[k], iou_threshold_)) {
              drop = true;
              break;
            }
        }
      }
    } else if (rank == kUnindexed) {
      drop = suppressed_by_any(box, kept_indexed_) || suppressed_by_any(box, kept_unindexed_);
    }
    if (drop) continue;
    kept.push_back(order_[p]);
    ++kept_count;
    if (rank >= 0) {
      kept_x1_by_rank_[rank] = box.x1;
      KeptBounds& kb = block_bounds_[rank / kBlock];
      kb.max_x1 = std::max(kb.max_x1, box.x1);
      kb.min_y0 = std::min(kb.min_y0, box.y0);
      kb.max_y1 = std::max(kb.max_y1, box.y1);
      double width = std::nextafter(static_cast<double>(box.x1) - static_cast<double>(box.x0), HUGE_VAL);
      max_kept_width = std::max(max_kept_width, width);
      kept_indexed_.push_back(static_cast<int32_t>(p));
    } else if (rank == kUnindexed) {
      kept_unindexed_.push_back(static_cast<int32_t>(p));
    }
  }
}

}  // namespace edgert::cpu
