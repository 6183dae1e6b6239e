// Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global forms, and MaxUnpool.
// Each output element walks its window directly; geometry (pads, auto_pad, ceil_mode,
// dilations) comes from forward_geometry in conv.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "fast/pool_rows.h"
#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {
namespace {

enum class PoolKind { Max, Average, Lp };

// Calls fn(row-major offset, column-major offset) of every in-bounds input position of the
// window of output position `oidx` (offsets within one [spatial...] plane).
template <typename Fn>
void visit_window(const WindowGeometry& g, const int64_t* oidx, Fn fn) {
  int64_t kidx[EDGERT_MAX_RANK] = {};
  const int64_t kn = g.kernel_size();
  for (int64_t kk = 0; kk < kn; ++kk) {
    int64_t off = 0, off_col = 0, col_stride = 1;
    bool inside = true;
    for (int d = 0; d < g.rank && inside; ++d) {
      const int64_t pos = oidx[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
      inside = pos >= 0 && pos < g.in[d];
      off = off * g.in[d] + pos;
      off_col += pos * col_stride;
      col_stride *= g.in[d];
    }
    if (inside) fn(off, off_col);
    for (int d = g.rank - 1; d >= 0; --d) {
      if (++kidx[d] < g.kernel[d]) break;
      kidx[d] = 0;
    }
  }
}

// Window size counting padded positions but not the ceil_mode overhang past the end padding
// (AveragePool count_include_pad=1, as ONNX Runtime).
int64_t padded_window_count(const WindowGeometry& g, const int64_t* oidx) {
  int64_t count = 1;
  for (int d = 0; d < g.rank; ++d) {
    int64_t c = 0;
    for (int64_t k = 0; k < g.kernel[d]; ++k) {
      const int64_t pos = oidx[d] * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
      c += pos >= -g.pad_begin[d] && pos < g.in[d] + g.pad_end[d];
    }
    count *= c;
  }
  return count;
}

template <PoolKind K>
class PoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const edgert_tensor& x = in[0];
    const bool int8_ok = K == PoolKind::Max && is_8bit(x.dtype);
    if (!is_float_dtype(x.dtype) && !int8_ok)
      fail(EDGERT_ERR_UNSUPPORTED, "X has dtype %s, expected a float type%s", dtype_name(x.dtype),
           K == PoolKind::Max ? " or (u)int8" : "");
    Attributes attrs(&node);
    if (!attrs.has("kernel_shape")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'kernel_shape' is required");
    g_ = forward_geometry(attrs, shape_of(x), attrs.get_ints("kernel_shape"), attrs.get_int("ceil_mode", 0) != 0);
    count_include_pad_ = attrs.get_int("count_include_pad", 0) != 0;
    storage_order_ = attrs.get_int("storage_order", 0);
    if (storage_order_ != 0 && storage_order_ != 1)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "storage_order %lld must be 0 or 1", static_cast<long long>(storage_order_));
    p_ = K == PoolKind::Lp ? attrs.get_float("p", 2.0f) : 2.0f;
    Shape out_shape = {x.dims[0], x.dims[1]};
    for (int i = 0; i < g_.rank; ++i) out_shape.push_back(g_.out[i]);
    set_output(out[0], x.dtype, out_shape);
    if (node.num_outputs > 1) {
      if (K != PoolKind::Max) fail(EDGERT_ERR_INVALID_ARGUMENT, "has %d outputs, expected 1", node.num_outputs);
      set_output(out[1], EDGERT_DTYPE_INT64, out_shape);
    }
    fast_ = K != PoolKind::Lp && fast_pool_.prepare(tactic(), K == PoolKind::Max, count_include_pad_, g_, x, node.num_outputs);
    if (fast_) info.workspace_bytes = fast_pool_.workspace_bytes();
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    if (fast_) {
      if (in[0].dtype == EDGERT_DTYPE_UINT8)
        fast_pool_.execute(data_as<uint8_t>(in[0]), data_as<uint8_t>(out[0]), workspace);
      else
        fast_pool_.execute(data_as<float>(in[0]), data_as<float>(out[0]));
      return;
    }
    int64_t* indices = node.num_outputs > 1 ? data_as<int64_t>(out[1]) : nullptr;
    dispatch(in[0].dtype, kFloats | kSigned | kUnsigned, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      const int64_t planes = in[0].dims[0] * in[0].dims[1];
      const int64_t in_plane = g_.in_size(), out_plane = g_.out_size();
      for (int64_t p = 0; p < planes; ++p) {
        const T* xp = x + p * in_plane;
        int64_t oidx[EDGERT_MAX_RANK] = {};
        for (int64_t o = 0; o < out_plane; ++o) {
          const int64_t yi = p * out_plane + o;
          if constexpr (K == PoolKind::Max) {
            // The first non-NaN value, then strictly greater ones: NaNs never win, as in
            // ONNX Runtime (which starts from lowest() with '>').
            C best = std::numeric_limits<C>::lowest();
            int64_t best_index = -1;
            visit_window(g_, oidx, [&](int64_t off, int64_t off_col) {
              const C v = static_cast<C>(xp[off]);
              if (best_index < 0 ? v == v : v > best) {
                best = v;
                best_index = p * in_plane + (storage_order_ ? off_col : off);
              }
            });
            y[yi] = static_cast<T>(best);
            if (indices) indices[yi] = best_index;
          } else {
            double sum = 0;
            int64_t count = 0;
            visit_window(g_, oidx, [&](int64_t off, int64_t) {
              const double v = static_cast<double>(static_cast<C>(xp[off]));
              sum += K == PoolKind::Lp ? std::pow(std::fabs(v), static_cast<double>(p_)) : v;
              ++count;
            });
            double r;
            if constexpr (K == PoolKind::Lp) {
              r = std::pow(sum, 1.0 / p_);
            } else {
              if (count_include_pad_) count = padded_window_count(g_, oidx);
              r = count > 0 ? sum / static_cast<double>(count) : 0.0;
            }
            y[yi] = static_cast<T>(static_cast<C>(r));
          }
          for (int d = g_.rank - 1; d >= 0; --d) {
            if (++oidx[d] < g_.out[d]) break;
            oidx[d] = 0;
          }
        }
      }
    });
  }

 private:
  WindowGeometry g_;
  bool count_include_pad_ = false;
  int64_t storage_order_ = 0;
  float p_ = 2;
  bool fast_ = false;
  FastPool fast_pool_;
};

