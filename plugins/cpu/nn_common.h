// Shared by the conv, matmul, pool, quantize and einsum families (all owned by one helper): window
// geometry of Conv/pooling, the direct-convolution inner loop, accumulator types, 8-bit
// dispatch and requantization.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernel.h"

namespace edgert::cpu {

// Accumulators: double for the float types (an oracle should be at least as exact as what it
// checks), 64-bit for integers so int32 products wrap like numpy instead of overflowing (UB).
template <typename T>
using acc_t = std::conditional_t<is_float_like_v<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

inline bool has_input(const edgert_node& node, const edgert_tensor* in, int i) {
  return i < node.num_inputs && is_present(in[i]);
}

// Spatial geometry of a sliding window over the dims after N and C. For Conv and pooling,
// `in` is the input and `out` the output; ConvTranspose stores it the other way round
// relative to the data flow (in = X's spatial dims, out = Y's), with the same pad meaning:
// the window of output position o starts at input position o * stride - pad_begin.
struct WindowGeometry {
  int rank = 0;
  int64_t in[EDGERT_MAX_RANK] = {};
  int64_t out[EDGERT_MAX_RANK] = {};
  int64_t kernel[EDGERT_MAX_RANK] = {};
  int64_t stride[EDGERT_MAX_RANK] = {};
  int64_t dilation[EDGERT_MAX_RANK] = {};
  int64_t pad_begin[EDGERT_MAX_RANK] = {};
  int64_t pad_end[EDGERT_MAX_RANK] = {};

  int64_t in_size() const { return product(in); }
  int64_t out_size() const { return product(out); }
  int64_t kernel_size() const { return product(kernel); }
  int64_t product(const int64_t* v) const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= v[i];
    return n;
  }
};

// Reads kernel/strides/dilations/pads/auto_pad and computes the output size of a forward
// window op (Conv, ConvInteger, QLinearConv, MaxPool, AveragePool, LpPool). `kernel` is the
// kernel_shape (attribute or inferred from the weights). `prefix` is put before each attribute
// name (FusedConv's trailing pool reads pool_strides, pool_pads...). Defined in conv.cpp.
WindowGeometry forward_geometry(const Attributes& attrs, const Shape& x_shape, const Shape& kernel,
                                bool ceil_mode, const char* prefix = "");

// Reads an optional per-spatial-dim int list attribute; fails unless it has `rank` entries.
std::vector<int64_t> spatial_ints(const Attributes& attrs, const char* name, size_t rank,
                                  int64_t fallback);

inline int64_t ceil_div_nonneg(int64_t a, int64_t b) { return (a + b - 1) / b; }

// acc[out plane] += sum over `channels` input channels and the kernel window of
// (x - x_zero) * (w - w_zero). `x` points at the first input channel of the group, `w` at the
// weights of one output channel ([channels, kernel...]). Positions in the padding are skipped,
// which equals padding with x_zero. Loop order keeps the innermost loop on contiguous output
// and (strided) input rows.
template <typename TX, typename TW, typename Acc>
void accumulate_conv_plane(const WindowGeometry& g, const TX* x, int64_t channels, const TW* w,
                           Acc x_zero, Acc w_zero, Acc* acc) {
  const int last = g.rank - 1;
  const int64_t in_plane = g.in_size(), k_plane = g.kernel_size();
  int64_t out_rows = 1, k_rows = 1;
  for (int d = 0; d < last; ++d) {
    out_rows *= g.out[d];
    k_rows *= g.kernel[d];
  }
  const int64_t kw_n = g.kernel[last], ow_n = g.out[last], iw_n = g.in[last];
  const int64_t s = g.stride[last], dil = g.dilation[last], pad = g.pad_begin[last];
  for (int64_t c = 0; c < channels; ++c) {
    const TX* xc = x + c * in_plane;
    const TW* wc = w + c * k_plane;
    int64_t kidx[EDGERT_MAX_RANK] = {};
    for (int64_t kr = 0; kr < k_rows; ++kr) {
      int64_t oidx[EDGERT_MAX_RANK] = {};
      for (int64_t orow = 0; orow < out_rows; ++orow) {
        int64_t in_row = 0;
        bool inside = true;
        for (int d = 0; d < last && inside; ++d) {
          int64_t pos = oidx[d] * g.stride[d] + kidx[d] * g.dilation[d] - g.pad_begin[d];
          inside = pos >= 0 && pos < g.in[d];
          in_row = in_row * g.in[d] + pos;
        }
        if (inside) {
          const TX* xrow = xc + in_row * iw_n;
          Acc* arow = acc + orow * ow_n;
          for (int64_t kw = 0; kw < kw_n; ++kw) {
            const Acc wv = static_cast<Acc>(static_cast<compute_t<TW>>(wc[kr * kw_n + kw])) - w_zero;
            const int64_t shift = kw * dil - pad;  // input column of output column ow: ow*s + shift
            const int64_t lo = shift >= 0 ? 0 : ceil_div_nonneg(-shift, s);
            const int64_t hi = iw_n - 1 - shift < 0 ? 0 : std::min(ow_n, (iw_n - 1 - shift) / s + 1);
            for (int64_t ow = lo; ow < hi; ++ow)
              arow[ow] += (static_cast<Acc>(static_cast<compute_t<TX>>(xrow[ow * s + shift])) - x_zero) * wv;
          }
        }
        for (int d = last - 1; d >= 0; --d) {  // odometer over the outer output dims
          if (++oidx[d] < g.out[d]) break;
          oidx[d] = 0;
        }
      }
      for (int d = last - 1; d >= 0; --d) {  // odometer over the outer kernel dims
        if (++kidx[d] < g.kernel[d]) break;
        kidx[d] = 0;
      }
    }
  }
}

