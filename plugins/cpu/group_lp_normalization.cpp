// GroupNormalization (opset 18 and 21) and LpNormalization (opset 1).
//
// Statistics and norms are accumulated in double, like the other normalizations
// (normalization.cpp): within the tolerance of the float32 numpy references for any order.
#include <cmath>

#include "kernel.h"

namespace edgert::cpu {
namespace {

// X [N, C, ...] normalized over each group of C / num_groups channels (and all spatial
// positions), then scaled and shifted per channel (opset 21) or per group (opset 18).
class GroupNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kFloats, [](auto) {}, "X");
    if (!attrs.has("num_groups")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'num_groups' is required");
    groups_ = attrs.get_int("num_groups", 0);
    epsilon_ = attrs.get_float("epsilon", 1e-5f);
    const edgert_tensor& x = in[0];
    if (x.rank < 2)
      fail(EDGERT_ERR_SHAPE, "X must have rank >= 2 (N x C x ...), its shape is %s", shape_string(shape_of(x)).c_str());
    n_ = x.dims[0];
    channels_ = x.dims[1];
    if (groups_ <= 0 || channels_ % groups_ != 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "num_groups (%lld) must be positive and divide the %lld channels",
           static_cast<long long>(groups_), static_cast<long long>(channels_));
    spatial_ = 1;
    for (int i = 2; i < x.rank; ++i) spatial_ *= x.dims[i];
    // Opset 18 took one scale and bias per group; opset 21 takes one per channel.
    per_channel_ = node.opset >= 21;
    const int64_t expected = per_channel_ ? channels_ : groups_;
    const char* names[] = {"scale", "bias"};
    for (int i = 1; i <= 2; ++i) {
      if (in[i].dtype != x.dtype)
        fail(EDGERT_ERR_SHAPE, "%s has dtype %s, X has %s", names[i - 1], dtype_name(in[i].dtype), dtype_name(x.dtype));
      if (in[i].rank != 1 || in[i].dims[0] != expected)
        fail(EDGERT_ERR_SHAPE, "%s must have shape [%lld] (one per %s), its shape is %s", names[i - 1],
             static_cast<long long>(expected), per_channel_ ? "channel" : "group",
             shape_string(shape_of(in[i])).c_str());
    }
    set_output(out[0], x.dtype, shape_of(x));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch_only<kFloats>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* scale = data_as<const T>(in[1]);
      const T* bias = data_as<const T>(in[2]);
      const int64_t group_channels = channels_ / groups_;
      const int64_t count = group_channels * spatial_;
      for (int64_t b = 0; b < n_; ++b) {
        for (int64_t g = 0; g < groups_; ++g) {
          const int64_t first = (b * channels_ + g * group_channels) * spatial_;
          const T* x = data_as<const T>(in[0]) + first;
          T* y = data_as<T>(out[0]) + first;
          double sum = 0, sq = 0;
          for (int64_t i = 0; i < count; ++i) sum += static_cast<C>(x[i]);
          const double mean = count ? sum / static_cast<double>(count) : 0;
          for (int64_t i = 0; i < count; ++i) {
            double d = static_cast<C>(x[i]) - mean;
            sq += d * d;
          }
          const double inv_std = 1.0 / std::sqrt((count ? sq / static_cast<double>(count) : 0) + epsilon_);
          for (int64_t c = 0; c < group_channels; ++c) {
            const int64_t p = per_channel_ ? g * group_channels + c : g;
            const double s = static_cast<C>(scale[p]), o = static_cast<C>(bias[p]);
            for (int64_t i = c * spatial_; i < (c + 1) * spatial_; ++i)
              y[i] = static_cast<T>(static_cast<C>((static_cast<C>(x[i]) - mean) * inv_std * s + o));
          }
        }
      }
    }, "X");
  }

 private:
  int64_t groups_ = 1, n_ = 0, channels_ = 0, spatial_ = 1;
  double epsilon_ = 1e-5;
  bool per_channel_ = true;
};

// x / ||x||_p along one axis (p = 1 or 2). A zero norm gives 0, not NaN, as the ONNX tests
// expect.
class LpNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kFloats, [](auto) {}, "input");
    p_ = attrs.get_int("p", 2);
    if (p_ != 1 && p_ != 2) fail(EDGERT_ERR_INVALID_ARGUMENT, "p must be 1 or 2, got %lld", static_cast<long long>(p_));
    if (in[0].rank < 1) fail(EDGERT_ERR_SHAPE, "input must have rank >= 1, it is a scalar");
    const int64_t axis = normalize_axis(attrs.get_int("axis", -1), in[0].rank);
    outer_ = n_ = inner_ = 1;
    for (int64_t i = 0; i < in[0].rank; ++i) {
      if (i < axis) outer_ *= in[0].dims[i];
      else if (i == axis) n_ = in[0].dims[i];
      else inner_ *= in[0].dims[i];
    }
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch_only<kFloats>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<const T>(in[0]);
      T* y = data_as<T>(out[0]);
      for (int64_t o = 0; o < outer_; ++o) {
        for (int64_t i = 0; i < inner_; ++i) {
          const int64_t base = o * n_ * inner_ + i;
          double acc = 0;
          for (int64_t k = 0; k < n_; ++k) {
            double v = static_cast<C>(x[base + k * inner_]);
            acc += p_ == 1 ? std::fabs(v) : v * v;
          }
          const double norm = p_ == 1 ? acc : std::sqrt(acc);
          for (int64_t k = 0; k < n_; ++k) {
            const int64_t at = base + k * inner_;
            y[at] = static_cast<T>(static_cast<C>(norm == 0 ? 0.0 : static_cast<C>(x[at]) / norm));
          }
        }
      }
    }, "input");
  }

 private:
  int64_t p_ = 2, outer_ = 1, n_ = 1, inner_ = 1;
};

}  // namespace

void register_group_lp_normalization_kernels(KernelRegistry& r) {
  r.add<GroupNormOp>("GroupNormalization", "ref-group-normalization");
  r.add<LpNormOp>("LpNormalization", "ref-lp-normalization");
}

}  // namespace edgert::cpu
