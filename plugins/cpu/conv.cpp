// Convolutions: Conv, ConvTranspose, ConvInteger. Direct loops (no im2col): these are the
// reference the optimized kernels are checked against, so they favour plainness and exact
// accumulation (double for floats) over speed, while keeping memory O(output plane). Conv and
// FusedConv also list the optimized float32 tactics of fast/conv_tactics.h.
#include <algorithm>
#include <cstring>
#include <limits>

#include "activation.h"
#include "fast/conv_expand_depthwise.h"
#include "fast/conv_tactics.h"
#include "fast/pool_rows.h"
#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {

std::vector<int64_t> spatial_ints(const Attributes& attrs, const char* name, size_t rank,
                                  int64_t fallback) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(rank, fallback));
  if (v.size() != rank)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' has %zu values, expected %zu (one per spatial dim)",
         name, v.size(), rank);
  return v;
}

namespace {

// Reads the attributes every window op shares and checks them against the spatial rank.
void read_window_attrs(const Attributes& attrs, size_t r, WindowGeometry& g, std::vector<int64_t>& pads,
                       std::string& auto_pad, const std::string& prefix = "") {
  std::vector<int64_t> strides = spatial_ints(attrs, (prefix + "strides").c_str(), r, 1);
  std::vector<int64_t> dilations = spatial_ints(attrs, (prefix + "dilations").c_str(), r, 1);
  pads = attrs.get_ints((prefix + "pads").c_str(), std::vector<int64_t>(2 * r, 0));
  if (pads.size() != 2 * r)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%spads' has %zu values, expected %zu", prefix.c_str(), pads.size(),
         2 * r);
  auto_pad = attrs.get_string((prefix + "auto_pad").c_str(), "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    fail(EDGERT_ERR_INVALID_ARGUMENT, "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER",
         auto_pad.c_str());
  g.rank = static_cast<int>(r);
  for (size_t i = 0; i < r; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || g.kernel[i] < 1)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "spatial dim %zu: kernel %lld, stride %lld, dilation %lld must all be >= 1",
           i, static_cast<long long>(g.kernel[i]), static_cast<long long>(strides[i]),
           static_cast<long long>(dilations[i]));
    if (pads[i] < 0 || pads[i + r] < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "pads must not be negative");
    g.stride[i] = strides[i];
    g.dilation[i] = dilations[i];
  }
}

}  // namespace

WindowGeometry forward_geometry(const Attributes& attrs, const Shape& x_shape, const Shape& kernel,
                                bool ceil_mode, const char* prefix) {
  if (x_shape.size() < 3)
    fail(EDGERT_ERR_SHAPE, "input has shape %s, expected [N, C, spatial...] (rank >= 3)",
         shape_string(x_shape).c_str());
  const size_t r = x_shape.size() - 2;
  if (kernel.size() != r)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "kernel has %zu dims, input has %zu spatial dims", kernel.size(), r);
  WindowGeometry g;
  for (size_t i = 0; i < r; ++i) g.kernel[i] = kernel[i];
  std::vector<int64_t> pads;
  std::string auto_pad;
  read_window_attrs(attrs, r, g, pads, auto_pad, prefix);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = x_shape[2 + i], s = g.stride[i];
    const int64_t extent = (g.kernel[i] - 1) * g.dilation[i] + 1;
    g.in[i] = in;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = ceil_div_nonneg(in, s);
      int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + extent - in);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
      continue;
    }
    if (auto_pad == "NOTSET") {
      g.pad_begin[i] = pads[i];
      g.pad_end[i] = pads[i + r];
    }
    const int64_t span = in + g.pad_begin[i] + g.pad_end[i] - extent;
    if (span < 0)
      fail(EDGERT_ERR_SHAPE, "spatial dim %zu: padded input %lld is smaller than the dilated kernel %lld", i,
           static_cast<long long>(in + g.pad_begin[i] + g.pad_end[i]), static_cast<long long>(extent));
    if (ceil_mode && auto_pad == "NOTSET") {
      g.out[i] = ceil_div_nonneg(span, s) + 1;
      // The last window must start inside the input or the leading padding (ONNX Runtime, PyTorch).
      if ((g.out[i] - 1) * s >= in + g.pad_begin[i]) --g.out[i];
    } else {
      g.out[i] = span / s + 1;
    }
  }
  return g;
}

