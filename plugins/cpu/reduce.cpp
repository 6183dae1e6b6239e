// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax/ArgMin,
// CumSum and CumProd.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "fast/pool_rows.h"
#include "kernel.h"
#include "strided_walk.h"

namespace edgert::cpu {
namespace {

// The axes a Reduce* node reduces, from its attribute or (ReduceSum from opset 13, the others
// from 18) its second input; `known` false when that input's values are not known yet.
std::vector<int64_t> reduce_axes(const edgert_node& node, const edgert_tensor* in, bool sum, bool* known) {
  *known = true;
  const bool axes_is_input = (sum && node.opset >= 13) || node.opset >= 18;
  if (!axes_is_input) return Attributes(&node).get_ints("axes");
  if (node.num_inputs < 2 || !is_present(in[1])) return {};
  if (!in[1].data) {
    *known = false;
    return {};
  }
  return read_ints(in[1], "axes");
}

// ReduceMean over the trailing axes of a float32 tensor (the global average of ShuffleNet's
// head: [N, C, H, W] over H and W) is GlobalAveragePool's row mean: the rows tactic.
std::vector<TacticSpec> reduce_mean_tactics(const edgert_node* node, const edgert_tensor* inputs) {
  const edgert_tensor& x = inputs[0];
  if (x.dtype != EDGERT_DTYPE_FLOAT32 || x.rank < 1) return {};
  bool known = false;
  const std::vector<int64_t> axes = reduce_axes(*node, inputs, false, &known);
  if (!known || axes.empty()) return {};  // empty: everything, or nothing with noop_with_empty_axes
  bool reduced[EDGERT_MAX_RANK] = {};
  for (int64_t a : axes) {
    if (a < -x.rank || a >= x.rank) return {};
    reduced[a < 0 ? a + x.rank : a] = true;
  }
  for (int i = 1; i < x.rank; ++i)
    if (reduced[i - 1] && !reduced[i]) return {};  // not a suffix of the dims
  return {{kReduceMeanRowsTactic, "f32-reduce-mean-rows-portable"}};
}

// outer x n x inner view of a shape around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView axis_view(const edgert_tensor& t, int64_t axis) {
  AxisView v;
  for (int64_t i = 0; i < t.rank; ++i) {
    if (i < axis) v.outer *= t.dims[i];
    else if (i == axis) v.n = t.dims[i];
    else v.inner *= t.dims[i];
  }
  return v;
}

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Shared by every Reduce* op; the kind is a runtime value so each dtype is instantiated once.
class ReduceBase : public Op {
 public:
  explicit ReduceBase(ReduceKind kind) : kind_(kind) {}

  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, allowed_dtypes(), [](auto) {}, "data");
    bool keepdims = attrs.get_int("keepdims", 1) != 0;
    bool noop_with_empty_axes = attrs.get_int("noop_with_empty_axes", 0) != 0;
    bool known = false;
    std::vector<int64_t> axes = reduce_axes(node, in, kind_ == ReduceKind::Sum, &known);
    if (!known) {
      info.data_dependent = 1;  // the output shape follows the values of axes
      axes = read_ints(in[1], "axes");  // reports that the values are needed
    } else if (node.num_inputs > 1 && is_present(in[1]) &&
               ((kind_ == ReduceKind::Sum && node.opset >= 13) || node.opset >= 18)) {
      info.data_dependent = 1;
    }

    int rank = in[0].rank;
    bool reduced[EDGERT_MAX_RANK] = {};
    identity_ = axes.empty() && noop_with_empty_axes;
    if (axes.empty()) {
      if (!identity_)
        for (int i = 0; i < rank; ++i) reduced[i] = true;
    } else {
      for (int64_t a : axes) reduced[normalize_axis(a, rank, "axes entry")] = true;
    }

