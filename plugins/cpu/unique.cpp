// Unique: distinct elements (or slices along `axis`), with first-occurrence indices, inverse
// indices and counts. Output shapes depend on the values, so prepare does the whole
// computation and execute only writes what prepare cached.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernel.h"

namespace edgert::cpu {
namespace {

// -1, 0, 1 like a three-way compare; NaNs sort after everything and equal each other (numpy).
template <typename T>
int compare_values(T a, T b) {
  if constexpr (is_float_like_v<T>) {
    using C = compute_t<T>;
    const C x = static_cast<C>(a), y = static_cast<C>(b);
    const bool nx = std::isnan(static_cast<double>(x)), ny = std::isnan(static_cast<double>(y));
    if (nx || ny) return nx == ny ? 0 : (nx ? 1 : -1);
    return x < y ? -1 : (y < x ? 1 : 0);
  } else {
    return a < b ? -1 : (b < a ? 1 : 0);
  }
}

class UniqueOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    const edgert_tensor& x = in[0];
    info.data_dependent = 1;
    const bool sorted = attrs.get_int("sorted", 1) != 0;
    has_axis_ = attrs.has("axis");
    Shape shape = shape_of(x);
    outer_ = 1;
    inner_ = 1;
    if (has_axis_) {
      if (x.rank < 1) fail(EDGERT_ERR_SHAPE, "axis given but X is a scalar");
      axis_ = normalize_axis(attrs.get_int("axis", 0), x.rank);
      for (int64_t i = 0; i < axis_; ++i) outer_ *= shape[i];
      for (int64_t i = axis_ + 1; i < x.rank; ++i) inner_ *= shape[i];
      slices_ = shape[axis_];
    } else {
      slices_ = numel(x);
    }
    if (!x.data && numel(x) > 0) fail(EDGERT_ERR_NEEDS_DATA, "values of X are not known yet");

    // Sort slice numbers by content (stable, so each run of equal slices starts with its first
    // occurrence), then group runs.
    std::vector<int64_t> order(static_cast<size_t>(slices_));
    std::iota(order.begin(), order.end(), 0);
    dispatch(x.dtype, kAll, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = data_as<T>(x);
      const int64_t n = slices_, inner = inner_, outer = outer_;
      auto cmp = [&](int64_t a, int64_t b) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            int c = compare_values<T>(p[(o * n + a) * inner + i], p[(o * n + b) * inner + i]);
            if (c) return c;
          }
        return 0;
      };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      first_.clear();
      counts_.clear();
      inverse_.assign(static_cast<size_t>(slices_), 0);
      for (size_t k = 0; k < order.size(); ++k) {
        if (k == 0 || cmp(order[k - 1], order[k]) != 0) {
          first_.push_back(order[k]);
          counts_.push_back(0);
        }
        ++counts_.back();
        inverse_[static_cast<size_t>(order[k])] = static_cast<int64_t>(first_.size()) - 1;
      }
    }, "X");

    if (!sorted) {
      // Renumber the groups by first occurrence.
      std::vector<int64_t> by_first(first_.size());
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first_[a] < first_[b]; });
      std::vector<int64_t> rank(first_.size()), first(first_.size()), counts(first_.size());
      for (size_t k = 0; k < by_first.size(); ++k) {
        rank[static_cast<size_t>(by_first[k])] = static_cast<int64_t>(k);
        first[k] = first_[static_cast<size_t>(by_first[k])];
        counts[k] = counts_[static_cast<size_t>(by_first[k])];
      }
      for (int64_t& v : inverse_) v = rank[static_cast<size_t>(v)];
      first_ = std::move(first);
      counts_ = std::move(counts);
    }

    const int64_t unique = static_cast<int64_t>(first_.size());
    Shape y_shape{unique};
    if (has_axis_) {
      y_shape = shape;
      y_shape[axis_] = unique;
    }
    set_output(out[0], x.dtype, y_shape);
    if (node.num_outputs > 1) set_output(out[1], EDGERT_DTYPE_INT64, {unique});
    if (node.num_outputs > 2) set_output(out[2], EDGERT_DTYPE_INT64, {slices_});
    if (node.num_outputs > 3) set_output(out[3], EDGERT_DTYPE_INT64, {unique});
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const size_t elem = dtype_size(in[0].dtype);
    const int64_t unique = static_cast<int64_t>(first_.size());
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    const size_t run = static_cast<size_t>(inner_) * elem;
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t u = 0; u < unique; ++u)
        if (run)
          std::memcpy(dst + static_cast<size_t>(o * unique + u) * run,
                      src + static_cast<size_t>(o * slices_ + first_[static_cast<size_t>(u)]) * run, run);
    auto write = [&](int i, const std::vector<int64_t>& v) {
      if (node.num_outputs > i && out[i].data && !v.empty())
        std::memcpy(out[i].data, v.data(), v.size() * sizeof(int64_t));
    };
    write(1, first_);
    write(2, inverse_);
    write(3, counts_);
  }

 private:
  bool has_axis_ = false;
  int64_t axis_ = 0, outer_ = 1, inner_ = 1, slices_ = 0;
  std::vector<int64_t> first_, inverse_, counts_;  // computed by prepare
};

}  // namespace

void register_unique_kernels(KernelRegistry& r) { r.add<UniqueOp>("Unique", "ref-unique"); }

}  // namespace edgert::cpu