// GlobalAveragePool / GlobalMaxPool / GlobalLpPool: one window over all spatial dims.
template <PoolKind K>
class GlobalPoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const edgert_tensor& x = in[0];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (x.rank < 2) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected >= 2 ([N, C, spatial...])", x.rank);
    p_ = K == PoolKind::Lp ? Attributes(&node).get_float("p", 2.0f) : 2.0f;
    Shape out_shape(static_cast<size_t>(x.rank), 1);
    out_shape[0] = x.dims[0];
    out_shape[1] = x.dims[1];
    set_output(out[0], x.dtype, out_shape);
    const bool rows = tactic() == kGlobalAverageRowsTactic || tactic() == kGlobalAverageAvx512Tactic;
    fast_ = K == PoolKind::Average && rows && x.dtype == EDGERT_DTYPE_FLOAT32;
    avx512_ = tactic() == kGlobalAverageAvx512Tactic;
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (fast_) {
      const int64_t planes = in[0].dims[0] * in[0].dims[1];
      global_average_rows(data_as<float>(in[0]), data_as<float>(out[0]), planes,
                          planes ? numel(in[0]) / planes : 0, avx512_);
      return;
    }
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      const int64_t planes = in[0].dims[0] * in[0].dims[1];
      const int64_t size = planes ? numel(in[0]) / planes : 0;
      for (int64_t p = 0; p < planes; ++p) {
        const T* xp = x + p * size;
        double r;
        if constexpr (K == PoolKind::Max) {
          r = -std::numeric_limits<double>::infinity();
          for (int64_t i = 0; i < size; ++i) r = std::max(r, static_cast<double>(static_cast<compute_t<T>>(xp[i])));
        } else {
          double sum = 0;
          for (int64_t i = 0; i < size; ++i) {
            const double v = static_cast<double>(static_cast<compute_t<T>>(xp[i]));
            sum += K == PoolKind::Lp ? std::pow(std::fabs(v), static_cast<double>(p_)) : v;
          }
          r = K == PoolKind::Lp ? std::pow(sum, 1.0 / p_) : sum / static_cast<double>(size);
        }
        y[p] = static_cast<T>(static_cast<compute_t<T>>(r));
      }
    });
  }

 private:
  float p_ = 2;
  bool fast_ = false;
  bool avx512_ = false;  // tactic f32-global-avgpool-rows-avx512
};

