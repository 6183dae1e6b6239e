// DeformConv (opset 19): a convolution whose every kernel tap samples the input at its regular
// position moved by a learned fractional offset, optionally scaled by a learned mask.
//
// X [N, C, spatial...], W [oC, C / group, kernel...], offset [N, offset_group * K * r, out...]
// with K taps per kernel and r spatial dims (for each offset group and tap, one displacement per
// spatial axis, in axis order), optional B [oC] and mask [N, offset_group * K, out...]. Input
// channel c uses offset group c / (C / offset_group). The window geometry (pads, strides,
// dilations) is Conv's. A displaced tap reads the input by multilinear interpolation between
// the surrounding pixels, counting pixels outside the input as zero: GridSample's bilinear
// sampling with zero padding and align_corners=1, which is how the ONNX reference defines it.
#include <cmath>

#include "nn_common.h"

namespace edgert::cpu {
namespace {

enum Input { kX, kW, kOffset, kBias, kMask };

long long ll(int64_t v) { return static_cast<long long>(v); }

class DeformConvOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    const edgert_tensor& x = in[kX];
    const edgert_tensor& w = in[kW];
    dtype_ = x.dtype;
    dispatch(dtype_, kFloats, [](auto) {}, "X");
    if (x.rank < 3)
      fail(EDGERT_ERR_SHAPE, "X must be [N, C, spatial...] (rank >= 3), it is %s", shape_string(shape_of(x)).c_str());
    if (w.rank != x.rank)
      fail(EDGERT_ERR_SHAPE, "W %s must have X's rank %d (X is %s)", shape_string(shape_of(w)).c_str(), x.rank,
           shape_string(shape_of(x)).c_str());
    for (int i : {kW, kOffset, kBias, kMask})
      if (has_input(node, in, i) && in[i].dtype != dtype_)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "%s has dtype %s, expected X's dtype %s", input_name(i), dtype_name(in[i].dtype),
             dtype_name(dtype_));

    const Shape x_shape = shape_of(x), w_shape = shape_of(w);
    Shape kernel(w_shape.begin() + 2, w_shape.end());
    if (attrs.has("kernel_shape") && attrs.get_ints("kernel_shape") != kernel)
      fail(EDGERT_ERR_SHAPE, "kernel_shape %s differs from W's spatial dims %s",
           shape_string(attrs.get_ints("kernel_shape")).c_str(), shape_string(kernel).c_str());
    geometry_ = forward_geometry(attrs, x_shape, kernel, false);

    batch_ = x_shape[0];
    channels_ = x_shape[1];
    out_channels_ = w_shape[0];
    group_ = attrs.get_int("group", 1);
    offset_group_ = attrs.get_int("offset_group", 1);
    if (group_ < 1 || channels_ % group_ != 0 || out_channels_ % group_ != 0 || w_shape[1] * group_ != channels_)
      fail(EDGERT_ERR_SHAPE, "group %lld does not fit X %s and W %s: C and oC must be multiples of group, W's axis 1 C / group",
           ll(group_), shape_string(x_shape).c_str(), shape_string(w_shape).c_str());
    if (offset_group_ < 1 || channels_ % offset_group_ != 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "offset_group %lld must divide the %lld input channels", ll(offset_group_),
           ll(channels_));