    Shape out_shape;
    kept_rank_ = red_rank_ = 0;
    int64_t stride = 1;
    int64_t strides[EDGERT_MAX_RANK];
    for (int i = rank - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= in[0].dims[i];
    }
    red_count_ = 1;
    for (int i = 0; i < rank; ++i) {
      if (reduced[i]) {
        red_dims_[red_rank_] = in[0].dims[i];
        red_strides_[red_rank_++] = strides[i];
        red_count_ *= in[0].dims[i];
        if (keepdims) out_shape.push_back(1);
      } else {
        kept_dims_[kept_rank_] = in[0].dims[i];
        kept_strides_[kept_rank_++] = strides[i];
        out_shape.push_back(in[0].dims[i]);
      }
    }
    if (identity_) out_shape = shape_of(in[0]);
    set_output(out[0], in[0].dtype, out_shape);
    // The tactic was offered only for trailing axes (reduce_mean_tactics).
    rows_ = tactic() == kReduceMeanRowsTactic && kind_ == ReduceKind::Mean && !identity_;
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (identity_) {
      if (numel(in[0]) > 0) std::memcpy(out[0].data, in[0].data, numel(in[0]) * dtype_size(in[0].dtype));
      return;
    }
    if (rows_) {
      const int64_t rows = numel(out[0]);
      global_average_rows(data_as<float>(in[0]), data_as<float>(out[0]), rows, rows ? numel(in[0]) / rows : 0);
      return;
    }
    dispatch(in[0].dtype, allowed_dtypes(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      run<T>(data_as<T>(in[0]), data_as<T>(out[0]));
    });
  }

 private:
  // ReduceMax and ReduceMin take bool from opset 20 (any / all); the others are arithmetic.
  unsigned allowed_dtypes() const {
    return kind_ == ReduceKind::Max || kind_ == ReduceKind::Min ? kNumeric | kBool : kNumeric;
  }

  template <typename T>
  void run(const T* x, T* y) {
    using C = compute_t<T>;
    constexpr bool kFloat = is_float_like_v<T>;
    // Floats accumulate in double (closer to numpy's pairwise sums); integers in 64 bits.
    using A = std::conditional_t<kFloat, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
    auto val = [&](int64_t i) { return static_cast<C>(x[i]); };
    auto store = [](double v) { return static_cast<T>(static_cast<C>(v)); };
    int64_t o = 0;
    strided_walk(kept_dims_, kept_strides_, kept_rank_, 0, [&](int64_t base) {
      T result{};
      switch (kind_) {
        case ReduceKind::Sum:
        case ReduceKind::Mean:
        case ReduceKind::SumSquare:
        case ReduceKind::L1:
        case ReduceKind::Prod: {
          A acc = kind_ == ReduceKind::Prod ? A(1) : A(0);
          strided_walk(red_dims_, red_strides_, red_rank_, base, [&](int64_t i) {
            A v = static_cast<A>(val(i));
            if (kind_ == ReduceKind::Prod) acc *= v;
            else if (kind_ == ReduceKind::SumSquare) acc += v * v;
            else if (kind_ == ReduceKind::L1) {
              if constexpr (std::is_signed_v<A>) acc += v < 0 ? -v : v;
              else acc += v;
            } else acc += v;
          });
          if (kind_ == ReduceKind::Mean) {
            if constexpr (kFloat) result = store(acc / static_cast<double>(red_count_));
            else result = static_cast<T>(red_count_ ? acc / static_cast<A>(red_count_) : 0);
          } else {
            result = static_cast<T>(static_cast<C>(acc));
          }
          break;
        }
        case ReduceKind::L2:
        case ReduceKind::LogSum: {
          double acc = 0;
          strided_walk(red_dims_, red_strides_, red_rank_, base, [&](int64_t i) {
            double v = static_cast<double>(val(i));
            acc += kind_ == ReduceKind::L2 ? v * v : v;
          });
          result = store(kind_ == ReduceKind::L2 ? std::sqrt(acc) : std::log(acc));
          break;
        }
        case ReduceKind::LogSumExp: {
          // Shift by the maximum so exp() cannot overflow.
          double m = -std::numeric_limits<double>::infinity();
          strided_walk(red_dims_, red_strides_, red_rank_, base, [&](int64_t i) {
            double v = static_cast<double>(val(i));
            if (v > m || std::isnan(v)) m = v;
          });
          if (std::isinf(m) || std::isnan(m)) {
            result = store(m);
          } else {
            double acc = 0;
            strided_walk(red_dims_, red_strides_, red_rank_, base,
                 [&](int64_t i) { acc += std::exp(static_cast<double>(val(i)) - m); });
            result = store(m + std::log(acc));
          }
          break;
        }
        case ReduceKind::Max:
        case ReduceKind::Min: {
          bool is_max = kind_ == ReduceKind::Max;
          C best;
          if constexpr (kFloat)
            best = static_cast<C>(is_max ? -std::numeric_limits<double>::infinity()
                                         : std::numeric_limits<double>::infinity());
          else
            best = is_max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
          bool nan = false;
          strided_walk(red_dims_, red_strides_, red_rank_, base, [&](int64_t i) {
            C v = val(i);
            if constexpr (kFloat) nan = nan || std::isnan(static_cast<double>(v));
            if (is_max ? v > best : v < best) best = v;
          });
          if constexpr (kFloat)
            if (nan) best = static_cast<C>(NAN);  // numpy propagates NaN
          result = static_cast<T>(best);
          break;
        }
      }
      y[o++] = result;
    });
  }

  ReduceKind kind_;
  bool identity_ = false;
  bool rows_ = false;  // f32-reduce-mean-rows-portable
  int kept_rank_ = 0, red_rank_ = 0;
  int64_t red_count_ = 1;
  int64_t kept_dims_[EDGERT_MAX_RANK] = {}, kept_strides_[EDGERT_MAX_RANK] = {};
  int64_t red_dims_[EDGERT_MAX_RANK] = {}, red_strides_[EDGERT_MAX_RANK] = {};
};

