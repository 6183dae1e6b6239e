// edgert.Reformat: a rank-4 tensor between row-major [N, C, H, W] and channels-last storage
// ([N, H, W, C] bytes, dims still logical [N, C, H, W]), which the builder's layout pass puts
// where a channels-last region of the graph meets the rest (device_placement.h). Attribute
// `to`: "NHWC" or "NCHW". One pass through shared memory tiles so both sides are coalesced.
#include "cuda_op.h"

namespace edgert::cuda {
namespace {

constexpr int kTile = 32;

// One [C, HW] plane of image n transposed to [HW, C] (or back: swap c and hw roles).
template <typename T>
__global__ void transpose_planes(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t image = blockIdx.z;
  const T* in = x + image * rows * cols;
  T* out = y + image * rows * cols;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int64_t row = row0 + r, col = col0 + threadIdx.x;
    if (row < rows && col < cols) tile[r][threadIdx.x] = in[row * cols + col];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int64_t col = col0 + r, row = row0 + threadIdx.x;  // output row = input column
    if (row < rows && col < cols) out[col * rows + row] = tile[threadIdx.x][r];
  }
}

class ReformatOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const edgert_tensor& x = in[0];
    if (x.rank != 4 || (!is_float(x.dtype) && x.dtype != EDGERT_DTYPE_UINT8))
      fail(EDGERT_ERR_UNSUPPORTED, "Reformat takes a float32, float16 or uint8 tensor of rank 4, got %s rank %d",
           edgert_dtype_name(x.dtype), x.rank);
    const std::string to = Attributes(&node).get_string("to", "");
    if (to != "NHWC" && to != "NCHW") fail(EDGERT_ERR_INVALID_ARGUMENT, "Reformat 'to' must be NHWC or NCHW");
    to_nhwc_ = to == "NHWC";
    dtype_ = x.dtype;
    n_ = x.dims[0];
    c_ = x.dims[1];
    hw_ = x.dims[2] * x.dims[3];
    set_output(out[0], x.dtype, shape_of(x));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    // To channels-last each image's [C, HW] becomes [HW, C]; back, [HW, C] becomes [C, HW].
    const int64_t rows = to_nhwc_ ? c_ : hw_, cols = to_nhwc_ ? hw_ : c_;
    const dim3 block(kTile, 8), grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                                     static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>(n_));
    if (dtype_ == EDGERT_DTYPE_UINT8)
      transpose_planes<<<grid, block, 0, stream>>>(static_cast<const uint8_t*>(in[0].data), static_cast<uint8_t*>(out[0].data), rows, cols);
    else if (dtype_ == EDGERT_DTYPE_FLOAT16)
      transpose_planes<<<grid, block, 0, stream>>>(static_cast<const __half*>(in[0].data), static_cast<__half*>(out[0].data), rows, cols);
    else
      transpose_planes<<<grid, block, 0, stream>>>(static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), rows, cols);
    check_launch("reformat");
  }

 private:
  bool to_nhwc_ = true;
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
};

}  // namespace

void register_reformat_kernels(KernelRegistry& r) { r.add_in_domain<ReformatOp>("edgert", "Reformat", "cuda-reformat"); }

}  // namespace edgert::cuda
