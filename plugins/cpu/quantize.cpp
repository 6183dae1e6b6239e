// Linear quantization: QuantizeLinear, DequantizeLinear (per tensor, per axis or in blocks
// along an axis; to and from 8/16-bit integers and the narrow types), DynamicQuantizeLinear,
// and QLinearConv. Arithmetic follows ONNX Runtime: float math,
// round half to even, saturate. Their tactics (per-tensor u8 Quantize/Dequantize on AVX-512,
// AVX2 or NEON, fast/qlinear_rows.h; QLinearConv, fast/qlinear_conv_tactics.h) are bit-exact
// with these.
#include <algorithm>
#include <cmath>
#include <limits>

#include "edgert/narrow_types.h"
#include "fast/qlinear_conv_tactics.h"
#include "fast/qlinear_rows.h"
#include "kernel.h"
#include "nn_common.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

bool is_quantized_dtype(edgert_dtype d) {
  return d == EDGERT_DTYPE_UINT8 || d == EDGERT_DTYPE_INT8 || d == EDGERT_DTYPE_UINT16 || d == EDGERT_DTYPE_INT16 ||
         (edgert_dtype_is_narrow(d) && d != EDGERT_DTYPE_FLOAT8E8M0);
}

// How a scale lays over x, viewed as [outer, channels, inner]: one value (per tensor), one per
// channel (per axis), or one per block of `block` channels at every outer and inner position.
struct AxisLayout {
  int64_t outer = 1, channels = 1, inner = 1;
  int64_t block = 0;  // 0: not blocked
  bool per_tensor = true;

  // The scale (and zero point) element of x's element (o, c, k).
  int64_t scale_index(int64_t o, int64_t c, int64_t k) const {
    if (per_tensor) return 0;
    if (!block) return c;
    return (o * ((channels + block - 1) / block) + c / block) * inner + k;
  }
};

void check_blocked_scale(const edgert_tensor& x, const edgert_tensor& scale, int64_t axis, int64_t block) {
  bool ok = scale.rank == x.rank;
  for (int64_t d = 0; ok && d < x.rank; ++d)
    ok = scale.dims[d] == (d == axis ? (x.dims[d] + block - 1) / block : x.dims[d]);
  if (!ok)
    fail(EDGERT_ERR_SHAPE, "scale has shape %s; blocks of %lld on axis %lld of x %s need x's shape with that axis divided",
         shape_string(shape_of(scale)).c_str(), static_cast<long long>(block), static_cast<long long>(axis),
         shape_string(shape_of(x)).c_str());
}

// Validates scale (and zero point) against x and the axis and block_size attributes; a scale
// with one value is per tensor, a 1-D scale per axis, one of x's rank blocked.
AxisLayout axis_layout(const edgert_node& node, const edgert_tensor& x, const edgert_tensor& scale,
                       const edgert_tensor* zero_point) {
  AxisLayout l;
  l.inner = numel(x);
  const int64_t block = Attributes(&node).get_int("block_size", 0);
  if (block < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "block_size is %lld, expected >= 0", static_cast<long long>(block));
  const bool per_tensor = block == 0 && numel(scale) == 1 && scale.rank <= 1;
  if (zero_point && shape_of(*zero_point) != shape_of(scale) && !(numel(*zero_point) == 1 && per_tensor))
    fail(EDGERT_ERR_SHAPE, "zero point has shape %s, scale has %s; they must match",
         shape_string(shape_of(*zero_point)).c_str(), shape_string(shape_of(scale)).c_str());
  if (per_tensor) return l;
  const int64_t axis = normalize_axis(Attributes(&node).get_int("axis", 1), x.rank);
  if (block) {
    check_blocked_scale(x, scale, axis, block);
  } else if (scale.rank != 1 || scale.dims[0] != x.dims[axis]) {
    fail(EDGERT_ERR_SHAPE, "scale has shape %s, expected a scalar or [%lld] (x's dim on axis %lld)",
         shape_string(shape_of(scale)).c_str(), static_cast<long long>(x.dims[axis]), static_cast<long long>(axis));
  }
  l.per_tensor = false;
  l.block = block;
  l.outer = 1;
  for (int64_t d = 0; d < axis; ++d) l.outer *= x.dims[d];
  l.channels = x.dims[axis];
  l.inner = 1;
  for (int64_t d = axis + 1; d < x.rank; ++d) l.inner *= x.dims[d];
  return l;
}