WindowGeometry conv_shapes(const edgert_node& node, const edgert_tensor& x, const edgert_tensor& w,
                           int64_t group, Shape& out_shape) {
  if (x.rank < 3) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected >= 3 ([N, C, spatial...])", x.rank);
  if (w.rank != x.rank) fail(EDGERT_ERR_SHAPE, "W has rank %d, X has rank %d; they must match", w.rank, x.rank);
  if (group < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "group %lld must be >= 1", static_cast<long long>(group));
  const int64_t c = x.dims[1], m = w.dims[0];
  if (c != w.dims[1] * group)
    fail(EDGERT_ERR_SHAPE, "X has %lld channels, expected W.dims[1] (%lld) * group (%lld)",
         static_cast<long long>(c), static_cast<long long>(w.dims[1]), static_cast<long long>(group));
  if (m % group != 0)
    fail(EDGERT_ERR_SHAPE, "W has %lld output channels, not a multiple of group %lld", static_cast<long long>(m),
         static_cast<long long>(group));
  Attributes attrs(&node);
  Shape kernel(w.dims + 2, w.dims + w.rank);
  if (attrs.has("kernel_shape") && attrs.get_ints("kernel_shape") != kernel)
    fail(EDGERT_ERR_SHAPE, "kernel_shape %s does not match W's spatial dims %s",
         shape_string(attrs.get_ints("kernel_shape")).c_str(), shape_string(kernel).c_str());
  WindowGeometry g = forward_geometry(attrs, shape_of(x), kernel, false);
  out_shape = {x.dims[0], m};
  for (int i = 0; i < g.rank; ++i) out_shape.push_back(g.out[i]);
  return g;
}

namespace {

class ConvOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    const edgert_tensor &x = in[0], &w = in[1];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (w.dtype != x.dtype) fail(EDGERT_ERR_SHAPE, "W has dtype %s, X has %s", dtype_name(w.dtype), dtype_name(x.dtype));
    group_ = Attributes(&node).get_int("group", 1);
    Shape out_shape;
    g_ = conv_shapes(node, x, w, group_, out_shape);
    if (const edgert_tensor* b = optional_input(node, in, 2)) {
      if (b->dtype != x.dtype || b->rank != 1 || b->dims[0] != w.dims[0])
        fail(EDGERT_ERR_SHAPE, "B has dtype %s shape %s, expected %s [%lld]", dtype_name(b->dtype),
             shape_string(shape_of(*b)).c_str(), dtype_name(x.dtype), static_cast<long long>(w.dims[0]));
    }
    set_output(out[0], x.dtype, out_shape);
    fast_ = tactic() != 0 && fast_conv_.prepare(tactic(), g_, group_, x, w, false, info);
    if (!fast_) info.workspace_bytes = static_cast<size_t>(g_.out_size()) * sizeof(double);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* b = optional_input(node, in, 2);
    if (fast_) {
      fast_conv_.execute(data_as<float>(in[0]), b ? data_as<float>(*b) : nullptr, nullptr, data_as<float>(out[0]),
                         Activation{}, workspace);
      return;
    }
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = acc_t<T>;
      const T* bias = b ? data_as<T>(*b) : nullptr;
      conv_forward(g_, in[0].dims[0], in[0].dims[1], in[1].dims[0], group_, data_as<T>(in[0]),
                   data_as<T>(in[1]), Acc(0), [](int64_t) { return Acc(0); },
                   [&](int64_t m) { return bias ? static_cast<Acc>(static_cast<compute_t<T>>(bias[m])) : Acc(0); },
                   [](Acc v, int64_t) { return static_cast<T>(static_cast<compute_t<T>>(v)); },
                   data_as<T>(out[0]), static_cast<Acc*>(workspace));
    });
  }

 private:
  WindowGeometry g_;
  int64_t group_ = 1;
  bool fast_ = false;
  FastConv fast_conv_;

 public:
  size_t state_bytes() const override { return fast_conv_.state_bytes(); }
  uint64_t inputs_replaced() const override { return fast_ && fast_conv_.reads_only_packed_weights() ? 1u << 1 : 0; }
};

