// The split-reduction implicit-GEMM convolution (conv_gemm.h). The product is
// Y[pixel, filter] = sum over r of A[pixel, r] * W[filter, r], r running over the window
// (C*KH*KW; c slowest for NCHW weights, fastest for channels-last ones) and A gathered from X on
// the fly (zero outside the padded image). A block computes a 64x64 tile of Y over its slice of
// r, 16 values of r at a time staged in shared memory; each of its 256 threads owns 4 pixels x
// 4 filters.
#include "conv_gemm.h"

#include <algorithm>
#include <limits>

#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"
#include "implicit_gemm.cuh"

namespace edgert::cuda {
namespace {

constexpr int kTileP = 64, kTileF = 64, kTileR = 16, kThreads = 256;
constexpr int kMaxSplits = 64;
constexpr size_t kMaxWorkspaceBytes = size_t{16} << 20;
// More blocks than this many are waves enough: further slices only add partial sums.
constexpr int64_t kEnoughBlocks = 1024;

// The shape in 32-bit integers (launch_conv_gemm refuses larger tensors).
struct Geometry {
  int c, h, w, m, kh, kw, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w, out_h, out_w;
  int pixels, reduction, window, slice;  // slice: values of r per split, a multiple of kTileR
};

// Where output element (pixel, filter) lies in y (and the residual).
template <bool kNhwc>
__device__ __forceinline__ int output_index(const Geometry& g, int pixel, int filter) {
  if (kNhwc) return pixel * g.m + filter;
  const int plane = g.out_h * g.out_w, n = pixel / plane;
  return (n * g.m + filter) * plane + (pixel - n * plane);
}

template <typename T, bool kNhwc>
__device__ __forceinline__ void finish(const Geometry& g, float v, int pixel, int filter, const T* bias,
                                       const T* residual, T* y, const Activation& act) {
  const int index = output_index<kNhwc>(g, pixel, filter);
  if (bias) v += to_float(bias[filter]);
  if (residual) v += to_float(residual[index]);
  y[index] = from_float<T>(apply(act, v));
}


template <typename T, bool kNhwc>
__device__ __forceinline__ float gather(const T* __restrict__ x, const Geometry& g, const PixelOrigin& o, int c, int ky,
                                        int kx) {
  const int iy = o.iy + ky * g.dilation_h, ix = o.ix + kx * g.dilation_w;
  if (!o.valid || iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.f;
  return to_float(kNhwc ? x[o.image + (iy * g.w + ix) * g.c + c] : x[o.image + (c * g.h + iy) * g.w + ix]);
}

template <typename T, bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    conv_gemm(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* residual, T* y,
              float* __restrict__ partial, Geometry g, Activation act) {
  // Rows padded by 4 floats: 16-byte aligned for the float4 reads, fewer bank conflicts on stores.
  __shared__ __align__(16) float a_tile[kTileR][kTileP + 4];
  __shared__ __align__(16) float w_tile[kTileR][kTileF + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int pixel0 = blockIdx.x * kTileP, filter0 = blockIdx.y * kTileF;
  const int r_begin = blockIdx.z * g.slice, r_end = min(g.reduction, r_begin + g.slice);

  // Loads run along memory: NCHW threads along pixels (one r each), channels-last threads
  // along r (the channels), weights along r.
  const int a_pixel = kNhwc ? tid / kTileR : tid % kTileP;  // + 16 * j (channels-last)
  const int a_r = kNhwc ? tid % kTileR : tid / kTileP;      // + 4 * j (NCHW)
  PixelOrigin origins[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) origins[j] = origin_of(g, pixel0 + (kNhwc ? a_pixel + 16 * j : a_pixel));
  const int w_r = tid % kTileR, w_filter = tid / kTileR;  // + 16 * j

  float acc[4][4] = {};
  for (int r0 = r_begin; r0 < r_end; r0 += kTileR) {
    if (kNhwc) {
      const int r = r0 + a_r, tap = r / g.c, c = r - tap * g.c, ky = tap / g.kw, kx = tap - ky * g.kw;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        a_tile[a_r][a_pixel + 16 * j] = r < r_end ? gather<T, true>(x, g, origins[j], c, ky, kx) : 0.f;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = r0 + a_r + 4 * j, c = r / g.window, tap = r - c * g.window, ky = tap / g.kw, kx = tap - ky * g.kw;
        a_tile[a_r + 4 * j][a_pixel] = r < r_end ? gather<T, false>(x, g, origins[0], c, ky, kx) : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int filter = filter0 + w_filter + 16 * j, r = r0 + w_r;
      w_tile[w_r][w_filter + 16 * j] =
          filter < g.m && r < r_end ? to_float(w[static_cast<int64_t>(filter) * g.reduction + r]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTileR; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(&a_tile[k][ty * 4]);
      const float4 b = *reinterpret_cast<const float4*>(&w_tile[k][tx * 4]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int pixel = pixel0 + ty * 4 + i;
    if (pixel >= g.pixels) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int filter = filter0 + tx * 4 + j;
      if (filter >= g.m) continue;
      if (partial)
        partial[(static_cast<int64_t>(blockIdx.z) * g.pixels + pixel) * g.m + filter] = acc[i][j];
      else
        finish<T, kNhwc>(g, acc[i][j], pixel, filter, bias, residual, y, act);
    }
  }
}

// Adds the slices' partial sums in slice order, then the epilogue.
template <typename T, bool kNhwc>
__global__ void conv_gemm_sum(const float* __restrict__ partial, int splits, const T* __restrict__ bias,
                              const T* residual, T* y, Geometry g, Activation act) {
  const int64_t total = static_cast<int64_t>(g.pixels) * g.m;
  grid_stride(total, [&](auto i) {
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += partial[s * total + i];
    const int pixel = static_cast<int>(i / g.m), filter = static_cast<int>(i - static_cast<int64_t>(pixel) * g.m);
    finish<T, kNhwc>(g, v, pixel, filter, bias, residual, y, act);
  });
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t blocks_of(const ConvGemmShape& s) {
  return ceil_div(s.n * s.out_h * s.out_w, kTileP) * ceil_div(s.m, kTileF);
}

int64_t reduction_of(const ConvGemmShape& s) { return s.c * s.kh * s.kw; }

template <typename T, bool kNhwc>
void launch(const void* x, const void* w, const void* bias, const void* residual, void* y, const Geometry& g,
            int splits, const Activation& act, void* workspace, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(g.pixels, kTileP)), static_cast<unsigned>(ceil_div(g.m, kTileF)),
                  static_cast<unsigned>(splits));
  float* partial = splits > 1 ? static_cast<float*>(workspace) : nullptr;
  conv_gemm<T, kNhwc><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                     static_cast<const T*>(bias), static_cast<const T*>(residual),
                                                     static_cast<T*>(y), partial, g, act);
  check_launch("conv_gemm");
  if (!partial) return;
  const int64_t total = static_cast<int64_t>(g.pixels) * g.m;
  conv_gemm_sum<T, kNhwc><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(
      partial, splits, static_cast<const T*>(bias), static_cast<const T*>(residual), static_cast<T*>(y), g, act);
  check_launch("conv_gemm_sum");
}

}  // namespace

std::vector<int> conv_gemm_splits(const ConvGemmShape& s) {
  std::vector<int> splits = {1};
  const int64_t tiles_r = ceil_div(reduction_of(s), kTileR), blocks = blocks_of(s);
  for (int split = 2; split <= kMaxSplits; split *= 2) {
    if (tiles_r < 2 * split || blocks * (split / 2) >= kEnoughBlocks) break;
    if (conv_gemm_workspace_bytes(s, split) > kMaxWorkspaceBytes) break;
    splits.push_back(split);
  }
  return splits;
}

size_t conv_gemm_workspace_bytes(const ConvGemmShape& s, int splits) {
  if (splits <= 1) return 0;
  return static_cast<size_t>(splits) * static_cast<size_t>(s.n * s.out_h * s.out_w * s.m) * sizeof(float);
}

void launch_conv_gemm(const void* x, const void* w, const void* bias, const void* residual, void* y,
                      edgert_dtype dtype, const ConvGemmShape& s, int splits, const Activation& act, void* workspace,
                      cudaStream_t stream) {
  const int64_t limit = std::numeric_limits<int32_t>::max();
  if (s.n * s.c * s.h * s.w > limit || s.n * s.m * s.out_h * s.out_w > limit || s.m * reduction_of(s) > limit ||
      static_cast<int64_t>(std::max(splits, 1)) * s.n * s.out_h * s.out_w * s.m > limit)
    fail(EDGERT_ERR_UNSUPPORTED, "implicit-GEMM convolution of tensors with 2^31 elements or more");
  if (splits < 1 || splits > kMaxSplits) fail(EDGERT_ERR_INVALID_ARGUMENT, "%d reduction slices", splits);
  if (s.n * s.out_h * s.out_w == 0 || s.m == 0) return;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  Geometry g{i(s.c), i(s.h), i(s.w), i(s.m), i(s.kh), i(s.kw), i(s.stride_h), i(s.stride_w), i(s.pad_top),
             i(s.pad_left), i(s.dilation_h), i(s.dilation_w), i(s.out_h), i(s.out_w), i(s.n * s.out_h * s.out_w),
             i(reduction_of(s)), i(s.kh * s.kw), 0};
  g.slice = i(ceil_div(ceil_div(g.reduction, kTileR), splits) * kTileR);
  if (dtype == EDGERT_DTYPE_FLOAT32)
    return s.channels_last ? launch<float, true>(x, w, bias, residual, y, g, splits, act, workspace, stream)
                           : launch<float, false>(x, w, bias, residual, y, g, splits, act, workspace, stream);
  if (dtype == EDGERT_DTYPE_FLOAT16)
    return s.channels_last ? launch<__half, true>(x, w, bias, residual, y, g, splits, act, workspace, stream)
                           : launch<__half, false>(x, w, bias, residual, y, g, splits, act, workspace, stream);
  fail(EDGERT_ERR_UNSUPPORTED, "implicit-GEMM convolution of %s tensors (float32 and float16 only)",
       edgert_dtype_name(dtype));
}

}  // namespace edgert::cuda
