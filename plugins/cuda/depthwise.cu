// Depthwise 2-D convolution (depthwise.h). Two kernels, both one thread per output element and
// accumulating in float, with bias, residual and activation fused:
//   tiled   NCHW planes of at least 16x8 outputs: a block stages its 32x8 output tile's input
//           window (and the channel's weights) in shared memory once, so each input element
//           is read from global memory about once instead of KH*KW times.
//   direct  everything else: channels-last (threads run along C, so a warp's reads of one tap
//           are contiguous), small planes (MobileNet's 7x7 and 14x14 stages), windows whose
//           tile would not fit in shared memory.
#include "depthwise.h"

#include "cuda_op.h"
#include "edgert/dtype_info.h"

namespace edgert::cuda {
namespace {

constexpr int kTileW = 32, kTileH = 8;  // outputs per tiled block; one thread each
constexpr size_t kMaxSharedBytes = 48 * 1024;

// Output element `index` (storage order) from its accumulated convolution.
template <typename T>
__device__ __forceinline__ void finish(float acc, int64_t index, int64_t c, const T* bias, const T* residual, T* y,
                                       const Activation& act) {
  if (bias) acc += to_float(bias[c]);
  if (residual) acc += to_float(residual[index]);
  y[index] = from_float<T>(apply(act, acc));
}

template <typename T>
__global__ void depthwise_direct(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                 const T* residual, T* y, DepthwiseShape s, Activation act, int64_t total) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t n, c, oy, ox, rest = index;
    if (s.channels_last) {
      c = rest % s.c;
      rest /= s.c;
      ox = rest % s.out_w;
      rest /= s.out_w;
      oy = rest % s.out_h;
      n = rest / s.out_h;
    } else {
      ox = rest % s.out_w;
      rest /= s.out_w;
      oy = rest % s.out_h;
      rest /= s.out_h;
      c = rest % s.c;
      n = rest / s.c;
    }
    const int64_t iy0 = oy * s.stride_h - s.pad_top, ix0 = ox * s.stride_w - s.pad_left;
    const T* wc = w + c * s.kh * s.kw;
    // Element (iy, ix) of this channel is at base + iy * row + ix * col.
    const int64_t row = s.channels_last ? s.w * s.c : s.w;
    const int64_t col = s.channels_last ? s.c : 1;
    const int64_t base = s.channels_last ? n * s.h * s.w * s.c + c : (n * s.c + c) * s.h * s.w;
    float acc = 0.f;
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t iy = iy0 + ky * s.dilation_h;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const int64_t ix = ix0 + kx * s.dilation_w;
        if (ix < 0 || ix >= s.w) continue;
        acc += to_float(x[base + iy * row + ix * col]) * to_float(wc[ky * s.kw + kx]);
      }
    }
    finish(acc, index, c, bias, residual, y, act);
  }
}

// Sizes of a tiled block's input window.
struct Window {
  int in_h, in_w;  // input rows and columns one 32x8 output tile reads
  int64_t tiles_h, tiles_w;

  size_t shared_bytes(const DepthwiseShape& s) const {
    return (static_cast<size_t>(in_h) * in_w + static_cast<size_t>(s.kh * s.kw)) * sizeof(float);
  }
};

Window window_of(const DepthwiseShape& s) {
  Window win;
  win.in_h = static_cast<int>((kTileH - 1) * s.stride_h + (s.kh - 1) * s.dilation_h + 1);
  win.in_w = static_cast<int>((kTileW - 1) * s.stride_w + (s.kw - 1) * s.dilation_w + 1);
  win.tiles_h = (s.out_h + kTileH - 1) / kTileH;
  win.tiles_w = (s.out_w + kTileW - 1) / kTileW;
  return win;
}