// Inputs X, I (flat indices into Y, as MaxPool's Indices), optional output_shape.
class MaxUnpoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const edgert_tensor &x = in[0], &idx = in[1];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (idx.dtype != EDGERT_DTYPE_INT64) fail(EDGERT_ERR_SHAPE, "I has dtype %s, expected int64", dtype_name(idx.dtype));
    if (shape_of(idx) != shape_of(x))
      fail(EDGERT_ERR_SHAPE, "I has shape %s, X has %s; they must match", shape_string(shape_of(idx)).c_str(),
           shape_string(shape_of(x)).c_str());
    if (x.rank < 3) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected >= 3", x.rank);
    Attributes attrs(&node);
    const size_t r = static_cast<size_t>(x.rank - 2);
    std::vector<int64_t> kernel = attrs.get_ints("kernel_shape");
    if (kernel.size() != r) fail(EDGERT_ERR_INVALID_ARGUMENT, "kernel_shape has %zu values, expected %zu", kernel.size(), r);
    std::vector<int64_t> strides = spatial_ints(attrs, "strides", r, 1);
    std::vector<int64_t> pads = attrs.get_ints("pads", std::vector<int64_t>(2 * r, 0));
    if (pads.size() != 2 * r) fail(EDGERT_ERR_INVALID_ARGUMENT, "pads has %zu values, expected %zu", pads.size(), 2 * r);
    Shape out_shape = {x.dims[0], x.dims[1]};
    for (size_t i = 0; i < r; ++i) out_shape.push_back((x.dims[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + r]);
    if (const edgert_tensor* os = optional_input(node, in, 2)) {
      info.data_dependent = 1;
      Shape requested = read_ints(*os, "output_shape");
      if (requested.size() != out_shape.size())
        fail(EDGERT_ERR_SHAPE, "output_shape has %zu values, expected %zu", requested.size(), out_shape.size());
      for (size_t i = 0; i < out_shape.size(); ++i)
        if (requested[i] < out_shape[i] || (i < 2 && requested[i] != out_shape[i]))
          fail(EDGERT_ERR_SHAPE, "output_shape %s is smaller than the unpooled shape %s",
               shape_string(requested).c_str(), shape_string(out_shape).c_str());
      inferred_ = out_shape;
      out_shape = requested;
    } else {
      inferred_ = out_shape;
    }
    set_output(out[0], x.dtype, out_shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const size_t size = dtype_size(in[0].dtype);
    const int64_t total = numel(out[0]), n = numel(in[0]);
    char* y = static_cast<char*>(out[0].data);
    if (total > 0) std::memset(y, 0, static_cast<size_t>(total) * size);  // all-zero bits are 0.0 in every float type
    const char* x = static_cast<const char*>(in[0].data);
    const int64_t* idx = data_as<int64_t>(in[1]);
    const bool remap = inferred_ != shape_of(out[0]);
    const int64_t limit = numel(inferred_);
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] < 0 || idx[i] >= limit)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "index %lld at position %lld is outside the unpooled tensor (%lld elements)",
             static_cast<long long>(idx[i]), static_cast<long long>(i), static_cast<long long>(limit));
      // Indices address the unpooled (inferred) shape; a larger output_shape pads it with
      // zeros at the end of each dim (ONNX Runtime; the node tests expect this).
      int64_t target = idx[i];
      if (remap) {
        int64_t rest = idx[i];
        target = 0;
        for (size_t d = inferred_.size(), stride = 1; d-- > 0;) {
          target += (rest % inferred_[d]) * static_cast<int64_t>(stride);
          rest /= inferred_[d];
          stride *= static_cast<size_t>(out[0].dims[d]);
        }
      }
      std::memcpy(y + target * size, x + i * size, size);
    }
  }

 private:
  Shape inferred_;  // (X - 1) * stride + kernel - pads: the shape the indices address
};

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r.add<PoolOp<PoolKind::Max>>("MaxPool", "ref-max-pool", nullptr, pool_tactics);
  r.add<PoolOp<PoolKind::Average>>("AveragePool", "ref-average-pool", nullptr, pool_tactics);
  r.add<PoolOp<PoolKind::Lp>>("LpPool", "ref-lp-pool");
  r.add<GlobalPoolOp<PoolKind::Average>>("GlobalAveragePool", "ref-global-average-pool", nullptr,
                                         global_average_tactics);
  r.add<GlobalPoolOp<PoolKind::Max>>("GlobalMaxPool", "ref-global-max-pool");
  r.add<GlobalPoolOp<PoolKind::Lp>>("GlobalLpPool", "ref-global-lp-pool");
  r.add<MaxUnpoolOp>("MaxUnpool", "ref-max-unpool");
}

}  // namespace edgert::cpu
