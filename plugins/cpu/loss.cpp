// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (forward only).
//
// Both see input as N x C x D (D = product of the trailing dims, 1 when there are none) and
// target as N x D. Per element: loss = -weight[t] * logp[n, t, d], or 0 where t == ignore_index.
// reduction "mean" divides by the sum of the applied weights, as the ONNX spec and ONNX Runtime do.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernel.h"

namespace edgert::cpu {
namespace {

enum class Reduction { None, Sum, Mean };

int64_t label_at(const edgert_tensor& t, int64_t i) {
  return t.dtype == EDGERT_DTYPE_INT64 ? data_as<int64_t>(t)[i] : data_as<int32_t>(t)[i];
}

template <bool kSoftmax>
class LossOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    const edgert_tensor& x = in[0];
    const edgert_tensor& target = in[1];
    dispatch(x.dtype, kFloats, [](auto) {}, "input");
    std::string reduction = attrs.get_string("reduction", "mean");
    if (reduction == "none") reduction_ = Reduction::None;
    else if (reduction == "sum") reduction_ = Reduction::Sum;
    else if (reduction == "mean") reduction_ = Reduction::Mean;
    else fail(EDGERT_ERR_INVALID_ARGUMENT, "reduction must be none, sum or mean, got '%s'", reduction.c_str());
    has_ignore_ = attrs.has("ignore_index");
    ignore_index_ = attrs.get_int("ignore_index", 0);

    if (x.rank < 2) fail(EDGERT_ERR_SHAPE, "input must have rank >= 2 (N x C x ...), its shape is %s",
                         shape_string(shape_of(x)).c_str());
    if (target.dtype != EDGERT_DTYPE_INT32 && target.dtype != EDGERT_DTYPE_INT64)
      fail(EDGERT_ERR_SHAPE, "target must be int32 or int64, got %s", dtype_name(target.dtype));
    Shape expected = shape_of(x);
    expected.erase(expected.begin() + 1);
    if (shape_of(target) != expected)
      fail(EDGERT_ERR_SHAPE, "target shape %s does not match input shape %s without its class axis (%s)",
           shape_string(shape_of(target)).c_str(), shape_string(shape_of(x)).c_str(),
           shape_string(expected).c_str());
    n_ = x.dims[0];
    c_ = x.dims[1];
    d_ = 1;
    for (int i = 2; i < x.rank; ++i) d_ *= x.dims[i];
    has_weight_ = node.num_inputs > 2 && is_present(in[2]);
    if (has_weight_) {
      if (in[2].dtype != x.dtype) fail(EDGERT_ERR_SHAPE, "weight dtype %s differs from input dtype %s",
                                       dtype_name(in[2].dtype), dtype_name(x.dtype));
      if (in[2].rank != 1 || in[2].dims[0] != c_)
        fail(EDGERT_ERR_SHAPE, "weight must have shape [%lld], got %s", static_cast<long long>(c_),
             shape_string(shape_of(in[2])).c_str());
    }
    set_output(out[0], x.dtype, reduction_ == Reduction::None ? expected : Shape{});
    if (kSoftmax && node.num_outputs > 1) set_output(out[1], x.dtype, shape_of(x));
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      const T* weight = has_weight_ ? data_as<T>(in[2]) : nullptr;
      T* loss = data_as<T>(out[0]);
      T* log_prob = kSoftmax && node.num_outputs > 1 ? data_as<T>(out[1]) : nullptr;
      double sum = 0, weight_sum = 0;
      for (int64_t n = 0; n < n_; ++n) {
        for (int64_t d = 0; d < d_; ++d) {
          const T* p = x + n * c_ * d_ + d;  // class k at p[k * d_]
          // log-softmax over the classes: x - max - log(sum(exp(x - max))).
          double shift = 0;
          if constexpr (kSoftmax) {
            double m = -std::numeric_limits<double>::infinity();
            for (int64_t k = 0; k < c_; ++k) m = std::max(m, static_cast<double>(static_cast<C>(p[k * d_])));
            double s = 0;
            for (int64_t k = 0; k < c_; ++k) s += std::exp(static_cast<C>(p[k * d_]) - m);
            shift = m + std::log(s);
            if (log_prob)
              for (int64_t k = 0; k < c_; ++k)
                log_prob[n * c_ * d_ + d + k * d_] = static_cast<T>(static_cast<C>(static_cast<C>(p[k * d_]) - shift));
          }
          int64_t t = label_at(in[1], n * d_ + d);
          double value = 0, w = 0;
          if (!(has_ignore_ && t == ignore_index_)) {
            if (t < 0 || t >= c_)
              fail(EDGERT_ERR_INVALID_ARGUMENT, "target value %lld at position %lld is outside [0, %lld)",
                   static_cast<long long>(t), static_cast<long long>(n * d_ + d), static_cast<long long>(c_));
            w = weight ? static_cast<double>(static_cast<C>(weight[t])) : 1.0;
            value = -(static_cast<double>(static_cast<C>(p[t * d_])) - shift) * w;
          }
          if (reduction_ == Reduction::None) loss[n * d_ + d] = static_cast<T>(static_cast<C>(value));
          sum += value;
          weight_sum += w;
        }
      }
      if (reduction_ == Reduction::Sum) loss[0] = static_cast<T>(static_cast<C>(sum));
      else if (reduction_ == Reduction::Mean) loss[0] = static_cast<T>(static_cast<C>(sum / weight_sum));
    });
  }

 private:
  Reduction reduction_ = Reduction::Mean;
  bool has_ignore_ = false, has_weight_ = false;
  int64_t ignore_index_ = 0;
  int64_t n_ = 0, c_ = 0, d_ = 1;
};

}  // namespace

void register_loss_kernels(KernelRegistry& r) {
  r.add<LossOp<false>>("NegativeLogLikelihoodLoss", "ref-negative-log-likelihood-loss");
  r.add<LossOp<true>>("SoftmaxCrossEntropyLoss", "ref-softmax-cross-entropy-loss");
}

}  // namespace edgert::cpu
