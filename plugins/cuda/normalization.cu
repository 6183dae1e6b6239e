// Normalizations on the GPU, float32 and float16 in float: BatchNormalization (inference: the
// given mean and variance), LayerNormalization (over the trailing axes from `axis`; Scale and B
// one value each or one per normalised element) and InstanceNormalization (per (n, c) over the
// spatial dims). Parameters (scale, B, mean, var) may each be float32 or float16. Statistics are
// two-pass (mean, then the mean of squared deviations) like the CPU plugin's; it sums in double,
// here in float.
//
// BatchNormalization and InstanceNormalization honour layout NHWC (a rank-4 X and Y stored
// [N, H, W, C]); LayerNormalization refuses it, and refuses its optional Mean / InvStdDev
// outputs. BatchNormalization refuses training mode and the old spatial=0 form.
#include <string>

#include "activation.cuh"
#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"
#include "layout.h"
#include "warp_reduce.cuh"

namespace edgert::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kWarpRowLimit = 256;  // longer rows take a block each

// A float32 or float16 parameter tensor.
struct Param {
  const void* data = nullptr;
  bool half = false;
};

__device__ __forceinline__ float load(const Param& p, int64_t i) {
  return p.half ? __half2float(static_cast<const __half*>(p.data)[i]) : static_cast<const float*>(p.data)[i];
}

Param param_of(const edgert_tensor& t) { return Param{t.data, t.dtype == EDGERT_DTYPE_FLOAT16}; }

void require_float(const edgert_tensor& t, const char* what) {
  if (!is_float(t.dtype))
    fail(EDGERT_ERR_UNSUPPORTED, "%s is %s; the GPU kernel takes float32 and float16", what, edgert_dtype_name(t.dtype));
}

// BatchNormalization: per-channel (mean, scale / sqrt(var + epsilon), B) into the workspace,
// then y = (x - mean) * a + b.

__global__ void batchnorm_channels(Param scale, Param bias, Param mean, Param var, float epsilon, int64_t c,
                                   float* __restrict__ table) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < c;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    table[3 * i] = load(mean, i);
    table[3 * i + 1] = load(scale, i) / sqrtf(load(var, i) + epsilon);
    table[3 * i + 2] = load(bias, i);
  }
}

template <typename T>
__global__ void batchnorm_apply(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ table,
                                int64_t total, int64_t c, int64_t spatial, bool channels_last) {
  grid_stride(total, [&](auto i) {
    using I = decltype(i);
    const I ch = channels_last ? i % static_cast<I>(c) : i / static_cast<I>(spatial) % static_cast<I>(c);
    y[i] = from_float<T>((to_float(x[i]) - table[3 * ch]) * table[3 * ch + 1] + table[3 * ch + 2]);
  });
}

int32_t batchnorm_supports(const edgert_node* node, const edgert_tensor* in) {
  const Attributes attrs(node);
  if (node->num_outputs > 1 || attrs.get_int("spatial", 1) == 0) return 0;
  if (node->opset >= 14 && attrs.get_int("training_mode", 0) != 0) return 0;
  for (int i = 0; i < 5 && i < node->num_inputs; ++i)
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[i].dtype)) return 0;
  return 1;
}

class BatchNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    require_float(in[0], "X");
    if (node.num_inputs < 5) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs X, scale, B, input_mean and input_var");
    if (node.num_outputs > 1) fail(EDGERT_ERR_UNSUPPORTED, "training outputs are not produced on the GPU");
    if (node.opset >= 14 && attrs.get_int("training_mode", 0) != 0)
      fail(EDGERT_ERR_UNSUPPORTED, "training_mode=1 is not supported on the GPU");
    if (in[0].rank < 2) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected >= 2 (N x C x ...)", in[0].rank);
    dtype_ = in[0].dtype;
    epsilon_ = attrs.get_float("epsilon", 1e-5f);
    c_ = in[0].dims[1];
    spatial_ = 1;
    for (int i = 2; i < in[0].rank; ++i) spatial_ *= in[0].dims[i];
    total_ = numel(in[0]);
    const char* names[] = {"scale", "B", "input_mean", "input_var"};
    for (int i = 1; i <= 4; ++i) {
      require_float(in[i], names[i - 1]);
      if (numel(in[i]) != c_)
        fail(EDGERT_ERR_SHAPE, "%s must hold one value per channel (%lld), its shape is %s", names[i - 1],
             static_cast<long long>(c_), shape_string(shape_of(in[i])).c_str());
    }
    channels_last_ = stored_nhwc(in[0].rank, channels_last(node));
    set_output(out[0], dtype_, shape_of(in[0]));
    info.workspace_bytes = static_cast<size_t>(3 * c_) * sizeof(float);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    if (total_ == 0) return;
    float* table = static_cast<float*>(workspace);
    batchnorm_channels<<<blocks_for(c_, kThreads), kThreads, 0, stream>>>(param_of(in[1]), param_of(in[2]),
                                                                          param_of(in[3]), param_of(in[4]), epsilon_,
                                                                          c_, table);
    check_launch("batchnorm_channels");
    const unsigned blocks = blocks_for(total_, kThreads);
    if (dtype_ == EDGERT_DTYPE_FLOAT16)
      batchnorm_apply<__half><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(in[0].data),
                                                              static_cast<__half*>(out[0].data), table, total_, c_,
                                                              spatial_, channels_last_);
    else
      batchnorm_apply<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(in[0].data),
                                                             static_cast<float*>(out[0].data), table, total_, c_,
                                                             spatial_, channels_last_);
    check_launch("batchnorm_apply");
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  float epsilon_ = 1e-5f;
  int64_t c_ = 0, spatial_ = 1, total_ = 0;
  bool channels_last_ = false;
};

