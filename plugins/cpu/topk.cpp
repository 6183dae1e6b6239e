// TopK: the k largest (or smallest) elements along an axis, with their indices.
//
// Equal values keep the smaller index first, so the result is deterministic whether or not
// `sorted` is set (sorted=0 leaves the order unspecified; sorted order is a valid answer).
#include <algorithm>
#include <cmath>

#include "kernel.h"

namespace edgert::cpu {
namespace {

class TopKOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "X");
    int64_t k;
    if (node.opset < 10) {
      k = attrs.get_int("k", -1);
    } else {
      if (node.num_inputs < 2 || !is_present(in[1])) fail(EDGERT_ERR_INVALID_ARGUMENT, "input K is required");
      info.data_dependent = 1;  // the output shape follows the value of K
      std::vector<int64_t> values = read_ints(in[1], "K");
      if (values.size() != 1) fail(EDGERT_ERR_SHAPE, "K must hold one value, it holds %zu", values.size());
      k = values[0];
    }
    largest_ = attrs.get_int("largest", 1) != 0;
    if (in[0].rank == 0) fail(EDGERT_ERR_SHAPE, "X must have rank >= 1");
    int64_t axis = normalize_axis(attrs.get_int("axis", -1), in[0].rank);
    outer_ = inner_ = 1;
    for (int64_t i = 0; i < in[0].rank; ++i) {
      if (i < axis) outer_ *= in[0].dims[i];
      else if (i > axis) inner_ *= in[0].dims[i];
    }
    n_ = in[0].dims[axis];
    if (k < 0 || k > n_)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "k = %lld must be in [0, %lld] (the size of axis %lld)",
           static_cast<long long>(k), static_cast<long long>(n_), static_cast<long long>(axis));
    k_ = k;
    Shape shape = shape_of(in[0]);
    shape[axis] = k;
    set_output(out[0], in[0].dtype, shape);
    set_output(out[1], EDGERT_DTYPE_INT64, shape);
    info.workspace_bytes = static_cast<size_t>(n_) * sizeof(int64_t);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    dispatch(in[0].dtype, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* values = data_as<T>(out[0]);
      int64_t* indices = data_as<int64_t>(out[1]);
      int64_t* order = static_cast<int64_t*>(workspace);
      for (int64_t o = 0; o < outer_; ++o) {
        for (int64_t i = 0; i < inner_; ++i) {
          const T* p = x + o * n_ * inner_ + i;
          for (int64_t j = 0; j < n_; ++j) order[j] = j;
          // A strict total order: NaN ranks above every number (first when largest, last when
          // smallest, like numpy's sort), ties break on the smaller index.
          auto before = [&](int64_t a, int64_t b) {
            C va = static_cast<C>(p[a * inner_]), vb = static_cast<C>(p[b * inner_]);
            if constexpr (is_float_like_v<T>) {
              bool na = std::isnan(static_cast<double>(va)), nb = std::isnan(static_cast<double>(vb));
              if (na || nb) {
                if (na && nb) return a < b;
                return largest_ ? na : nb;
              }
            }
            if (va != vb) return largest_ ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(order, order + k_, order + n_, before);
          for (int64_t j = 0; j < k_; ++j) {
            int64_t at = (o * k_ + j) * inner_ + i;
            values[at] = p[order[j] * inner_];
            indices[at] = order[j];
          }
        }
      }
    });
  }

 private:
  bool largest_ = true;
  int64_t outer_ = 1, inner_ = 1, n_ = 0, k_ = 0;
};

}  // namespace

void register_topk_kernels(KernelRegistry& r) { r.add<TopKOp>("TopK", "ref-topk"); }

}  // namespace edgert::cpu
