// The INT8 network's ops between its convolutions, on the GPU: QuantizeLinear (per-tensor, uint8;
// with input_layout = "NCHW" on a channels-last node it also reformats, the builder's choice for
// an engine input) and DequantizeLinear (per-tensor, uint8), com.microsoft QLinearAdd and QLinearMul (operands of
// the output's shape, or a per-channel [N, C, 1, 1] one: squeeze-excitation's scale),
// QLinearGlobalAveragePool and edgert.QLookup (a 256-entry table). The arithmetic is the CPU
// reference kernels' (plugins/cpu/quantize.cpp, qlinear_contrib.cpp, qlookup.cpp) operation for
// operation in float, so the bytes are the same. Scales and zero points are read on the host.
// All are elementwise or per channel, so they take either layout (the layout attribute says
// which for the per-channel ones).
#include <string>

#include "activation.cuh"
#include "cuda_op.h"
#include "grid.cuh"
#include "quantization_operands.h"
#include "layout.h"
#include "quantize.cuh"

namespace edgert::cuda {
namespace {

constexpr unsigned kThreads = 256;

bool is_uint8_or_unknown(const edgert_tensor& t) {
  return t.dtype == EDGERT_DTYPE_UNDEFINED || t.dtype == EDGERT_DTYPE_UINT8;
}

// Scales and zero points: one value each (per-tensor quantization).
bool scalar_or_unknown(const edgert_tensor& t) { return t.rank < 0 || numel(t) == 1; }

void require_uint8(const edgert_tensor& t, const char* what) {
  if (t.dtype != EDGERT_DTYPE_UINT8)
    fail(EDGERT_ERR_UNSUPPORTED, "%s is %s; the GPU's INT8 kernels take uint8", what, edgert_dtype_name(t.dtype));
}

// ---- QuantizeLinear / DequantizeLinear --------------------------------------------------------

// NCHW float in, channels-last bytes out (input_layout = "NCHW" with layout = "NHWC": the engine's
// input quantized and reformatted in one pass): a thread per pixel, reading each channel's plane
// along the pixels.
template <typename T>
__global__ void quantize_to_nhwc_kernel(const T* __restrict__ x, uint8_t* __restrict__ y, int64_t images,
                                        int64_t channels, int64_t plane, float scale, int32_t zero_point) {
  grid_stride(images * plane, [&](auto i) {
    const int64_t n = static_cast<int64_t>(i) / plane, p = static_cast<int64_t>(i) - n * plane;
    for (int64_t c = 0; c < channels; ++c)
      y[(n * plane + p) * channels + c] =
          saturate_u8(__fdiv_rn(to_float(x[(n * channels + c) * plane + p]), scale), zero_point);
  });
}

template <typename T>
__global__ void quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ y, int64_t n, float scale,
                                int32_t zero_point) {
  grid_stride(n, [&](auto i) { y[i] = saturate_u8(__fdiv_rn(to_float(x[i]), scale), zero_point); });
}

__global__ void dequantize_kernel(const uint8_t* __restrict__ x, float* __restrict__ y, int64_t n, float scale,
                                  int32_t zero_point) {
  grid_stride(n, [&](auto i) { y[i] = __fmul_rn(static_cast<float>(static_cast<int32_t>(x[i]) - zero_point), scale); });
}

int32_t quantize_supports(const edgert_node* node, const edgert_tensor* in) {
  const Attributes attrs(node);
  if (attrs.get_int("block_size", 0) != 0) return 0;
  const int64_t output_dtype = attrs.get_int("output_dtype", 0);
  if (output_dtype != 0 && output_dtype != EDGERT_DTYPE_UINT8) return 0;
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[0].dtype)) return 0;
  if (in[1].dtype != EDGERT_DTYPE_UNDEFINED && in[1].dtype != EDGERT_DTYPE_FLOAT32) return 0;
  if (optional_present(node, in, 2) && !is_uint8_or_unknown(in[2])) return 0;
  return scalar_or_unknown(in[1]) && (!optional_present(node, in, 2) || scalar_or_unknown(in[2]));
}

int32_t dequantize_supports(const edgert_node* node, const edgert_tensor* in) {
  if (!is_uint8_or_unknown(in[0])) return 0;
  if (in[1].dtype != EDGERT_DTYPE_UNDEFINED && in[1].dtype != EDGERT_DTYPE_FLOAT32) return 0;
  if (optional_present(node, in, 2) && !is_uint8_or_unknown(in[2])) return 0;
  return scalar_or_unknown(in[1]) && (!optional_present(node, in, 2) || scalar_or_unknown(in[2]));
}

class QuantizeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "x is %s; the GPU quantizes float32 and float16", edgert_dtype_name(in[0].dtype));
    dtype_ = in[0].dtype;
    to_nhwc_ = in[0].rank == 4 && channels_last(node) && Attributes(&node).get_string("input_layout", "") == "NCHW";
    if (to_nhwc_) {
      images_ = in[0].dims[0];
      channels_ = in[0].dims[1];
      plane_ = in[0].dims[2] * in[0].dims[3];
    }
    scale_ = scalar_scale(in[1], "y_scale");
    zero_point_ = uint8_zero_point(node, in, 2, "y_zero_point");
    set_output(out[0], EDGERT_DTYPE_UINT8, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    const int64_t n = numel(in[0]);
    if (n == 0) return;
    uint8_t* y = static_cast<uint8_t*>(out[0].data);
    if (to_nhwc_) {
      const unsigned blocks = blocks_for(images_ * plane_, kThreads);
      if (dtype_ == EDGERT_DTYPE_FLOAT16)
        quantize_to_nhwc_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(in[0].data), y, images_,
                                                                 channels_, plane_, scale_, zero_point_);
      else
        quantize_to_nhwc_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(in[0].data), y, images_,
                                                                 channels_, plane_, scale_, zero_point_);
      check_launch("quantize_to_nhwc");
      return;
    }
    if (dtype_ == EDGERT_DTYPE_FLOAT16)
      quantize_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const __half*>(in[0].data), y, n,
                                                                       scale_, zero_point_);
    else
      quantize_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const float*>(in[0].data), y, n,
                                                                       scale_, zero_point_);
    check_launch("quantize");
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  float scale_ = 1;
  int32_t zero_point_ = 0;
  bool to_nhwc_ = false;
  int64_t images_ = 0, channels_ = 0, plane_ = 0;
};

class DequantizeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    require_uint8(in[0], "x");
    if (in[1].dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "x_scale is %s; the GPU dequantizes to float32", edgert_dtype_name(in[1].dtype));
    scale_ = scalar_scale(in[1], "x_scale");
    zero_point_ = uint8_zero_point(node, in, 2, "x_zero_point");
    set_output(out[0], EDGERT_DTYPE_FLOAT32, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    const int64_t n = numel(in[0]);
    if (n == 0) return;
    dequantize_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(in[0].data), static_cast<float*>(out[0].data), n, scale_, zero_point_);
    check_launch("dequantize");
  }

 private:
  float scale_ = 1;
  int32_t zero_point_ = 0;
};

// ---- QLinearAdd / QLinearMul ------------------------------------------------------------------

// Where the second operand's element for output element i lies: the same index, or its
// channel's in an [N, C, 1, 1] operand (NCHW: i / plane; NHWC: n * C + i % C).
enum class Operand : int { kFull, kChannelNchw, kChannelNhwc };

struct BinaryPlan {
  Operand b = Operand::kFull;
  bool swapped = false;  // A is the per-channel operand (the sum and product commute)
  int64_t channels = 1, plane = 1;
};

template <bool kMul>
__global__ void qbinary_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, uint8_t* __restrict__ c,
                               int64_t n, BinaryPlan plan, int32_t za, int32_t zb, int32_t zc, float ra, float rb) {
  grid_stride(n, [&](auto i) {
    using I = decltype(i);
    I j = i;
    if (plan.b == Operand::kChannelNchw) j = i / static_cast<I>(plan.plane);
    else if (plan.b == Operand::kChannelNhwc)
      j = i / static_cast<I>(plan.plane * plan.channels) * static_cast<I>(plan.channels) + i % static_cast<I>(plan.channels);
    const int32_t da = static_cast<int32_t>(a[i]) - za, db = static_cast<int32_t>(b[j]) - zb;
    const float v = kMul ? __fmul_rn(static_cast<float>(da * db), ra)
                         : __fadd_rn(__fmul_rn(static_cast<float>(da), ra), __fmul_rn(static_cast<float>(db), rb));
    c[i] = saturate_u8(v, zc);
  });
}

bool per_channel_of(const edgert_tensor& small, const edgert_tensor& full) {
  return full.rank == 4 && small.rank == 4 && small.dims[0] == full.dims[0] && small.dims[1] == full.dims[1] &&
         small.dims[2] == 1 && small.dims[3] == 1;
}

int32_t qbinary_supports(const edgert_node* node, const edgert_tensor* in) {
  if (node->num_inputs < 7) return 0;
  if (!is_uint8_or_unknown(in[0]) || !is_uint8_or_unknown(in[3])) return 0;
  for (int i : {1, 4, 6})
    if (!scalar_or_unknown(in[i])) return 0;
  for (int i : {2, 5, 7})
    if (optional_present(node, in, i) && (!is_uint8_or_unknown(in[i]) || !scalar_or_unknown(in[i]))) return 0;
  if (in[0].rank < 0 || in[3].rank < 0) return 1;
  const edgert_tensor &a = in[0], &b = in[3];
  return shape_of(a) == shape_of(b) || per_channel_of(a, b) || per_channel_of(b, a);
}

