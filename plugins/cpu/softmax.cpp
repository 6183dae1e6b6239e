// Softmax, LogSoftmax, Hardmax.
//
// Opset < 13 coerces the input to 2-D at `axis` (default 1) and normalises over everything from
// `axis` on; opset >= 13 normalises over the single axis `axis` (default -1). Both are an
// outer x n x inner walk: the old form is the new one with n = prod(dims[axis:]), inner = 1.
// The reference computes in double. Float32 Softmax over a contiguous axis (attention's rows)
// has the tactic f32-softmax-rows: the float exp of the activations (a few ulp), rows spread
// over the thread pool.
#include <algorithm>
#include <cmath>
#include <limits>

#include "gemm/sgemm.h"
#include "kernel.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

constexpr int64_t kSoftmaxRows = 60;

std::vector<TacticSpec> softmax_tactics(const edgert_node*, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_FLOAT32 && in[0].dtype != EDGERT_DTYPE_UNDEFINED) return {};
  return {{kSoftmaxRows, "f32-softmax-rows-portable"}};
}

// Softmax of each of `rows` rows of n floats.
void softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
  ThreadPool::instance().parallel_ranges(rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) m = std::max(m, xr[j]);
      for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] - m;
      gemm::exp_rows(yr, n);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += yr[j];
      const float scale = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) yr[j] *= scale;
    }
  });
}

template <SoftmaxKind K>
class SoftmaxOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    dispatch(in[0].dtype, kFloats, [](auto) {}, "input");
    bool legacy = node.opset < 13;
    int64_t rank = in[0].rank;
    int64_t axis = Attributes(&node).get_int("axis", legacy ? 1 : -1);
    // A scalar has nothing to normalise over; treat it as one element.
    axis = rank == 0 ? 0 : normalize_axis(axis, rank);
    outer_ = n_ = inner_ = 1;
    for (int64_t i = 0; i < rank; ++i) {
      if (i < axis) outer_ *= in[0].dims[i];
      else if (i == axis || legacy) n_ *= in[0].dims[i];
      else inner_ *= in[0].dims[i];
    }
    set_output(out[0], in[0].dtype, shape_of(in[0]));
    rows_ = K == SoftmaxKind::Softmax && tactic() == kSoftmaxRows && in[0].dtype == EDGERT_DTYPE_FLOAT32 && inner_ == 1;
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (rows_) {
      // A row with NaN, or +inf, gives NaN as the reference does (inf - inf, exp of NaN).
      softmax_rows(data_as<float>(in[0]), data_as<float>(out[0]), outer_, n_);
      return;
    }
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      for (int64_t o = 0; o < outer_; ++o) {
        for (int64_t i = 0; i < inner_; ++i) {
          int64_t base = o * n_ * inner_ + i;
          auto at = [&](int64_t j) { return base + j * inner_; };
          // The maximum (first one for Hardmax) shifts exp() out of overflow.
          double m = -std::numeric_limits<double>::infinity();
          int64_t arg = 0;
          for (int64_t j = 0; j < n_; ++j) {
            double v = static_cast<C>(x[at(j)]);
            if (v > m || (j == 0)) {
              m = v;
              arg = j;
            }
          }
          if constexpr (K == SoftmaxKind::Hardmax) {
            for (int64_t j = 0; j < n_; ++j) y[at(j)] = static_cast<T>(static_cast<C>(j == arg ? 1 : 0));
          } else {
            double sum = 0;
            for (int64_t j = 0; j < n_; ++j) sum += std::exp(static_cast<double>(static_cast<C>(x[at(j)])) - m);
            double log_sum = std::log(sum);
            for (int64_t j = 0; j < n_; ++j) {
              double shifted = static_cast<double>(static_cast<C>(x[at(j)])) - m;
              double r = K == SoftmaxKind::Softmax ? std::exp(shifted) / sum : shifted - log_sum;
              y[at(j)] = static_cast<T>(static_cast<C>(r));
            }
          }
        }
      }
    });
  }

 private:
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
  bool rows_ = false;  // the f32-softmax-rows tactic
};

}  // namespace

void register_softmax_kernels(KernelRegistry& r) {
  r.add<SoftmaxOp<SoftmaxKind::Softmax>>("Softmax", "ref-softmax", nullptr, softmax_tactics);
  r.add<SoftmaxOp<SoftmaxKind::LogSoftmax>>("LogSoftmax", "ref-log-softmax");
  r.add<SoftmaxOp<SoftmaxKind::Hardmax>>("Hardmax", "ref-hardmax");
}

}  // namespace edgert::cpu
