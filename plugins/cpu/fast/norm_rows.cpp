#include "fast/norm_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "thread_pool.h"

namespace edgert::cpu {
namespace {

// Partial sums a row keeps: lane l adds elements l, l + kLanes, ... Wider than any vector the
// compiler uses (4 floats on SSE, 8 on AVX2), so it vectorizes them as written, never reorders.
constexpr int kLanes = 16;

// Below this many elements a node runs on the calling thread: waking the pool costs more.
constexpr int64_t kSerialElements = 1 << 14;

float sum_of_lanes(const float (&acc)[kLanes]) {
  float half[kLanes / 2];
  for (int l = 0; l < kLanes / 2; ++l) half[l] = acc[l] + acc[l + kLanes / 2];
  float quarter[kLanes / 4];
  for (int l = 0; l < kLanes / 4; ++l) quarter[l] = half[l] + half[l + kLanes / 4];
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

// The last `count` (< kLanes) elements of a row, then zeros: the tail as one more full block, so
// the lane loops have one shape the compiler keeps in registers.
void load_tail(const float* x, int64_t count, float (&block)[kLanes]) {
  for (int l = 0; l < kLanes; ++l) block[l] = 0.0f;
  std::memcpy(block, x, static_cast<size_t>(count) * sizeof(float));
}

float row_sum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  if (j < n) {
    float tail[kLanes];
    load_tail(x + j, n - j, tail);
    for (int l = 0; l < kLanes; ++l) acc[l] += tail[l];
  }
  return sum_of_lanes(acc);
}

float row_sum_of_squares(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[j + l] * x[j + l];
  if (j < n) {
    float tail[kLanes];
    load_tail(x + j, n - j, tail);
    for (int l = 0; l < kLanes; ++l) acc[l] += tail[l] * tail[l];
  }
  return sum_of_lanes(acc);
}

// Sums of d = x - shift and of d^2 over a row. Two loops: with both sums in one, GCC 12
// vectorized across blocks instead of lanes (deinterleaving shuffles, twice as slow).
void deviation_sums(const float* x, int64_t n, float shift, float* sum, float* sum_of_squares) {
  float acc[kLanes] = {}, acc2[kLanes] = {};
  for (int64_t k = 0; k + kLanes <= n; k += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[k + l] - shift;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float d = x[j + l] - shift;
      acc2[l] += d * d;
    }
  if (j < n) {
    float tail[kLanes];
    load_tail(x + j, n - j, tail);
    const int64_t count = n - j;
    for (int l = 0; l < kLanes; ++l) {
      const float d = l < count ? tail[l] - shift : 0.0f;
      acc[l] += d;
      acc2[l] += d * d;
    }
  }
  *sum = sum_of_lanes(acc);
  *sum_of_squares = sum_of_lanes(acc2);
}

void layer_norm_row(const LayerNormRows& job, int64_t r) {
  const int64_t n = job.cols;
  const float* x = job.x + r * n;
  float* y = job.y + r * n;
  const float* scale = job.scale;
  const float* bias = job.bias;
  // The float mean of the first pass is off by a few ulp of |mean|; the mean of the deviations
  // from it corrects that (the corrected two-pass algorithm), which matters when |mean| is far
  // above the standard deviation. Subtracting the two parts one after the other below keeps
  // x - mean exact where x is near the mean, as the reference's double is.
  const float rough_mean = n > 0 ? row_sum(x, n) / static_cast<float>(n) : 0.0f;
  float sum = 0, sum_of_squares = 0;
  deviation_sums(x, n, rough_mean, &sum, &sum_of_squares);
  // A row holding inf or NaN: no correction, so Mean comes out as the reference's (inf, NaN).
  const double correction =
      n > 0 && std::isfinite(rough_mean) ? static_cast<double>(sum) / static_cast<double>(n) : 0.0;
  const double variance =
      n > 0 ? std::max(0.0, static_cast<double>(sum_of_squares) / static_cast<double>(n) - correction * correction) : 0.0;
  const float shift = static_cast<float>(correction);
  const float inv_std = static_cast<float>(1.0 / std::sqrt(variance + job.epsilon));
  if (bias) {
    for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - rough_mean) - shift) * inv_std * scale[j] + bias[j];
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = ((x[j] - rough_mean) - shift) * inv_std * scale[j];
  }
  if (job.mean) job.mean[r] = static_cast<float>(static_cast<double>(rough_mean) + correction);
  if (job.inv_std) job.inv_std[r] = inv_std;
}

