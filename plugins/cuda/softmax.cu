// Softmax and LogSoftmax on the GPU, numerically stable (the row's maximum is subtracted before
// exp), in float. Opset < 13 coerces the input to 2-D at `axis` (default 1) and normalises over
// everything from `axis` on; opset >= 13 normalises over the one axis `axis` (default -1).
// Both are an outer x n x inner walk over the storage order; with layout NHWC the normalised
// logical axes of a rank-4 tensor map to storage axes that must be neighbours (they always are:
// a single axis, or a suffix of N C H W, which is H W C, H W, W or N H W C in storage).
//
// inner == 1 (rows contiguous): one warp per row up to 256 elements, one block per row above;
// inner > 1: one thread per (outer, inner) column, threads along inner (coalesced).
#include <cfloat>
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


// Block-wide reduction for blocks of kThreads: every thread gets the result.
__device__ float block_reduce(float v, bool max, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read from the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : (max ? -INFINITY : 0.f);
  return max ? warp_max(v) : warp_sum(v);
}

template <typename T>
__device__ __forceinline__ T normalised(float v, float m, float sum, float log_sum, bool log) {
  return from_float<T>(log ? (v - m) - log_sum : expf(v - m) / sum);
}

template <typename T>
__global__ void softmax_warp_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n, bool log) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; row < rows; row += warps) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float m = -INFINITY;
    for (int64_t j = lane; j < n; j += 32) m = fmaxf(m, to_float(xr[j]));
    m = warp_max(m);
    float sum = 0.f;
    for (int64_t j = lane; j < n; j += 32) sum += expf(to_float(xr[j]) - m);
    sum = warp_sum(sum);
    const float log_sum = logf(sum);
    for (int64_t j = lane; j < n; j += 32) yr[j] = normalised<T>(to_float(xr[j]), m, sum, log_sum, log);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_block_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t n, bool log) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, to_float(xr[j]));
    m = block_reduce(m, true, scratch);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(to_float(xr[j]) - m);
    sum = block_reduce(sum, false, scratch);
    const float log_sum = logf(sum);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = normalised<T>(to_float(xr[j]), m, sum, log_sum, log);
  }
}

template <typename T>
__global__ void softmax_columns(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n, int64_t inner,
                                bool log) {
  grid_stride(outer * inner, [&](auto column) {
    using I = decltype(column);
    const int64_t base = static_cast<int64_t>(column / static_cast<I>(inner)) * n * inner + column % static_cast<I>(inner);
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = fmaxf(m, to_float(x[base + j * inner]));
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) sum += expf(to_float(x[base + j * inner]) - m);
    const float log_sum = logf(sum);
    for (int64_t j = 0; j < n; ++j) y[base + j * inner] = normalised<T>(to_float(x[base + j * inner]), m, sum, log_sum, log);
  });
}

int32_t softmax_supports(const edgert_node*, const edgert_tensor* in) {
  return in[0].dtype == EDGERT_DTYPE_UNDEFINED || is_float(in[0].dtype);
}

class SoftmaxOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "input is %s; the GPU kernel takes float32 and float16", edgert_dtype_name(in[0].dtype));
    dtype_ = in[0].dtype;
    log_ = std::string(node.op_type) == "LogSoftmax";
    const bool legacy = node.opset < 13;
    const int64_t rank = in[0].rank;
    int64_t axis = Attributes(&node).get_int("axis", legacy ? 1 : -1);
    axis = rank == 0 ? 0 : normalize_axis(axis, rank);  // a scalar normalises over itself
    // Storage positions of the normalised logical axes, then outer x n x inner around them.
    const bool nhwc = channels_last(node);
    const Shape stored = storage_shape(shape_of(in[0]), nhwc);
    bool normalised[EDGERT_MAX_RANK] = {};
    for (int64_t a = axis; a < rank && (a == axis || legacy); ++a) normalised[storage_axis(a, rank, nhwc)] = true;
    int64_t first = rank, last = -1;
    for (int64_t p = 0; p < rank; ++p)
      if (normalised[p]) {
        first = std::min(first, p);
        last = p;
      }
    outer_ = n_ = inner_ = 1;
    for (int64_t p = 0; p < rank; ++p) {
      if (p < first) outer_ *= stored[static_cast<size_t>(p)];
      else if (p <= last) {
        if (!normalised[p]) fail(EDGERT_ERR_INTERNAL, "normalised axes are not neighbours in storage");
        n_ *= stored[static_cast<size_t>(p)];
      } else inner_ *= stored[static_cast<size_t>(p)];
    }
    set_output(out[0], dtype_, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (outer_ * n_ * inner_ == 0) return;
    if (dtype_ == EDGERT_DTYPE_FLOAT16) run<__half>(in[0].data, out[0].data, stream);
    else run<float>(in[0].data, out[0].data, stream);
  }

 private:
  template <typename T>
  void run(const void* x, void* y, cudaStream_t stream) const {
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner_ > 1) {
      softmax_columns<T><<<blocks_for(outer_ * inner_, kThreads), kThreads, 0, stream>>>(xt, yt, outer_, n_, inner_, log_);
      return check_launch("softmax_columns");
    }
    if (n_ <= kWarpRowLimit) {
      softmax_warp_rows<T><<<blocks_for(outer_ * 32, kThreads), kThreads, 0, stream>>>(xt, yt, outer_, n_, log_);
      return check_launch("softmax_warp_rows");
    }
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(outer_, 65535 * 8));
    softmax_block_rows<T><<<blocks, kThreads, 0, stream>>>(xt, yt, outer_, n_, log_);
    check_launch("softmax_block_rows");
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  bool log_ = false;
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
};

}  // namespace

void register_softmax_kernels(KernelRegistry& r) {
  r.add<SoftmaxOp>("Softmax", "cuda-softmax", softmax_supports);
  r.add<SoftmaxOp>("LogSoftmax", "cuda-log-softmax", softmax_supports);
}

}  // namespace edgert::cuda