// LayerNormalization and InstanceNormalization: rows of `cols` elements normalised on their own.
// Row r starts at (r / group) * group_stride + (r % group) * row_stride and its elements are
// `step` apart; its scale/bias are element j's (per_row false: LayerNorm, or element 0 when the
// parameter holds one value) or row r % group's (per_row: InstanceNorm's channel).

struct Rows {
  int64_t rows = 0, cols = 0;
  int64_t group = 1, group_stride = 0, row_stride = 0, step = 1;
  bool per_row = false;
  bool scalar_scale = false, scalar_bias = false;
  float epsilon = 1e-5f;
  Param scale, bias;  // bias.data may be null
};

// Sum over the block (kThreads threads); every thread gets it.
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(kThreads / 32) ? scratch[lane] : 0.f;
  return warp_sum(v);
}

template <typename T>
__device__ __forceinline__ void write_row(const T* xr, T* yr, const Rows& p, int64_t r, float mean, float inv_std,
                                          int64_t first, int64_t step) {
  for (int64_t j = first; j < p.cols; j += step) {
    const int64_t pi = p.per_row ? r % p.group : j;
    float v = (to_float(xr[j * p.step]) - mean) * inv_std * load(p.scale, p.scalar_scale ? 0 : pi);
    if (p.bias.data) v += load(p.bias, p.scalar_bias ? 0 : pi);
    yr[j * p.step] = from_float<T>(v);
  }
}

template <typename T>
__global__ void normalize_warp_rows(const T* __restrict__ x, T* __restrict__ y, Rows p) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; r < p.rows; r += warps) {
    const int64_t base = r / p.group * p.group_stride + r % p.group * p.row_stride;
    const T* xr = x + base;
    float sum = 0.f;
    for (int64_t j = lane; j < p.cols; j += 32) sum += to_float(xr[j * p.step]);
    const float mean = warp_sum(sum) / static_cast<float>(p.cols);
    float squares = 0.f;
    for (int64_t j = lane; j < p.cols; j += 32) {
      const float d = to_float(xr[j * p.step]) - mean;
      squares += d * d;
    }
    const float inv_std = rsqrtf(warp_sum(squares) / static_cast<float>(p.cols) + p.epsilon);
    write_row(xr, y + base, p, r, mean, inv_std, lane, 32);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) normalize_block_rows(const T* __restrict__ x, T* __restrict__ y, Rows p) {
  __shared__ float scratch[kThreads / 32];
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const int64_t base = r / p.group * p.group_stride + r % p.group * p.row_stride;
    const T* xr = x + base;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) sum += to_float(xr[j * p.step]);
    const float mean = block_sum(sum, scratch) / static_cast<float>(p.cols);
    float squares = 0.f;
    for (int64_t j = threadIdx.x; j < p.cols; j += blockDim.x) {
      const float d = to_float(xr[j * p.step]) - mean;
      squares += d * d;
    }
    const float inv_std = rsqrtf(block_sum(squares, scratch) / static_cast<float>(p.cols) + p.epsilon);
    write_row(xr, y + base, p, r, mean, inv_std, threadIdx.x, blockDim.x);
  }
}

template <typename T>
void launch_rows(const void* x, void* y, const Rows& p, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  if (p.cols <= kWarpRowLimit) {
    normalize_warp_rows<T><<<blocks_for(p.rows * 32, kThreads), kThreads, 0, stream>>>(xt, yt, p);
    return check_launch("normalize_warp_rows");
  }
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, 65535 * 8));
  normalize_block_rows<T><<<blocks, kThreads, 0, stream>>>(xt, yt, p);
  check_launch("normalize_block_rows");
}

int32_t layernorm_supports(const edgert_node* node, const edgert_tensor* in) {
  if (channels_last(*node) || node->num_outputs > 1) return 0;
  for (int i = 0; i < 3 && i < node->num_inputs; ++i)
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[i].dtype)) return 0;
  return 1;
}

class LayerNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const Attributes attrs(&node);
    require_float(in[0], "X");
    if (node.num_outputs > 1) fail(EDGERT_ERR_UNSUPPORTED, "Mean and InvStdDev outputs are not produced on the GPU");
    if (node.num_inputs < 2 || !is_present(in[1])) fail(EDGERT_ERR_SHAPE, "Scale is required");
    dtype_ = in[0].dtype;
    const int64_t axis = normalize_axis(attrs.get_int("axis", -1), in[0].rank);
    const Shape x_shape = shape_of(in[0]);
    const Shape normalized(x_shape.begin() + axis, x_shape.end());
    Rows p;
    p.rows = numel(Shape(x_shape.begin(), x_shape.begin() + axis));
    p.cols = numel(normalized);
    p.group_stride = p.cols;
    p.epsilon = attrs.get_float("epsilon", 1e-5f);
    p.scalar_scale = check_param(in[1], normalized, "Scale");
    const bool has_bias = node.num_inputs > 2 && is_present(in[2]);
    if (has_bias) p.scalar_bias = check_param(in[2], normalized, "B");
    rows_ = p;
    set_output(out[0], dtype_, x_shape);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (rows_.rows * rows_.cols == 0) return;
    Rows p = rows_;
    p.scale = param_of(in[1]);
    if (node.num_inputs > 2 && is_present(in[2])) p.bias = param_of(in[2]);
    if (dtype_ == EDGERT_DTYPE_FLOAT16) launch_rows<__half>(in[0].data, out[0].data, p, stream);
    else launch_rows<float>(in[0].data, out[0].data, p, stream);
  }

 private:
  // True for a single value; false for the normalised shape (its trailing dims, leading 1s
  // allowed). Other broadcasts are refused.
  static bool check_param(const edgert_tensor& t, const Shape& normalized, const char* what) {
    require_float(t, what);
    if (numel(t) == 1) return true;
    Shape s = shape_of(t);
    while (s.size() > normalized.size() && s.front() == 1) s.erase(s.begin());
    if (s.size() <= normalized.size() && numel(s) == numel(normalized) &&
        std::equal(s.begin(), s.end(), normalized.end() - static_cast<std::ptrdiff_t>(s.size())))
      return false;
    fail(EDGERT_ERR_UNSUPPORTED, "%s of shape %s: the GPU kernel takes one value or the normalized shape %s", what,
         shape_string(shape_of(t)).c_str(), shape_string(normalized).c_str());
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  Rows rows_;
};

int32_t instancenorm_supports(const edgert_node*, const edgert_tensor* in) {
  for (int i = 0; i < 3; ++i)
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[i].dtype)) return 0;
  return 1;
}

class InstanceNormOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    require_float(in[0], "input");
    if (in[0].rank < 2) fail(EDGERT_ERR_SHAPE, "input has rank %d, expected >= 2 (N x C x ...)", in[0].rank);
    dtype_ = in[0].dtype;
    const int64_t n = in[0].dims[0], c = in[0].dims[1];
    int64_t spatial = 1;
    for (int i = 2; i < in[0].rank; ++i) spatial *= in[0].dims[i];
    const char* names[] = {"scale", "B"};
    for (int i = 1; i <= 2; ++i) {
      require_float(in[i], names[i - 1]);
      if (numel(in[i]) != c)
        fail(EDGERT_ERR_SHAPE, "%s must hold one value per channel (%lld), its shape is %s", names[i - 1],
             static_cast<long long>(c), shape_string(shape_of(in[i])).c_str());
    }
    Rows p;
    p.rows = n * c;
    p.cols = spatial;
    p.group = c;
    p.per_row = true;
    p.epsilon = Attributes(&node).get_float("epsilon", 1e-5f);
    if (stored_nhwc(in[0].rank, channels_last(node))) {  // plane (n, c) starts at n*S*C + c, elements C apart
      p.group_stride = spatial * c;
      p.row_stride = 1;
      p.step = c;
    } else {
      p.group_stride = spatial * c;
      p.row_stride = spatial;
    }
    rows_ = p;
    set_output(out[0], dtype_, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (rows_.rows * rows_.cols == 0) return;
    Rows p = rows_;
    p.scale = param_of(in[1]);
    p.bias = param_of(in[2]);
    if (dtype_ == EDGERT_DTYPE_FLOAT16) launch_rows<__half>(in[0].data, out[0].data, p, stream);
    else launch_rows<float>(in[0].data, out[0].data, p, stream);
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  Rows rows_;
};

}  // namespace

void register_normalization_kernels(KernelRegistry& r) {
  r.add<BatchNormOp>("BatchNormalization", "cuda-batch-normalization", batchnorm_supports);
  r.add<LayerNormOp>("LayerNormalization", "cuda-layer-normalization", layernorm_supports);
  r.add<InstanceNormOp>("InstanceNormalization", "cuda-instance-normalization", instancenorm_supports);
}

}  // namespace edgert::cuda