// Calls fn(element index, scale index) over x in order.
template <typename Fn>
void for_each_channel(const AxisLayout& l, Fn fn) {
  int64_t i = 0;
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c)
      for (int64_t k = 0; k < l.inner; ++k) fn(i++, l.scale_index(o, c, k));
}

// A narrow zero point's value (0 when absent).
double narrow_zero_point_at(const edgert_tensor* zp, int64_t i) {
  if (!zp || numel(*zp) == 0) return 0;
  const uint8_t code = data_as<uint8_t>(*zp)[numel(*zp) == 1 ? 0 : i];
  if (edgert_dtype_is_narrow_int(zp->dtype)) return static_cast<double>(edgert_narrow_int_value(zp->dtype, code));
  return edgert_narrow_float_to_double(zp->dtype, code);
}

// x / scale + zero point as a narrow type: integers round half to even and saturate (as the
// 8-bit types do); floats round to nearest even and saturate unless `saturate` is 0.
uint8_t quantize_narrow(edgert_dtype q, float scaled, double zero_point, bool saturate) {
  if (edgert_dtype_is_narrow_int(q)) {
    const double r = std::isnan(scaled) ? 0.0 : static_cast<double>(std::nearbyint(scaled)) + zero_point;
    const double clamped = std::min(64.0, std::max(-64.0, r));  // beyond any narrow range, inside int64
    return edgert_narrow_int_from_int64(q, static_cast<int64_t>(clamped), 1);
  }
  edgert_minifloat format{};
  edgert_minifloat_of(q, &format);
  return edgert_minifloat_from_double(&format, static_cast<double>(scaled) + zero_point, saturate);
}

// Calls fn(first, count) over [0, n) in pieces of 16 K elements spread over the thread pool.
template <typename Fn>
void for_each_piece(int64_t n, Fn fn) {
  constexpr int64_t kPiece = 16384;
  ThreadPool::instance().parallel_ranges((n + kPiece - 1) / kPiece, [&](int64_t p0, int64_t p1, int) {
    const int64_t i0 = p0 * kPiece, i1 = std::min(n, p1 * kPiece);
    fn(i0, i1 - i0);
  });
}

// A per-tensor float32 scale and a u8 zero point (or none) with the given data dtype.
bool per_tensor_u8(const edgert_node* node, const edgert_tensor* in) {
  if (in[1].dtype != EDGERT_DTYPE_FLOAT32 || numel(in[1]) != 1 || in[1].rank > 1) return false;
  if (has_input(*node, in, 2)) return in[2].dtype == EDGERT_DTYPE_UINT8 && numel(in[2]) == 1;
  return true;
}

std::vector<TacticSpec> quantize_tactics(const edgert_node* node, const edgert_tensor* in) {
  const int64_t output_dtype = Attributes(node).get_int("output_dtype", 0);
  if ((in[0].dtype != EDGERT_DTYPE_FLOAT32 && in[0].dtype != EDGERT_DTYPE_UNDEFINED) || !per_tensor_u8(node, in) ||
      (output_dtype != 0 && output_dtype != EDGERT_DTYPE_UINT8))
    return {};
  return qrows::row_tactics(
      {"f32-quantize-linear-u8-avx512", "f32-quantize-linear-u8-avx2", "f32-quantize-linear-u8-neon"});
}

std::vector<TacticSpec> dequantize_tactics(const edgert_node* node, const edgert_tensor* in) {
  if ((in[0].dtype != EDGERT_DTYPE_UINT8 && in[0].dtype != EDGERT_DTYPE_UNDEFINED) || !per_tensor_u8(node, in))
    return {};
  return qrows::row_tactics(
      {"u8-dequantize-linear-f32-avx512", "u8-dequantize-linear-f32-avx2", "u8-dequantize-linear-f32-neon"});
}

class QuantizeLinearOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const edgert_tensor& x = in[0];
    if (!is_float_dtype(x.dtype) && x.dtype != EDGERT_DTYPE_INT32)
      fail(EDGERT_ERR_UNSUPPORTED, "x has dtype %s, expected a float type or int32", dtype_name(x.dtype));
    if (!is_float_dtype(in[1].dtype)) fail(EDGERT_ERR_SHAPE, "y_scale has dtype %s, expected float", dtype_name(in[1].dtype));
    const edgert_tensor* zp = optional_input(node, in, 2);
    edgert_dtype out_dtype = zp ? zp->dtype : static_cast<edgert_dtype>(Attributes(&node).get_int("output_dtype", 0));
    if (out_dtype == EDGERT_DTYPE_UNDEFINED) out_dtype = EDGERT_DTYPE_UINT8;
    if (!is_quantized_dtype(out_dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "output dtype %s is not supported (expected (u)int8, (u)int16, (u)int4, (u)int2, float8 or float4)",
           dtype_name(out_dtype));
    layout_ = axis_layout(node, x, in[1], zp);
    set_output(out[0], out_dtype, shape_of(x));
    const bool rows_apply = x.dtype == EDGERT_DTYPE_FLOAT32 && in[1].dtype == EDGERT_DTYPE_FLOAT32 &&
                               out_dtype == EDGERT_DTYPE_UINT8 && layout_.per_tensor;
    rows_ = rows_apply ? qrows::row_kernels(tactic()) : nullptr;
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const edgert_tensor* zp = optional_input(node, in, 2);
    if (rows_) {
      const float* x = data_as<float>(in[0]);
      uint8_t* y = data_as<uint8_t>(out[0]);
      const float scale = scale_at(in[1], 0);
      const int32_t zero_point = zero_point_at(zp, 0);
      for_each_piece(numel(in[0]),
                     [&](int64_t i0, int64_t n) { rows_->quantize(x + i0, n, scale, zero_point, y + i0); });
      return;
    }
    if (edgert_dtype_is_narrow(out[0].dtype)) {
      const bool saturate = Attributes(&node).get_int("saturate", 1) != 0;
      uint8_t* y = data_as<uint8_t>(out[0]);
      dispatch(in[0].dtype, kFloats | kSigned, [&](auto xtag) {
        using TX = typename decltype(xtag)::type;
        const TX* x = data_as<TX>(in[0]);
        for_each_channel(layout_, [&](int64_t i, int64_t c) {
          const float v = static_cast<float>(static_cast<compute_t<TX>>(x[i]));
          y[i] = quantize_narrow(out[0].dtype, v / scale_at(in[1], c), narrow_zero_point_at(zp, c), saturate);
        });
      }, "x");
      return;
    }
    dispatch(in[0].dtype, kFloats | kSigned, [&](auto xtag) {
      dispatch(out[0].dtype, kSigned | kUnsigned, [&](auto qtag) {
        using TX = typename decltype(xtag)::type;
        using Q = typename decltype(qtag)::type;
        if constexpr (sizeof(Q) <= 2) {
          const TX* x = data_as<TX>(in[0]);
          Q* y = data_as<Q>(out[0]);
          for_each_channel(layout_, [&](int64_t i, int64_t c) {
            const float v = static_cast<float>(static_cast<compute_t<TX>>(x[i]));
            y[i] = saturate_round<Q>(v / scale_at(in[1], c), zero_point_at(zp, c));
          });
        }
      }, "y");
    }, "x");
  }

 private:
  AxisLayout layout_;
  const qrows::RowKernels* rows_ = nullptr;  // the tactic's family; null: the reference
};

class DequantizeLinearOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const edgert_tensor& x = in[0];
    if (!is_quantized_dtype(x.dtype) && x.dtype != EDGERT_DTYPE_INT32)
      fail(EDGERT_ERR_UNSUPPORTED, "x has dtype %s, expected (u)int8, (u)int16, int32, (u)int4, (u)int2, float8 or float4",
           dtype_name(x.dtype));
    if (!is_float_dtype(in[1].dtype)) fail(EDGERT_ERR_SHAPE, "x_scale has dtype %s, expected float", dtype_name(in[1].dtype));
    const edgert_tensor* zp = optional_input(node, in, 2);
    if (zp && zp->dtype != x.dtype)
      fail(EDGERT_ERR_SHAPE, "x_zero_point has dtype %s, x has %s", dtype_name(zp->dtype), dtype_name(x.dtype));
    layout_ = axis_layout(node, x, in[1], zp);
    set_output(out[0], in[1].dtype, shape_of(x));
    const bool rows_apply =
        x.dtype == EDGERT_DTYPE_UINT8 && in[1].dtype == EDGERT_DTYPE_FLOAT32 && layout_.per_tensor;
    rows_ = rows_apply ? qrows::row_kernels(tactic()) : nullptr;
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const edgert_tensor* zp = optional_input(node, in, 2);
    if (rows_) {
      const uint8_t* x = data_as<uint8_t>(in[0]);
      float* y = data_as<float>(out[0]);
      const float scale = scale_at(in[1], 0);
      const int32_t zero_point = zero_point_at(zp, 0);
      for_each_piece(numel(in[0]),
                     [&](int64_t i0, int64_t n) { rows_->dequantize(x + i0, n, zero_point, scale, y + i0); });
      return;
    }
    if (edgert_dtype_is_narrow(in[0].dtype)) {
      const uint8_t* x = data_as<uint8_t>(in[0]);
      const bool is_int = edgert_dtype_is_narrow_int(in[0].dtype);
      dispatch(out[0].dtype, kFloats, [&](auto ytag) {
        using TY = typename decltype(ytag)::type;
        TY* y = data_as<TY>(out[0]);
        for_each_channel(layout_, [&](int64_t i, int64_t c) {
          const double v = is_int ? static_cast<double>(edgert_narrow_int_value(in[0].dtype, x[i]))
                                  : edgert_narrow_float_to_double(in[0].dtype, x[i]);
          y[i] = static_cast<TY>(static_cast<float>(v - narrow_zero_point_at(zp, c)) * scale_at(in[1], c));
        });
      }, "y");
      return;
    }
    dispatch(in[0].dtype, kSigned | kUnsigned, [&](auto xtag) {
      dispatch(out[0].dtype, kFloats, [&](auto ytag) {
        using TX = typename decltype(xtag)::type;
        using TY = typename decltype(ytag)::type;
        if constexpr (sizeof(TX) <= 4) {
          const TX* x = data_as<TX>(in[0]);
          TY* y = data_as<TY>(out[0]);
          for_each_channel(layout_, [&](int64_t i, int64_t c) {
            const int64_t q = static_cast<int64_t>(x[i]) - zero_point_at(zp, c);
            y[i] = static_cast<TY>(static_cast<float>(q) * scale_at(in[1], c));
          });
        }
      }, "y");
    }, "x");
  }

 private:
  AxisLayout layout_;
  const qrows::RowKernels* rows_ = nullptr;  // the tactic's family; null: the reference
};