void rms_norm_row(const float* x, float* y, const float* scale, int64_t n, double epsilon) {
  const double mean_square = n > 0 ? static_cast<double>(row_sum_of_squares(x, n)) / static_cast<double>(n) : 0.0;
  const float inv_rms = static_cast<float>(1.0 / std::sqrt(mean_square + epsilon));
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * inv_rms * scale[j];
}

template <typename RowFn>
void for_each_row(int64_t rows, int64_t cols, RowFn&& row) {
  auto run = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) row(r);
  };
  if (rows * cols < kSerialElements) return run(0, rows, 0);
  ThreadPool::instance().parallel_ranges(rows, run);
}

// Whether `param` has the dims of x from `axis` on (a suffix of them with as many elements): the
// reference then pairs element j of each row with param[j] as well (LayerNormOp::map_params).
// Whether `param` has the shape of x's trailing dims from `axis`. A dim of x not known yet (-1:
// a dynamic engine lists its tactics on the shapes every profile shares) matches, as an unknown
// rank does in the tactic lists below: prepare checks the real shapes and runs the reference
// where they do not fit.
bool covers_trailing_dims(const edgert_tensor& param, const edgert_tensor& x, int64_t axis) {
  if (param.rank > x.rank - axis) return false;
  int64_t count = 1;
  bool known = true;
  for (int64_t a = axis; a < x.rank; ++a) {
    if (x.dims[a] < 0) known = false;
    else count *= x.dims[a];
  }
  for (int32_t i = 1; i <= param.rank; ++i)
    if (x.dims[x.rank - i] >= 0 && param.dims[param.rank - i] != x.dims[x.rank - i]) return false;
  return !known || numel(param) == count;
}

bool is_float32_or_unknown(const edgert_tensor& t) {
  return t.dtype == EDGERT_DTYPE_FLOAT32 || t.dtype == EDGERT_DTYPE_UNDEFINED;
}

}  // namespace

std::vector<TacticSpec> layer_norm_tactics(const edgert_node* node, const edgert_tensor* in) {
  const edgert_tensor& x = in[0];
  if (!is_float32_or_unknown(x) || node->num_inputs < 2) return {};
  Attributes attrs(node);
  // The rows kernel writes Mean and InvStdDev as float32: other stash types keep the reference.
  if (node->num_outputs > 1 && attrs.get_int("stash_type", 1) != EDGERT_DTYPE_FLOAT32) return {};
  const TacticSpec rows{kLayerNormRowsTactic, "f32-layer-norm-rows-portable"};
  if (x.rank < 0) return {rows};  // rank not known yet: prepare checks the real shape
  const int64_t axis = normalize_axis(attrs.get_int("axis", -1), x.rank);
  if (!covers_trailing_dims(in[1], x, axis)) return {};
  if (node->num_inputs > 2 && is_present(in[2]) && !covers_trailing_dims(in[2], x, axis)) return {};
  return {rows};
}

std::vector<TacticSpec> rms_norm_tactics(const edgert_node* node, const edgert_tensor* in) {
  const edgert_tensor& x = in[0];
  if (!is_float32_or_unknown(x) || node->num_inputs < 2 || x.rank == 0) return {};
  const TacticSpec rows{kRmsNormRowsTactic, "f32-rms-norm-rows-portable"};
  if (x.rank < 0) return {rows};  // rank not known yet: prepare checks the real shape
  const int64_t axis = normalize_axis(Attributes(node).get_int("axis", -1), x.rank);
  if (!covers_trailing_dims(in[1], x, axis)) return {};
  return {rows};
}

void layer_norm_rows(const LayerNormRows& job) {
  for_each_row(job.rows, job.cols, [&](int64_t r) { layer_norm_row(job, r); });
}

void rms_norm_rows(const float* x, float* y, const float* scale, int64_t rows, int64_t cols, double epsilon) {
  for_each_row(rows, cols, [&](int64_t r) { rms_norm_row(x + r * cols, y + r * cols, scale, cols, epsilon); });
}

}  // namespace edgert::cpu
