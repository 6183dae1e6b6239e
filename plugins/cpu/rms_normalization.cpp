// RMSNormalization (opset 23): Y = X / sqrt(mean(X^2) + epsilon) * Scale, the mean taken over
// the trailing axes from `axis` on.
//
// The mean is accumulated in double whatever stash_type asks for: stash_type only sets the
// least precision the statistics need, and the ONNX references compute them in float32.
// Float32 rows with Scale of the normalized dims' shape have the tactic f32-rms-norm-rows
// (fast/norm_rows.h).
#include <algorithm>
#include <cmath>

#include "broadcast.h"
#include "fast/norm_rows.h"
#include "kernel.h"

namespace edgert::cpu {
namespace {

class RmsNormalizationOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    if (node.num_inputs < 2 || !is_present(in[1]))
      fail(EDGERT_ERR_SHAPE, "input 'scale' is required (X, scale)");
    if (in[1].dtype != in[0].dtype)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "scale must have X's dtype %s, it has %s", dtype_name(in[0].dtype),
           dtype_name(in[1].dtype));
    int64_t rank = in[0].rank;
    if (rank < 1) fail(EDGERT_ERR_SHAPE, "X must have rank >= 1, it is a scalar");
    int64_t axis = normalize_axis(attrs.get_int("axis", -1), rank);
    epsilon_ = attrs.get_float("epsilon", 1e-5f);
    int64_t stash = attrs.get_int("stash_type", 1);
    auto stash_dtype = static_cast<edgert_dtype>(stash);
    if (stash_dtype != EDGERT_DTYPE_FLOAT32 && stash_dtype != EDGERT_DTYPE_FLOAT64 &&
        stash_dtype != EDGERT_DTYPE_FLOAT16 && stash_dtype != EDGERT_DTYPE_BFLOAT16)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "stash_type must be a floating point type, got %lld",
           static_cast<long long>(stash));

    Shape x_shape = shape_of(in[0]);
    Shape normalized(x_shape.begin() + axis, x_shape.end());
    rows_ = numel(Shape(x_shape.begin(), x_shape.begin() + axis));
    cols_ = numel(normalized);
    map_scale(shape_of(in[1]), normalized);
    set_output(out[0], in[0].dtype, x_shape);
    // rms_norm_tactics offered the tactic for this case only; a later shape outside it runs
    // the reference.
    rows_kernel_ = tactic() == kRmsNormRowsTactic && in[0].dtype == EDGERT_DTYPE_FLOAT32 && scale_index_.empty();
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (rows_kernel_) {
      rms_norm_rows(data_as<float>(in[0]), data_as<float>(out[0]), data_as<float>(in[1]), rows_, cols_, epsilon_);
      return;
    }
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* scale = data_as<T>(in[1]);
      for (int64_t r = 0; r < rows_; ++r) {
        const T* x = data_as<T>(in[0]) + r * cols_;
        T* y = data_as<T>(out[0]) + r * cols_;
        double sq = 0;
        for (int64_t j = 0; j < cols_; ++j) {
          double v = static_cast<C>(x[j]);
          sq += v * v;
        }
        double inv_rms = 1.0 / std::sqrt((cols_ ? sq / cols_ : 0) + epsilon_);
        for (int64_t j = 0; j < cols_; ++j) {
          double s = static_cast<C>(scale[scale_index_.empty() ? j : scale_index_[j]]);
          y[j] = static_cast<T>(static_cast<C>(static_cast<C>(x[j]) * inv_rms * s));
        }
      }
    });
  }

 private:
  // Scale broadcasts (unidirectionally) to the normalized shape; an empty map means it already
  // has that many elements in that order, so element j is scale[j].
  void map_scale(const Shape& s, const Shape& normalized) {
    scale_index_.clear();
    if (numel(s) == numel(normalized) && s.size() <= normalized.size() &&
        std::equal(s.begin(), s.end(), normalized.end() - s.size()))
      return;
    if (s.size() > normalized.size() || broadcast_shapes({s, normalized}) != normalized)
      fail(EDGERT_ERR_SHAPE, "scale of shape %s does not broadcast to the normalized shape %s (X's axes from 'axis' on)",
           shape_string(s).c_str(), shape_string(normalized).c_str());
    for (BroadcastIterator it(normalized, {s}); !it.done(); it.next()) scale_index_.push_back(it.offset(0));
  }

  double epsilon_ = 1e-5;
  int64_t rows_ = 0, cols_ = 0;
  bool rows_kernel_ = false;  // the f32-rms-norm-rows tactic
  std::vector<int64_t> scale_index_;
};

}  // namespace

void register_rms_normalization_kernels(KernelRegistry& r) {
  r.add<RmsNormalizationOp>("RMSNormalization", "ref-rms-normalization", nullptr, rms_norm_tactics);
}

}  // namespace edgert::cpu