template <bool kMul>
class QBinaryOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (node.num_inputs < 7) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least 7 inputs, got %d", node.num_inputs);
    require_uint8(in[0], "A");
    require_uint8(in[3], "B");
    const float sa = scalar_scale(in[1], "A_scale"), sb = scalar_scale(in[4], "B_scale"), sc = scalar_scale(in[6], "C_scale");
    // The CPU reference's multipliers, in float on the host as there.
    ra_ = kMul ? sa * sb / sc : sa / sc;
    rb_ = sb / sc;
    za_ = uint8_zero_point(node, in, 2, "A_zero_point");
    zb_ = uint8_zero_point(node, in, 5, "B_zero_point");
    zc_ = uint8_zero_point(node, in, 7, "C_zero_point");
    plan_ = BinaryPlan();
    const edgert_tensor &a = in[0], &b = in[3];
    Shape out_shape = shape_of(a);
    if (shape_of(a) != shape_of(b)) {
      plan_.swapped = per_channel_of(a, b);
      if (!plan_.swapped && !per_channel_of(b, a))
        fail(EDGERT_ERR_UNSUPPORTED, "A %s and B %s: the GPU takes operands of one shape, or one [N, C, 1, 1]",
             shape_string(shape_of(a)).c_str(), shape_string(shape_of(b)).c_str());
      const edgert_tensor& full = plan_.swapped ? b : a;
      out_shape = shape_of(full);
      plan_.channels = full.dims[1];
      plan_.plane = full.dims[2] * full.dims[3];
      plan_.b = channels_last(node) ? Operand::kChannelNhwc : Operand::kChannelNchw;
      if (plan_.swapped && !kMul) std::swap(ra_, rb_);
      if (plan_.swapped) std::swap(za_, zb_);
    }
    set_output(out[0], EDGERT_DTYPE_UINT8, out_shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    const int64_t n = numel(out[0]);
    if (n == 0) return;
    const auto* a = static_cast<const uint8_t*>(in[plan_.swapped ? 3 : 0].data);
    const auto* b = static_cast<const uint8_t*>(in[plan_.swapped ? 0 : 3].data);
    qbinary_kernel<kMul><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        a, b, static_cast<uint8_t*>(out[0].data), n, plan_, za_, zb_, zc_, ra_, rb_);
    check_launch(kMul ? "qlinear_mul" : "qlinear_add");
  }

 private:
  BinaryPlan plan_;
  float ra_ = 1, rb_ = 1;
  int32_t za_ = 0, zb_ = 0, zc_ = 0;
};

// ---- QLinearGlobalAveragePool -----------------------------------------------------------------

// One warp per (n, c) plane of an NCHW tensor.
__global__ void qgap_nchw(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t planes, int64_t size,
                          int32_t zx, int32_t zy, float multiplier) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= planes) return;
  const uint8_t* plane = x + warp * size;
  long long s = 0;
  for (int64_t i = lane; i < size; i += 32) s += plane[i];
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) y[warp] = saturate_u8(__fmul_rn(__ll2float_rn(s - static_cast<long long>(zx) * size), multiplier), zy);
}

// Channels-last: a block per (image, 32 channels); its 32 x 8 threads sum every 8th pixel of
// one channel each (a row of the block reads 32 neighbouring bytes), then the 8 partial sums.
constexpr int kGapChannels = 32, kGapRows = 8;
__global__ void qgap_nhwc(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t channels, int64_t size,
                          int32_t zx, int32_t zy, float multiplier) {
  __shared__ long long partial[kGapRows][kGapChannels];
  const int64_t image = blockIdx.y, c = static_cast<int64_t>(blockIdx.x) * kGapChannels + threadIdx.x;
  long long s = 0;
  if (c < channels)
    for (int64_t k = threadIdx.y; k < size; k += kGapRows) s += x[(image * size + k) * channels + c];
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (int r = 1; r < kGapRows; ++r) s += partial[r][threadIdx.x];
  y[image * channels + c] = saturate_u8(__fmul_rn(__ll2float_rn(s - static_cast<long long>(zx) * size), multiplier), zy);
}

int32_t qgap_supports(const edgert_node* node, const edgert_tensor* in) {
  if (node->num_inputs < 4 || Attributes(node).get_int("channels_last", 0) != 0) return 0;
  if (!is_uint8_or_unknown(in[0]) || (in[0].rank >= 0 && in[0].rank < 3)) return 0;
  return scalar_or_unknown(in[1]) && scalar_or_unknown(in[3]);
}

class QGlobalAveragePoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const edgert_tensor& x = in[0];
    require_uint8(x, "X");
    if (x.rank < 3) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected [N, C, spatial...]", x.rank);
    nhwc_ = stored_nhwc(x.rank, channels_last(node));
    Shape out_shape = shape_of(x);
    size_ = 1;
    for (size_t d = 2; d < out_shape.size(); ++d) {
      size_ *= out_shape[d];
      out_shape[d] = 1;
    }
    n_ = x.dims[0];
    channels_ = x.dims[1];
    zx_ = uint8_zero_point(node, in, 2, "x_zero_point");
    zy_ = node.num_inputs > 4 ? uint8_zero_point(node, in, 4, "y_zero_point") : 0;
    multiplier_ = scalar_scale(in[1], "x_scale") / (scalar_scale(in[3], "y_scale") * static_cast<float>(size_));
    set_output(out[0], EDGERT_DTYPE_UINT8, out_shape);  // [N, C, 1, ...]: the same bytes in both layouts
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    const int64_t planes = n_ * channels_;
    if (planes == 0) return;
    const auto* x = static_cast<const uint8_t*>(in[0].data);
    auto* y = static_cast<uint8_t*>(out[0].data);
    if (nhwc_) {
      const dim3 grid(static_cast<unsigned>((channels_ + kGapChannels - 1) / kGapChannels), static_cast<unsigned>(n_));
      qgap_nhwc<<<grid, dim3(kGapChannels, kGapRows), 0, stream>>>(x, y, channels_, size_, zx_, zy_, multiplier_);
    } else {
      const int64_t blocks = (planes * 32 + kThreads - 1) / kThreads;
      qgap_nchw<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, y, planes, size_, zx_, zy_, multiplier_);
    }
    check_launch("qlinear_global_average_pool");
  }

 private:
  bool nhwc_ = false;
  int64_t n_ = 0, channels_ = 0, size_ = 1;
  int32_t zx_ = 0, zy_ = 0;
  float multiplier_ = 1;
};

// ---- edgert.QLookup ---------------------------------------------------------------------------

__global__ void qlookup_kernel(const uint8_t* __restrict__ x, const uint8_t* __restrict__ table,
                               uint8_t* __restrict__ y, int64_t n) {
  __shared__ uint8_t entries[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) entries[i] = table[i];
  __syncthreads();
  grid_stride(n, [&](auto i) { y[i] = entries[x[i]]; });
}

int32_t qlookup_supports(const edgert_node*, const edgert_tensor* in) {
  return is_uint8_or_unknown(in[0]) && is_uint8_or_unknown(in[1]);
}

class QLookupOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    require_uint8(in[0], "X");
    if (in[1].dtype != EDGERT_DTYPE_UINT8 || numel(in[1]) != 256)
      fail(EDGERT_ERR_SHAPE, "Table is %s with %lld values, expected 256 uint8", edgert_dtype_name(in[1].dtype),
           static_cast<long long>(numel(in[1])));
    set_output(out[0], EDGERT_DTYPE_UINT8, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    const int64_t n = numel(in[0]);
    if (n == 0) return;
    qlookup_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(in[0].data), static_cast<const uint8_t*>(in[1].data),
        static_cast<uint8_t*>(out[0].data), n);
    check_launch("qlookup");
  }
};

}  // namespace

void register_quantized_kernels(KernelRegistry& r) {
  constexpr uint64_t kScaleAndZero = (1u << 1) | (1u << 2);
  r.add<QuantizeOp>("QuantizeLinear", "cuda-quantize-linear", quantize_supports, nullptr, kScaleAndZero);
  r.add<DequantizeOp>("DequantizeLinear", "cuda-dequantize-linear", dequantize_supports, nullptr, kScaleAndZero);
  constexpr uint64_t kBinaryScalars = (1u << 1) | (1u << 2) | (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7);
  r.add_in_domain<QBinaryOp<false>>("com.microsoft", "QLinearAdd", "cuda-qlinear-add", qbinary_supports, nullptr,
                                    kBinaryScalars);
  r.add_in_domain<QBinaryOp<true>>("com.microsoft", "QLinearMul", "cuda-qlinear-mul", qbinary_supports, nullptr,
                                   kBinaryScalars);
  r.add_in_domain<QGlobalAveragePoolOp>("com.microsoft", "QLinearGlobalAveragePool",
                                        "cuda-qlinear-global-average-pool", qgap_supports, nullptr,
                                        (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4));
  r.add_in_domain<QLookupOp>("edgert", "QLookup", "cuda-qlookup", qlookup_supports);
}

}  // namespace edgert::cuda