// edgert.FusedConv (builder's activation fusion): Conv + bias, then an optional residual Z
// (input 3, Conv's output shape) added, then an activation; attributes are Conv's plus those in
// activation.h. float32 only. Each output plane is finished right after it is accumulated,
// rounding to float where the separate Conv, Add and activation did. Z may be the output's own
// memory (the memory planner runs it in place): Z[i] is read before Y[i] is written.
// With input 4, S ([N, C, 1, 1]: the builder's channel-scale fusion of squeeze-and-excitation),
// X[n, c] is multiplied by S[n, c] first (rounded to float, as the separate Mul did); only a
// 1x1 convolution without a pool takes it.
// With pool_kernel_shape (the builder's pool fusion; no Z) the result then goes through a 2-D
// MaxPool of pool_kernel_shape, pool_strides, pool_pads and pool_ceil_mode, and Y is the pooled
// tensor: the direct stem tactic pools band by band, the others pool their whole output, held in
// the workspace.
// With inputs 5 and 6, W_pre [E, C, 1, 1] and B_pre [E] (the builder's expand-depthwise fusion),
// X [N, C, H, W] first goes through that 1x1 convolution and the pre_activation /
// pre_activation_params activation (rounded to float as the separate FusedConv rounded it), and
// the convolution is a depthwise one over the E expanded channels (no Z, S or pool then): the
// banded tactic never holds the expanded tensor whole, the reference does, in its workspace.
class FusedConvOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    if (has_input(node, in, 5)) return prepare_expanded(node, in, out, info);
    const edgert_tensor &x = in[0], &w = in[1];
    if (x.dtype != EDGERT_DTYPE_FLOAT32 || w.dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s and W is %s; FusedConv runs float32 only", dtype_name(x.dtype),
           dtype_name(w.dtype));
    const Attributes attrs(&node);
    group_ = attrs.get_int("group", 1);
    Shape out_shape;
    g_ = conv_shapes(node, x, w, group_, out_shape);
    if (const edgert_tensor* b = optional_input(node, in, 2)) {
      if (b->dtype != x.dtype || b->rank != 1 || b->dims[0] != w.dims[0])
        fail(EDGERT_ERR_SHAPE, "B has dtype %s shape %s, expected float32 [%lld]", dtype_name(b->dtype),
             shape_string(shape_of(*b)).c_str(), static_cast<long long>(w.dims[0]));
    }
    const edgert_tensor* z = optional_input(node, in, 3);
    if (z) {
      if (z->dtype != x.dtype || shape_of(*z) != out_shape)
        fail(EDGERT_ERR_SHAPE, "Z has dtype %s shape %s, expected float32 %s", dtype_name(z->dtype),
             shape_string(shape_of(*z)).c_str(), shape_string(out_shape).c_str());
    }
    activation_ = Activation::from_node(node);
    const edgert_tensor* scale = optional_input(node, in, 4);
    scaled_ = scale != nullptr;
    if (scale) {
      const Shape want = {x.dims[0], x.dims[1], 1, 1};
      if (scale->dtype != x.dtype || shape_of(*scale) != want)
        fail(EDGERT_ERR_SHAPE, "S has dtype %s shape %s, expected float32 %s", dtype_name(scale->dtype),
             shape_string(shape_of(*scale)).c_str(), shape_string(want).c_str());
      if (attrs.has("pool_kernel_shape"))
        fail(EDGERT_ERR_INVALID_ARGUMENT, "a FusedConv with a trailing pool takes no channel scale S");
    }
    pooled_ = attrs.has("pool_kernel_shape");
    conv_elements_ = product(out_shape);
    if (pooled_) {
      if (z) fail(EDGERT_ERR_INVALID_ARGUMENT, "a FusedConv with a trailing pool (pool_kernel_shape) takes no Z");
      if (g_.rank != 2)
        fail(EDGERT_ERR_UNSUPPORTED, "a trailing pool needs a 2-D convolution, this one is %d-D", g_.rank);
      pool_g_ = forward_geometry(attrs, out_shape, attrs.get_ints("pool_kernel_shape"),
                                 attrs.get_int("pool_ceil_mode", 0) != 0, "pool_");
      if (pool_g_.dilation[0] != 1 || pool_g_.dilation[1] != 1)
        fail(EDGERT_ERR_UNSUPPORTED, "a trailing pool with dilation is not supported");
      conv_shape_ = out_shape;
      out_shape = {out_shape[0], out_shape[1], pool_g_.out[0], pool_g_.out[1]};
    }
    set_output(out[0], x.dtype, out_shape);
    fast_ = tactic() != 0 && fast_conv_.prepare(tactic(), g_, group_, x, w, z != nullptr, info, scaled_, activation_);
    const size_t conv_workspace = fast_ ? info.workspace_bytes : static_cast<size_t>(g_.out_size()) * sizeof(double);
    info.workspace_bytes = conv_workspace;
    if (scaled_ && !fast_) {
      // The reference scales a copy of X, placed after its accumulators.
      scaled_offset_ = (conv_workspace + 63) / 64 * 64;
      info.workspace_bytes = scaled_offset_ + static_cast<size_t>(product(shape_of(x))) * sizeof(float);
    }
    pool_in_bands_ = pooled_ && fast_ && fast_conv_.prepare_pool(pool_g_, info);
    if (pooled_ && !pool_in_bands_) {
      // The convolution's whole output first (64-byte aligned), then its own workspace.
      conv_bytes_ = (static_cast<size_t>(conv_elements_) * sizeof(float) + 63) / 64 * 64;
      info.workspace_bytes = conv_bytes_ + conv_workspace;
      edgert_tensor c{};
      c.dtype = EDGERT_DTYPE_FLOAT32;
      c.rank = 4;
      for (int d = 0; d < 4; ++d) c.dims[d] = conv_shape_[static_cast<size_t>(d)];
      fast_pool_ = tactic() != 0 && pool_.prepare(kMaxPoolAvx512Tactic, true, false, pool_g_, c, 1);
    }
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    if (expanded_channels_ > 0) return execute_expanded(node, in, out, workspace);
    const edgert_tensor* b = optional_input(node, in, 2);
    const edgert_tensor* zt = optional_input(node, in, 3);
    const float* bias = b ? data_as<float>(*b) : nullptr;
    const float* z = zt ? data_as<float>(*zt) : nullptr;
    float* y = data_as<float>(out[0]);
    if (pool_in_bands_) {
      fast_conv_.execute(data_as<float>(in[0]), bias, nullptr, y, activation_, workspace);
      return;
    }
    // Unpooled, Y; pooled, the workspace's first conv_bytes_.
    float* conv_out = pooled_ ? static_cast<float*>(workspace) : y;
    void* conv_workspace = pooled_ ? static_cast<uint8_t*>(workspace) + conv_bytes_ : workspace;
    const float* scale = scaled_ ? data_as<float>(in[4]) : nullptr;
    if (fast_) {
      fast_conv_.execute(data_as<float>(in[0]), bias, z, conv_out, activation_, conv_workspace, scale);
    } else {
      const float* x = data_as<float>(in[0]);
      if (scale) {
        float* scaled = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + scaled_offset_);
        const int64_t planes = in[0].dims[0] * in[0].dims[1], plane = g_.in_size();
        for (int64_t p = 0; p < planes; ++p)
          for (int64_t i = 0; i < plane; ++i) scaled[p * plane + i] = x[p * plane + i] * scale[p];
        x = scaled;
      }
      reference_conv(x, in[0].dims[0], in[0].dims[1], data_as<float>(in[1]), in[1].dims[0], bias, z, conv_out,
                     static_cast<double*>(conv_workspace));
    }
    if (!pooled_) return;
    if (fast_pool_) return pool_.execute(conv_out, y);
    const int64_t planes = conv_shape_[0] * conv_shape_[1];
    for (int64_t p = 0; p < planes; ++p)
      reference_max_pool_plane(conv_out + p * g_.out_size(), y + p * pool_g_.out_size());
  }

 private:
  // The input-5 form: checks the pre-convolution and the depthwise one after it.
  void prepare_expanded(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
                        edgert_prepare_info& info) {
    const edgert_tensor &x = in[0], &w = in[1], &w_pre = in[5];
    for (const edgert_tensor* t : {&x, &w, &w_pre})
      if (t->dtype != EDGERT_DTYPE_FLOAT32)
        fail(EDGERT_ERR_UNSUPPORTED, "X, W and W_pre must be float32, got %s", dtype_name(t->dtype));
    if (x.rank != 4 || w_pre.rank != 4 || w_pre.dims[1] != x.dims[1] || w_pre.dims[2] != 1 || w_pre.dims[3] != 1)
      fail(EDGERT_ERR_SHAPE, "W_pre has shape %s, expected [Ex%lldx1x1] (a 1x1 convolution) for X %s",
           shape_string(shape_of(w_pre)).c_str(), static_cast<long long>(x.rank > 1 ? x.dims[1] : 0),
           shape_string(shape_of(x)).c_str());
    const int64_t e = w_pre.dims[0];
    if (const edgert_tensor* b_pre = optional_input(node, in, 6)) {
      if (b_pre->dtype != x.dtype || b_pre->rank != 1 || b_pre->dims[0] != e)
        fail(EDGERT_ERR_SHAPE, "B_pre has dtype %s shape %s, expected float32 [%lld]", dtype_name(b_pre->dtype),
             shape_string(shape_of(*b_pre)).c_str(), static_cast<long long>(e));
    }
    const Attributes attrs(&node);
    if (optional_input(node, in, 3) || optional_input(node, in, 4) || attrs.has("pool_kernel_shape"))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "a FusedConv with a pre-convolution (W_pre) takes no Z, S or pool");
    group_ = attrs.get_int("group", 1);
    if (group_ != e || w.dims[0] != e)
      fail(EDGERT_ERR_SHAPE, "after a pre-convolution to %lld channels the convolution must be depthwise over "
           "them (group %lld, W %s)", static_cast<long long>(e), static_cast<long long>(group_),
           shape_string(shape_of(w)).c_str());
    edgert_tensor expanded = x;  // the shape the depthwise convolution sees
    expanded.dims[1] = e;
    Shape out_shape;
    g_ = conv_shapes(node, expanded, w, group_, out_shape);
    if (const edgert_tensor* b = optional_input(node, in, 2)) {
      if (b->dtype != x.dtype || b->rank != 1 || b->dims[0] != e)
        fail(EDGERT_ERR_SHAPE, "B has dtype %s shape %s, expected float32 [%lld]", dtype_name(b->dtype),
             shape_string(shape_of(*b)).c_str(), static_cast<long long>(e));
    }
    activation_ = Activation::from_node(node);
    const std::vector<float> pre_params = attrs.get_floats("pre_activation_params");
    pre_activation_ = Activation::parse(attrs.get_string("pre_activation", ""), pre_params.data(), pre_params.size());
    expanded_channels_ = e;
    set_output(out[0], x.dtype, out_shape);
    gemm::Isa isa = gemm::Isa::Portable;
    fast_ = expand_depthwise_tactic(tactic(), &isa) && w.data && w_pre.data &&
            expand_depthwise_.prepare(isa, x.dims[0], x.dims[1], e, g_, data_as<float>(w_pre), data_as<float>(w),
                                      info);
    if (!fast_) {
      // The expanded tensor (64-byte aligned), then the accumulators
      expanded_bytes_ = (static_cast<size_t>(x.dims[0] * e * g_.in_size()) * sizeof(float) + 63) / 64 * 64;
      // (the accumulators serve the pre-convolution's planes first: the larger ones with stride 2)
      info.workspace_bytes = expanded_bytes_ + static_cast<size_t>(std::max(g_.in_size(), g_.out_size())) * sizeof(double);
    }
  }

  void execute_expanded(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) {
    const edgert_tensor* b = optional_input(node, in, 2);
    const edgert_tensor* b_pre = optional_input(node, in, 6);
    const float* bias = b ? data_as<float>(*b) : nullptr;
    const float* bias_pre = b_pre ? data_as<float>(*b_pre) : nullptr;
    float* y = data_as<float>(out[0]);
    if (fast_) {
      expand_depthwise_.execute(data_as<float>(in[0]), bias_pre, pre_activation_, bias, activation_, y, workspace);
      return;
    }
    // The pre-convolution in full, as the separate FusedConv computed it: double sums from the
    // bias, rounded to float, then its activation.
    const float* x = data_as<float>(in[0]);
    const float* w_pre = data_as<float>(in[5]);
    const int64_t batch = in[0].dims[0], channels = in[0].dims[1], e = expanded_channels_, plane = g_.in_size();
    float* expanded = static_cast<float*>(workspace);
    double* acc = reinterpret_cast<double*>(static_cast<uint8_t*>(workspace) + expanded_bytes_);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t m = 0; m < e; ++m) {
        std::fill(acc, acc + plane, bias_pre ? static_cast<double>(bias_pre[m]) : 0.0);
        for (int64_t c = 0; c < channels; ++c) {
          const double wv = w_pre[m * channels + c];
          const float* xp = x + (n * channels + c) * plane;
          for (int64_t i = 0; i < plane; ++i) acc[i] += wv * static_cast<double>(xp[i]);
        }
        float* dst = expanded + (n * e + m) * plane;
        for (int64_t i = 0; i < plane; ++i) dst[i] = pre_activation_.apply(static_cast<float>(acc[i]));
      }
    }
    reference_conv(expanded, batch, e, data_as<float>(in[1]), e, bias, nullptr, y, acc);
  }

  void reference_conv(const float* x, int64_t batch, int64_t channels, const float* w, int64_t out_channels,
                      const float* bias, const float* z, float* y, double* acc) const {
    const int64_t cg = channels / group_, mg = out_channels / group_;
    const int64_t in_plane = g_.in_size(), out_plane = g_.out_size(), k_plane = g_.kernel_size();
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t m = 0; m < out_channels; ++m) {
        std::fill(acc, acc + out_plane, bias ? static_cast<double>(bias[m]) : 0.0);
        accumulate_conv_plane(g_, x + (n * channels + (m / mg) * cg) * in_plane, cg, w + m * cg * k_plane, 0.0, 0.0,
                              acc);
        const int64_t base = (n * out_channels + m) * out_plane;
        for (int64_t i = 0; i < out_plane; ++i) {
          float v = static_cast<float>(acc[i]);
          if (z) v = v + z[base + i];
          y[base + i] = activation_.apply(v);
        }
      }
    }
  }

  // MaxPool's reference on one plane: the first non-NaN value of the window, then strictly
  // greater ones; lowest() when the window holds none.
  void reference_max_pool_plane(const float* x, float* y) const {
    const WindowGeometry& g = pool_g_;
    for (int64_t oy = 0; oy < g.out[0]; ++oy) {
      for (int64_t ox = 0; ox < g.out[1]; ++ox) {
        float best = std::numeric_limits<float>::lowest();
        bool found = false;
        for (int64_t ky = 0; ky < g.kernel[0]; ++ky) {
          const int64_t iy = oy * g.stride[0] - g.pad_begin[0] + ky;
          if (iy < 0 || iy >= g.in[0]) continue;
          for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
            const int64_t ix = ox * g.stride[1] - g.pad_begin[1] + kx;
            if (ix < 0 || ix >= g.in[1]) continue;
            const float v = x[iy * g.in[1] + ix];
            if (found ? v > best : v == v) {
              best = v;
              found = true;
            }
          }
        }
        y[oy * g.out[1] + ox] = best;
      }
    }
  }

  static int64_t product(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  }

  WindowGeometry g_, pool_g_;
  int64_t group_ = 1;
  Activation activation_;
  bool fast_ = false;
  FastConv fast_conv_;
  bool pooled_ = false, pool_in_bands_ = false, fast_pool_ = false, scaled_ = false;
  size_t scaled_offset_ = 0;
  // The input-5 form: the pre-convolution's output channels (0 without one), its activation.
  int64_t expanded_channels_ = 0;
  Activation pre_activation_;
  size_t expanded_bytes_ = 0;
  ExpandDepthwise expand_depthwise_;
  Shape conv_shape_;
  int64_t conv_elements_ = 0;
  size_t conv_bytes_ = 0;
  FastPool pool_;

 public:
  size_t state_bytes() const override { return fast_conv_.state_bytes() + expand_depthwise_.state_bytes(); }
  // W (1) as packed by the fused convolution; with a pre-convolution, its weights (5) are packed
  // and the depthwise W is copied at prepare, so only the pre-convolution's are replaced.
  uint64_t inputs_replaced() const override {
    if (!fast_) return 0;
    if (expanded_channels_ > 0) return uint64_t{1} << 5;
    return fast_conv_.reads_only_packed_weights() ? uint64_t{1} << 1 : 0;
  }
};

class ConvIntegerOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    const edgert_tensor &x = in[0], &w = in[1];
    if (!is_8bit(x.dtype) || !is_8bit(w.dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "x is %s and w is %s, expected uint8 or int8", dtype_name(x.dtype),
           dtype_name(w.dtype));
    group_ = Attributes(&node).get_int("group", 1);
    Shape out_shape;
    g_ = conv_shapes(node, x, w, group_, out_shape);
    if (const edgert_tensor* xz = optional_input(node, in, 2)) {
      if (xz->dtype != x.dtype) fail(EDGERT_ERR_SHAPE, "x_zero_point has dtype %s, x has %s", dtype_name(xz->dtype), dtype_name(x.dtype));
      check_per_channel(*xz, 1, "x_zero_point");
    }
    if (const edgert_tensor* wz = optional_input(node, in, 3)) {
      if (wz->dtype != w.dtype) fail(EDGERT_ERR_SHAPE, "w_zero_point has dtype %s, w has %s", dtype_name(wz->dtype), dtype_name(w.dtype));
      check_per_channel(*wz, w.dims[0], "w_zero_point");
    }
    set_output(out[0], EDGERT_DTYPE_INT32, out_shape);
    info.workspace_bytes = static_cast<size_t>(g_.out_size()) * sizeof(int32_t);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* xz = optional_input(node, in, 2);
    const edgert_tensor* wz = optional_input(node, in, 3);
    dispatch_8bit(in[0].dtype, [&](auto xtag) {
      dispatch_8bit(in[1].dtype, [&](auto wtag) {
        using TX = typename decltype(xtag)::type;
        using TW = typename decltype(wtag)::type;
        conv_forward(g_, in[0].dims[0], in[0].dims[1], in[1].dims[0], group_, data_as<TX>(in[0]),
                     data_as<TW>(in[1]), zero_point_at(xz, 0), [&](int64_t m) { return zero_point_at(wz, m); },
                     [](int64_t) { return int32_t(0); }, [](int32_t v, int64_t) { return v; },
                     data_as<int32_t>(out[0]), static_cast<int32_t*>(workspace));
      }, "w");
    }, "x");
  }

 private:
  WindowGeometry g_;
  int64_t group_ = 1;
};