template <ReduceKind K>
class ReduceOp : public ReduceBase {
 public:
  ReduceOp() : ReduceBase(K) {}
};

// ArgMax / ArgMin along one axis; ties go to the first index unless select_last_index.
template <bool kMax>
class ArgOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "data");
    axis_ = normalize_axis(attrs.get_int("axis", 0), in[0].rank);
    bool keepdims = attrs.get_int("keepdims", 1) != 0;
    select_last_ = attrs.get_int("select_last_index", 0) != 0;
    view_ = axis_view(in[0], axis_);
    if (view_.n == 0 && view_.outer * view_.inner > 0)
      fail(EDGERT_ERR_SHAPE, "cannot take an arg%s over an empty axis %lld", kMax ? "max" : "min",
           static_cast<long long>(axis_));
    Shape shape = shape_of(in[0]);
    if (keepdims) shape[axis_] = 1;
    else shape.erase(shape.begin() + axis_);
    set_output(out[0], EDGERT_DTYPE_INT64, shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      int64_t* y = data_as<int64_t>(out[0]);
      for (int64_t o = 0; o < view_.outer; ++o) {
        for (int64_t i = 0; i < view_.inner; ++i) {
          const T* p = x + o * view_.n * view_.inner + i;
          C best = static_cast<C>(p[0]);
          int64_t index = 0;
          for (int64_t j = 1; j < view_.n; ++j) {
            C v = static_cast<C>(p[j * view_.inner]);
            if constexpr (is_float_like_v<T>) {
              if (std::isnan(static_cast<double>(best))) break;  // numpy: the first NaN wins
              if (std::isnan(static_cast<double>(v))) {
                best = v;
                index = j;
                break;
              }
            }
            bool better = kMax ? v > best : v < best;
            if (better || (select_last_ && v == best)) {
              best = v;
              index = j;
            }
          }
          y[o * view_.inner + i] = index;
        }
      }
    });
  }

 private:
  int64_t axis_ = 0;
  bool select_last_ = false;
  AxisView view_;
};