// y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point = round(clamp(-min / scale)),
// y = saturate(round(x / scale) + zero point). A constant-zero input gets scale 1 (ORT).
class DynamicQuantizeLinearOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (in[0].dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "x has dtype %s, expected float32", dtype_name(in[0].dtype));
    set_output(out[0], EDGERT_DTYPE_UINT8, shape_of(in[0]));
    if (node.num_outputs > 1) set_output(out[1], EDGERT_DTYPE_FLOAT32, {});
    if (node.num_outputs > 2) set_output(out[2], EDGERT_DTYPE_UINT8, {});
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const float* x = data_as<float>(in[0]);
    const int64_t n = numel(in[0]);
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    const float initial_zero = 0.0f - lo / scale;
    const uint8_t zero = static_cast<uint8_t>(std::nearbyint(std::max(0.0f, std::min(255.0f, initial_zero))));
    uint8_t* y = data_as<uint8_t>(out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = saturate_round<uint8_t>(x[i] / scale, zero);
    if (node.num_outputs > 1) *data_as<float>(out[1]) = scale;
    if (node.num_outputs > 2) *data_as<uint8_t>(out[2]) = zero;
  }
};

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32).
class QLinearConvOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (node.num_inputs < 8) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least 8 inputs, got %d", node.num_inputs);
    const edgert_tensor &x = in[0], &w = in[3];
    if (!is_8bit(x.dtype) || !is_8bit(w.dtype) || !is_8bit(in[7].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "x, w, y_zero_point are %s, %s, %s; expected uint8 or int8", dtype_name(x.dtype),
           dtype_name(w.dtype), dtype_name(in[7].dtype));
    if (in[2].dtype != x.dtype || in[5].dtype != w.dtype)
      fail(EDGERT_ERR_SHAPE, "zero points must have the dtype of their operand");
    for (int i : {1, 4, 6})
      if (!is_float_dtype(in[i].dtype)) fail(EDGERT_ERR_SHAPE, "scale input %d has dtype %s, expected float", i, dtype_name(in[i].dtype));
    group_ = Attributes(&node).get_int("group", 1);
    Shape out_shape;
    g_ = conv_shapes(node, x, w, group_, out_shape);
    const int64_t m = w.dims[0];
    check_per_channel(in[1], 1, "x_scale");
    check_per_channel(in[2], 1, "x_zero_point");
    check_per_channel(in[4], m, "w_scale");
    check_per_channel(in[5], m, "w_zero_point");
    check_per_channel(in[6], 1, "y_scale");
    check_per_channel(in[7], 1, "y_zero_point");
    if (const edgert_tensor* b = optional_input(node, in, 8)) {
      if (b->dtype != EDGERT_DTYPE_INT32 || b->rank != 1 || b->dims[0] != m)
        fail(EDGERT_ERR_SHAPE, "B has dtype %s shape %s, expected int32 [%lld]", dtype_name(b->dtype),
             shape_string(shape_of(*b)).c_str(), static_cast<long long>(m));
    }
    set_output(out[0], in[7].dtype, out_shape);
    fast_ = tactic() != 0 && fast_conv_.prepare(tactic(), node, g_, group_, in, info);
    if (!fast_) info.workspace_bytes = static_cast<size_t>(g_.out_size()) * sizeof(int32_t);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* b = optional_input(node, in, 8);
    const int32_t* bias = b ? data_as<int32_t>(*b) : nullptr;
    if (fast_) return fast_conv_.execute(in, bias, data_as<uint8_t>(out[0]), workspace);
    const float x_scale = scale_at(in[1], 0), y_scale = scale_at(in[6], 0);
    const int32_t x_zero = zero_point_at(&in[2], 0), y_zero = zero_point_at(&in[7], 0);
    dispatch_8bit(in[0].dtype, [&](auto xtag) {
      dispatch_8bit(in[3].dtype, [&](auto wtag) {
        dispatch_8bit(in[7].dtype, [&](auto ytag) {
          using TX = typename decltype(xtag)::type;
          using TW = typename decltype(wtag)::type;
          using TY = typename decltype(ytag)::type;
          conv_forward(g_, in[0].dims[0], in[0].dims[1], in[3].dims[0], group_, data_as<TX>(in[0]),
                       data_as<TW>(in[3]), x_zero, [&](int64_t m) { return zero_point_at(&in[5], m); },
                       [&](int64_t m) { return bias ? bias[m] : 0; },
                       [&](int32_t acc, int64_t m) {
                         // Float multiplier and rounding like ONNX Runtime's requantization.
                         const float multiplier = x_scale * scale_at(in[4], m) / y_scale;
                         return saturate_round<TY>(static_cast<float>(acc) * multiplier, y_zero);
                       },
                       data_as<TY>(out[0]), static_cast<int32_t*>(workspace));
        }, "y_zero_point");
      }, "w");
    }, "x");
  }

 private:
  WindowGeometry g_;
  int64_t group_ = 1;
  bool fast_ = false;
  FastQLinearConv fast_conv_;

 public:
  size_t state_bytes() const override { return fast_conv_.state_bytes(); }
  uint64_t inputs_replaced() const override {
    return fast_ && fast_conv_.reads_only_packed_weights() ? uint64_t{1} << 3 : 0;
  }
};

// Refuses output and zero-point types no kernel here produces (float8e8m0, strings, ...).
int32_t quantize_supports(const edgert_node* node, const edgert_tensor* in) {
  Attributes attrs(node);
  const int64_t output_dtype = attrs.get_int("output_dtype", 0);
  if (output_dtype != 0 && !is_quantized_dtype(static_cast<edgert_dtype>(output_dtype))) return 0;
  if (has_input(*node, in, 2) && !is_quantized_dtype(in[2].dtype) && in[2].dtype != EDGERT_DTYPE_INT32 &&
      in[2].dtype != EDGERT_DTYPE_UNDEFINED)
    return 0;
  return 1;
}

}  // namespace

void register_quantize_kernels(KernelRegistry& r) {
  r.add<QuantizeLinearOp>("QuantizeLinear", "ref-quantize-linear", quantize_supports, quantize_tactics);
  r.add<DequantizeLinearOp>("DequantizeLinear", "ref-dequantize-linear", quantize_supports, dequantize_tactics);
  r.add<DynamicQuantizeLinearOp>("DynamicQuantizeLinear", "ref-dynamic-quantize-linear");
  r.add<QLinearConvOp>("QLinearConv", "ref-qlinear-conv", nullptr, qlinear_conv_tactics);
}

}  // namespace edgert::cpu