// Y[n, m, o] += X[n, c, i] * W[c, m', k] where o = i * stride + k * dilation - pad_begin.
// Scatter form of the direct loop: per output plane, walk the input rows and the kernel, the
// innermost loop over a contiguous input row.
class ConvTransposeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    const edgert_tensor &x = in[0], &w = in[1];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (w.dtype != x.dtype) fail(EDGERT_ERR_SHAPE, "W has dtype %s, X has %s", dtype_name(w.dtype), dtype_name(x.dtype));
    if (x.rank < 3) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected >= 3 ([N, C, spatial...])", x.rank);
    if (w.rank != x.rank) fail(EDGERT_ERR_SHAPE, "W has rank %d, X has rank %d; they must match", w.rank, x.rank);
    Attributes attrs(&node);
    group_ = attrs.get_int("group", 1);
    if (group_ < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "group %lld must be >= 1", static_cast<long long>(group_));
    if (x.dims[1] != w.dims[0] || x.dims[1] % group_ != 0)
      fail(EDGERT_ERR_SHAPE, "X has %lld channels, W.dims[0] is %lld, group %lld: expected equal and divisible",
           static_cast<long long>(x.dims[1]), static_cast<long long>(w.dims[0]), static_cast<long long>(group_));
    const int64_t m = w.dims[1] * group_;
    const size_t r = static_cast<size_t>(x.rank - 2);
    Shape kernel(w.dims + 2, w.dims + w.rank);
    if (attrs.has("kernel_shape") && attrs.get_ints("kernel_shape") != kernel)
      fail(EDGERT_ERR_SHAPE, "kernel_shape %s does not match W's spatial dims %s",
           shape_string(attrs.get_ints("kernel_shape")).c_str(), shape_string(kernel).c_str());
    g_ = WindowGeometry{};
    for (size_t i = 0; i < r; ++i) g_.kernel[i] = kernel[i];
    std::vector<int64_t> pads;
    std::string auto_pad;
    read_window_attrs(attrs, r, g_, pads, auto_pad);
    std::vector<int64_t> output_padding = spatial_ints(attrs, "output_padding", r, 0);
    std::vector<int64_t> output_shape = attrs.get_ints("output_shape");
    if (output_shape.size() == r + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (!output_shape.empty() && output_shape.size() != r)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "output_shape has %zu values, expected %zu", output_shape.size(), r);
    for (size_t i = 0; i < r; ++i) {
      const int64_t in_size = x.dims[2 + i], s = g_.stride[i];
      const int64_t extent = (kernel[i] - 1) * g_.dilation[i] + 1;
      const int64_t full = s * (in_size - 1) + output_padding[i] + extent;  // size with no padding
      g_.in[i] = in_size;
      if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        // Padding is whatever makes the requested size; a negative total (output_shape larger
        // than the full result) leaves zeros at the end, as ONNX Runtime does.
        g_.out[i] = output_shape.empty() ? in_size * s : output_shape[i];
        int64_t total = std::max<int64_t>(0, full - g_.out[i]);
        g_.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        g_.pad_end[i] = total - g_.pad_begin[i];
      } else {
        if (auto_pad == "NOTSET") {
          g_.pad_begin[i] = pads[i];
          g_.pad_end[i] = pads[i + r];
        }
        g_.out[i] = full - g_.pad_begin[i] - g_.pad_end[i];
      }
      if (g_.out[i] < 0) fail(EDGERT_ERR_SHAPE, "spatial dim %zu: output size %lld is negative", i, static_cast<long long>(g_.out[i]));
    }
    if (const edgert_tensor* b = optional_input(node, in, 2)) {
      if (b->dtype != x.dtype || b->rank != 1 || b->dims[0] != m)
        fail(EDGERT_ERR_SHAPE, "B has dtype %s shape %s, expected %s [%lld]", dtype_name(b->dtype),
             shape_string(shape_of(*b)).c_str(), dtype_name(x.dtype), static_cast<long long>(m));
    }
    Shape out_shape = {x.dims[0], m};
    for (size_t i = 0; i < r; ++i) out_shape.push_back(g_.out[i]);
    set_output(out[0], x.dtype, out_shape);
    info.workspace_bytes = static_cast<size_t>(g_.out_size()) * sizeof(double);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* b = optional_input(node, in, 2);
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      run<T>(in[0], in[1], b ? data_as<T>(*b) : nullptr, out[0], static_cast<double*>(workspace));
    });
  }

 private:
  template <typename T>
  void run(const edgert_tensor& xt, const edgert_tensor& wt, const T* bias, edgert_tensor& yt, double* acc) {
    const WindowGeometry& g = g_;
    const int64_t batch = xt.dims[0], channels = xt.dims[1], mg = wt.dims[1], m_total = mg * group_;
    const int64_t cg = channels / group_;
    const int64_t in_plane = g.in_size(), out_plane = g.out_size(), k_plane = g.kernel_size();
    const int last = g.rank - 1;
    int64_t in_rows = 1, k_rows = 1;
    for (int d = 0; d < last; ++d) {
      in_rows *= g.in[d];
      k_rows *= g.kernel[d];
    }
    const int64_t kw_n = g.kernel[last], ow_n = g.out[last], iw_n = g.in[last];
    const int64_t s = g.stride[last], dil = g.dilation[last], pad = g.pad_begin[last];
    const T* x = data_as<T>(xt);
    const T* w = data_as<T>(wt);
    T* y = data_as<T>(yt);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t m = 0; m < m_total; ++m) {
        const int64_t grp = m / mg, oc = m % mg;
        std::fill(acc, acc + out_plane, bias ? static_cast<double>(static_cast<compute_t<T>>(bias[m])) : 0.0);
        for (int64_t ci = 0; ci < cg; ++ci) {
          const int64_t c = grp * cg + ci;
          const T* xc = x + (n * channels + c) * in_plane;
          const T* wc = w + (c * mg + oc) * k_plane;
          int64_t kidx[EDGERT_MAX_RANK] = {};
          for (int64_t kr = 0; kr < k_rows; ++kr) {
            int64_t iidx[EDGERT_MAX_RANK] = {};
            for (int64_t irow = 0; irow < in_rows; ++irow) {
              int64_t out_row = 0;
              bool inside = true;
              for (int d = 0; d < last && inside; ++d) {
                int64_t pos = iidx[d] * g.stride[d] + kidx[d] * g.dilation[d] - g.pad_begin[d];
                inside = pos >= 0 && pos < g.out[d];
                out_row = out_row * g.out[d] + pos;
              }
              if (inside) {
                const T* xrow = xc + irow * iw_n;
                double* arow = acc + out_row * ow_n;
                for (int64_t kw = 0; kw < kw_n; ++kw) {
                  const double wv = static_cast<double>(static_cast<compute_t<T>>(wc[kr * kw_n + kw]));
                  const int64_t shift = kw * dil - pad;  // output column of input column iw: iw*s + shift
                  const int64_t lo = shift >= 0 ? 0 : ceil_div_nonneg(-shift, s);
                  const int64_t hi = ow_n - 1 - shift < 0 ? 0 : std::min(iw_n, (ow_n - 1 - shift) / s + 1);
                  for (int64_t iw = lo; iw < hi; ++iw)
                    arow[iw * s + shift] += static_cast<double>(static_cast<compute_t<T>>(xrow[iw])) * wv;
                }
              }
              for (int d = last - 1; d >= 0; --d) {
                if (++iidx[d] < g.in[d]) break;
                iidx[d] = 0;
              }
            }
            for (int d = last - 1; d >= 0; --d) {
              if (++kidx[d] < g.kernel[d]) break;
              kidx[d] = 0;
            }
          }
        }
        T* yp = y + (n * m_total + m) * out_plane;
        for (int64_t i = 0; i < out_plane; ++i) yp[i] = static_cast<T>(static_cast<compute_t<T>>(acc[i]));
      }
    }
  }

  WindowGeometry g_;
  int64_t group_ = 1;
};

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add<ConvOp>("Conv", "ref-conv", nullptr, conv_tactics);
  r.add_in_domain<FusedConvOp>("edgert", "FusedConv", "ref-fused-conv", nullptr, conv_tactics);
  r.add<ConvTransposeOp>("ConvTranspose", "ref-conv-transpose");
  r.add<ConvIntegerOp>("ConvInteger", "ref-conv-integer");
}

}  // namespace edgert::cpu