// One block per 32x8 tile of one (n, c) plane; blockIdx.x = (plane * tiles_h + tile row) * tiles_w + tile column.
template <typename T>
__global__ void __launch_bounds__(kTileW* kTileH)
    depthwise_tiled(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* residual,
                    T* y, DepthwiseShape s, Activation act, Window win) {
  extern __shared__ float shared[];
  float* tile = shared;                           // [in_h][in_w], zero outside the input (padding)
  float* taps = shared + win.in_h * win.in_w;     // [kh * kw]
  int64_t block = blockIdx.x;
  const int64_t tile_x = block % win.tiles_w;
  block /= win.tiles_w;
  const int64_t tile_y = block % win.tiles_h;
  const int64_t plane = block / win.tiles_h;  // n * C + c
  const int64_t c = plane % s.c;
  const int thread = threadIdx.y * kTileW + threadIdx.x;

  const int64_t oy0 = tile_y * kTileH, ox0 = tile_x * kTileW;
  const int64_t iy0 = oy0 * s.stride_h - s.pad_top, ix0 = ox0 * s.stride_w - s.pad_left;
  const T* xp = x + plane * s.h * s.w;
  for (int i = thread; i < win.in_h * win.in_w; i += kTileW * kTileH) {
    const int64_t iy = iy0 + i / win.in_w, ix = ix0 + i % win.in_w;
    tile[i] = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w ? to_float(xp[iy * s.w + ix]) : 0.f;
  }
  for (int i = thread; i < s.kh * s.kw; i += kTileW * kTileH) taps[i] = to_float(w[c * s.kh * s.kw + i]);
  __syncthreads();

  const int64_t oy = oy0 + threadIdx.y, ox = ox0 + threadIdx.x;
  if (oy >= s.out_h || ox >= s.out_w) return;
  const float* origin = tile + threadIdx.y * s.stride_h * win.in_w + threadIdx.x * s.stride_w;
  float acc = 0.f;
  for (int ky = 0; ky < s.kh; ++ky) {
    const float* r = origin + ky * s.dilation_h * win.in_w;
    for (int kx = 0; kx < s.kw; ++kx) acc += r[kx * s.dilation_w] * taps[ky * s.kw + kx];
  }
  finish(acc, (plane * s.out_h + oy) * s.out_w + ox, c, bias, residual, y, act);
}

template <typename T>
void launch(const void* x, const void* weights, const void* bias, const void* residual, void* y,
            const DepthwiseShape& s, const Activation& act, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(weights);
  const T* bt = static_cast<const T*>(bias);
  const T* rt = static_cast<const T*>(residual);
  T* yt = static_cast<T*>(y);
  const int64_t total = s.n * s.c * s.out_h * s.out_w;
  if (total == 0) return;
  const Window win = window_of(s);
  const bool tiled = !s.channels_last && s.out_w >= 16 && s.out_h >= kTileH && win.shared_bytes(s) <= kMaxSharedBytes;
  if (tiled) {
    const int64_t blocks = s.n * s.c * win.tiles_h * win.tiles_w;
    if (blocks > 0x7fffffff) fail(EDGERT_ERR_UNSUPPORTED, "depthwise convolution of %lld tiles", static_cast<long long>(blocks));
    depthwise_tiled<T><<<static_cast<unsigned>(blocks), dim3(kTileW, kTileH), win.shared_bytes(s), stream>>>(
        xt, wt, bt, rt, yt, s, act, win);
    return check_launch("depthwise_tiled");
  }
  constexpr unsigned kThreads = 256;
  depthwise_direct<T><<<blocks_for(total, kThreads), kThreads, 0, stream>>>(xt, wt, bt, rt, yt, s, act, total);
  check_launch("depthwise_direct");
}

}  // namespace

void launch_depthwise(const void* x, const void* weights, const void* bias, const void* residual, void* y,
                      edgert_dtype dtype, const DepthwiseShape& s, const Activation& act, cudaStream_t stream) {
  if (dtype == EDGERT_DTYPE_FLOAT32) return launch<float>(x, weights, bias, residual, y, s, act, stream);
  if (dtype == EDGERT_DTYPE_FLOAT16) return launch<__half>(x, weights, bias, residual, y, s, act, stream);
  fail(EDGERT_ERR_UNSUPPORTED, "depthwise convolution of %s tensors (float32 and float16 only)", edgert_dtype_name(dtype));
}

}  // namespace edgert::cuda