    const int r = geometry_.rank;
    Shape out_shape{batch_, out_channels_};
    for (int d = 0; d < r; ++d) out_shape.push_back(geometry_.out[d]);
    const int64_t taps = geometry_.kernel_size();
    require_map(in[kOffset], "offset", offset_group_ * taps * r, "offset_group * kernel taps * spatial rank", out_shape);
    if (has_input(node, in, kBias) && shape_of(in[kBias]) != Shape{out_channels_})
      fail(EDGERT_ERR_SHAPE, "B must be [oC = %lld], it is %s", ll(out_channels_), shape_string(shape_of(in[kBias])).c_str());
    has_mask_ = has_input(node, in, kMask);
    if (has_mask_) require_map(in[kMask], "mask", offset_group_ * taps, "offset_group * kernel taps", out_shape);
    has_bias_ = has_input(node, in, kBias);
    set_output(out[0], dtype_, out_shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(dtype_, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      auto value = [](const T* p, int64_t i) { return static_cast<double>(static_cast<C>(p[i])); };
      const T* x = data_as<T>(in[kX]);
      const T* w = data_as<T>(in[kW]);
      const T* offset = data_as<T>(in[kOffset]);
      const T* bias = has_bias_ ? data_as<T>(in[kBias]) : nullptr;
      const T* mask = has_mask_ ? data_as<T>(in[kMask]) : nullptr;
      T* y = data_as<T>(out[0]);
      const WindowGeometry& g = geometry_;
      const int r = g.rank;
      const int64_t taps = g.kernel_size(), out_size = g.out_size(), in_size = g.in_size();
      const int64_t channels_per_group = channels_ / group_, out_per_group = out_channels_ / group_;
      const int64_t channels_per_offset_group = channels_ / offset_group_;
      int64_t o_index[EDGERT_MAX_RANK] = {}, k_index[EDGERT_MAX_RANK] = {};
      double position[EDGERT_MAX_RANK] = {};
      for (int64_t n = 0; n < batch_; ++n)
        for (int64_t oc = 0; oc < out_channels_; ++oc) {
          const int64_t first_channel = oc / out_per_group * channels_per_group;
          for (int64_t o = 0; o < out_size; ++o) {
            unflatten(o, g.out, r, o_index);
            double sum = bias ? value(bias, oc) : 0.0;
            for (int64_t ci = 0; ci < channels_per_group; ++ci) {
              const int64_t c = first_channel + ci;
              const int64_t og = c / channels_per_offset_group;
              const T* plane = x + (n * channels_ + c) * in_size;
              for (int64_t k = 0; k < taps; ++k) {
                unflatten(k, g.kernel, r, k_index);
                for (int d = 0; d < r; ++d) {
                  const int64_t channel = ((n * offset_group_ + og) * taps + k) * r + d;
                  position[d] = static_cast<double>(o_index[d] * g.stride[d] - g.pad_begin[d] + k_index[d] * g.dilation[d]) +
                                value(offset, channel * out_size + o);
                }
                double sample = interpolate(plane, position, value);
                if (mask) sample *= value(mask, ((n * offset_group_ + og) * taps + k) * out_size + o);
                sum += value(w, (oc * channels_per_group + ci) * taps + k) * sample;
              }
            }
            y[(n * out_channels_ + oc) * out_size + o] = static_cast<T>(static_cast<C>(sum));
          }
        }
    });
  }

 private:
  static const char* input_name(int i) {
    static const char* const names[] = {"X", "W", "offset", "B", "mask"};
    return names[i];
  }

  // offset and mask: [N, channels, out...] with out the convolution's output spatial dims.
  static void require_map(const edgert_tensor& t, const char* what, int64_t channels, const char* channels_meaning,
                          const Shape& out_shape) {
    Shape expected = out_shape;
    expected[1] = channels;
    if (shape_of(t) != expected)
      fail(EDGERT_ERR_SHAPE, "%s must be %s (N, %s, output spatial dims), it is %s", what, shape_string(expected).c_str(),
           channels_meaning, shape_string(shape_of(t)).c_str());
  }

  static void unflatten(int64_t flat, const int64_t* dims, int rank, int64_t* index) {
    for (int d = rank - 1; d >= 0; --d) {
      index[d] = flat % dims[d];
      flat /= dims[d];
    }
  }

  // Multilinear interpolation of one input plane at a fractional position; the 2^rank
  // surrounding pixels that fall outside the plane contribute zero.
  template <typename T, typename ValueFn>
  double interpolate(const T* plane, const double* position, ValueFn& value) const {
    const WindowGeometry& g = geometry_;
    const int r = g.rank;
    int64_t low[EDGERT_MAX_RANK];
    double frac[EDGERT_MAX_RANK];
    for (int d = 0; d < r; ++d) {
      const double f = std::floor(position[d]);
      // Far outside the plane every corner is zero; also keeps the cast below in range.
      if (!(f >= -1.0 && f <= static_cast<double>(g.in[d]))) return 0.0;
      low[d] = static_cast<int64_t>(f);
      frac[d] = position[d] - f;
    }
    double result = 0;
    for (int corner = 0; corner < (1 << r); ++corner) {
      double weight = 1;
      int64_t index = 0;
      bool inside = true;
      for (int d = 0; d < r && inside; ++d) {
        const bool upper = (corner >> d) & 1;
        const int64_t i = low[d] + (upper ? 1 : 0);
        weight *= upper ? frac[d] : 1.0 - frac[d];
        inside = i >= 0 && i < g.in[d];
        index = index * g.in[d] + i;
      }
      if (inside && weight != 0) result += weight * value(plane, index);
    }
    return result;
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_UNDEFINED;
  WindowGeometry geometry_;
  int64_t batch_ = 0, channels_ = 0, out_channels_ = 0, group_ = 1, offset_group_ = 1;
  bool has_bias_ = false, has_mask_ = false;
};

}  // namespace

void register_deform_conv_kernels(KernelRegistry& r) {
  r.add<DeformConvOp>("DeformConv", "ref-deform-conv");
}

}  // namespace edgert::cpu