// CumSum and CumProd: one running accumulation along an axis, forward or reversed, inclusive or
// exclusive (the exclusive one starts from the identity, 0 or 1).
template <bool kProduct>
class CumulativeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "x");
    exclusive_ = attrs.get_int("exclusive", 0) != 0;
    reverse_ = attrs.get_int("reverse", 0) != 0;
    if (in[1].dtype != EDGERT_DTYPE_INT32 && in[1].dtype != EDGERT_DTYPE_INT64)
      fail(EDGERT_ERR_SHAPE, "axis must be int32 or int64, got %s", dtype_name(in[1].dtype));
    if (in[1].rank > 1 || numel(in[1]) != 1)
      fail(EDGERT_ERR_SHAPE, "axis must be a scalar, got shape %s", shape_string(shape_of(in[1])).c_str());
    // The output shape does not depend on the axis value, so it is read only in execute.
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t axis = normalize_axis(static_cast<int64_t>(read_scalar(in[1], "axis")), in[0].rank);
    AxisView v = axis_view(in[0], axis);
    dispatch(in[0].dtype, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      using A = std::conditional_t<is_float_like_v<T>, double, C>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          int64_t base = o * v.n * v.inner + i;
          A acc = kProduct ? A(1) : A(0);
          for (int64_t k = 0; k < v.n; ++k) {
            int64_t j = reverse_ ? v.n - 1 - k : k;
            int64_t at = base + j * v.inner;
            A value = static_cast<A>(static_cast<C>(x[at]));
            if (!exclusive_) accumulate(acc, value);
            y[at] = static_cast<T>(static_cast<C>(acc));
            if (exclusive_) accumulate(acc, value);
          }
        }
      }
    });
  }

 private:
  // Integer products wrap like numpy's: through the (promoted) unsigned type, where overflow is
  // defined even for uint16, whose operands promote to int.
  template <typename A>
  static void accumulate(A& acc, A value) {
    if constexpr (!kProduct) {
      acc += value;
    } else if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<decltype(acc * value)>;
      acc = static_cast<A>(static_cast<U>(acc) * static_cast<U>(value));
    } else {
      acc = static_cast<A>(acc * value);
    }
  }

  bool exclusive_ = false, reverse_ = false;
};

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  r.add<ReduceOp<ReduceKind::Sum>>("ReduceSum", "ref-reduce-sum");
  r.add<ReduceOp<ReduceKind::Mean>>("ReduceMean", "ref-reduce-mean", nullptr, reduce_mean_tactics);
  r.add<ReduceOp<ReduceKind::Max>>("ReduceMax", "ref-reduce-max");
  r.add<ReduceOp<ReduceKind::Min>>("ReduceMin", "ref-reduce-min");
  r.add<ReduceOp<ReduceKind::Prod>>("ReduceProd", "ref-reduce-prod");
  r.add<ReduceOp<ReduceKind::L1>>("ReduceL1", "ref-reduce-l1");
  r.add<ReduceOp<ReduceKind::L2>>("ReduceL2", "ref-reduce-l2");
  r.add<ReduceOp<ReduceKind::LogSum>>("ReduceLogSum", "ref-reduce-log-sum");
  r.add<ReduceOp<ReduceKind::LogSumExp>>("ReduceLogSumExp", "ref-reduce-log-sum-exp");
  r.add<ReduceOp<ReduceKind::SumSquare>>("ReduceSumSquare", "ref-reduce-sum-square");
  r.add<ArgOp<true>>("ArgMax", "ref-argmax");
  r.add<ArgOp<false>>("ArgMin", "ref-argmin");
  r.add<CumulativeOp<false>>("CumSum", "ref-cumsum");
  r.add<CumulativeOp<true>>("CumProd", "ref-cumprod");
}

}  // namespace edgert::cpu