// Calls fn(TypeTag<T>) for the two 8-bit integer types only (quantized ops), so nested
// dispatches stay a 2x2 product instead of 12x12.
template <typename Fn>
decltype(auto) dispatch_8bit(edgert_dtype dtype, Fn&& fn, const char* what) {
  if (dtype == EDGERT_DTYPE_UINT8) return fn(TypeTag<uint8_t>{});
  if (dtype == EDGERT_DTYPE_INT8) return fn(TypeTag<int8_t>{});
  fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s, expected uint8 or int8", what, dtype_name(dtype));
}

inline bool is_8bit(edgert_dtype dtype) {
  return dtype == EDGERT_DTYPE_UINT8 || dtype == EDGERT_DTYPE_INT8;
}

// Round half to even (the default FP environment's nearbyint), add the zero point, saturate
// to Q's range: what QuantizeLinear and ONNX Runtime's requantization do.
template <typename Q>
Q saturate_round(float value, int32_t zero_point) {
  float r = std::nearbyint(value);
  double q = static_cast<double>(r) + zero_point;
  double lo = static_cast<double>(std::numeric_limits<Q>::lowest());
  double hi = static_cast<double>(std::numeric_limits<Q>::max());
  if (std::isnan(q)) q = 0;
  return static_cast<Q>(std::min(hi, std::max(lo, q)));
}

// An optional input: null when the node does not have it.
inline const edgert_tensor* optional_input(const edgert_node& node, const edgert_tensor* in, int i) {
  return has_input(node, in, i) ? &in[i] : nullptr;
}

// Element i of a zero-point tensor (element 0 when it holds one value; 0 when absent).
// Reads in place so execute needs no allocation.
inline int32_t zero_point_at(const edgert_tensor* t, int64_t i) {
  if (!t || numel(*t) == 0) return 0;
  if (numel(*t) == 1) i = 0;
  switch (t->dtype) {
    case EDGERT_DTYPE_UINT8: return data_as<uint8_t>(*t)[i];
    case EDGERT_DTYPE_INT8: return data_as<int8_t>(*t)[i];
    case EDGERT_DTYPE_UINT16: return data_as<uint16_t>(*t)[i];
    case EDGERT_DTYPE_INT16: return data_as<int16_t>(*t)[i];
    case EDGERT_DTYPE_INT32: return data_as<int32_t>(*t)[i];
    default: throw_unsupported_dtype(t->dtype, "zero point");
  }
}

// Element i of a scale tensor as float (element 0 when it holds one value).
inline float scale_at(const edgert_tensor& t, int64_t i) {
  if (numel(t) == 1) i = 0;
  switch (t.dtype) {
    case EDGERT_DTYPE_FLOAT32: return data_as<float>(t)[i];
    case EDGERT_DTYPE_FLOAT16: return data_as<float16>(t)[i];
    case EDGERT_DTYPE_BFLOAT16: return data_as<bfloat16>(t)[i];
    case EDGERT_DTYPE_FLOAT64: return static_cast<float>(data_as<double>(t)[i]);
    default: throw_unsupported_dtype(t.dtype, "scale");
  }
}

inline bool is_float_dtype(edgert_dtype d) {
  return d == EDGERT_DTYPE_FLOAT32 || d == EDGERT_DTYPE_FLOAT64 || d == EDGERT_DTYPE_FLOAT16 ||
         d == EDGERT_DTYPE_BFLOAT16;
}

// Checks that a scale / zero-point tensor is a scalar, a 1-element tensor, or 1-D of `count`
// (per channel); `what` names it in the message.
inline void check_per_channel(const edgert_tensor& t, int64_t count, const char* what) {
  if (numel(t) == 1 && t.rank <= 1) return;
  if (t.rank == 1 && t.dims[0] == count) return;
  fail(EDGERT_ERR_SHAPE, "%s has shape %s, expected a scalar or [%lld]", what,
       shape_string(shape_of(t)).c_str(), static_cast<long long>(count));
}

// The forward convolution of Conv, ConvInteger and QLinearConv. Per output plane: seed the
// accumulators with init(m) (bias), accumulate, then y = finish(acc, m).
template <typename TX, typename TW, typename TY, typename Acc, typename WZero, typename Init,
          typename Finish>
void conv_forward(const WindowGeometry& g, int64_t batch, int64_t in_channels, int64_t out_channels,
                  int64_t group, const TX* x, const TW* w, Acc x_zero, WZero w_zero, Init init,
                  Finish finish, TY* y, Acc* acc) {
  const int64_t cg = in_channels / group, mg = out_channels / group;
  const int64_t in_plane = g.in_size(), out_plane = g.out_size(), k_plane = g.kernel_size();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < out_channels; ++m) {
      const int64_t grp = m / mg;
      std::fill(acc, acc + out_plane, init(m));
      accumulate_conv_plane(g, x + (n * in_channels + grp * cg) * in_plane, cg, w + m * cg * k_plane,
                            x_zero, w_zero(m), acc);
      TY* yp = y + (n * out_channels + m) * out_plane;
      for (int64_t i = 0; i < out_plane; ++i) yp[i] = finish(acc[i], m);
    }
  }
}

// Shape checks shared by Conv, ConvInteger and QLinearConv: X [N, C, spatial...],
// W [M, C/group, kernel...]. Returns the geometry and sets the output shape's dims.
WindowGeometry conv_shapes(const edgert_node& node, const edgert_tensor& x, const edgert_tensor& w,
                           int64_t group, Shape& out_shape);  // defined in conv.cpp

}  // namespace edgert::cpu
