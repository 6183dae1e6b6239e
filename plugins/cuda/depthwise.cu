// Depthwise 2-D convolution (depthwise.h). Three kernels, all accumulating in float, with bias,
// residual and activation fused:
//   tiled   NCHW planes of at least 16x16 outputs: a block stages the input window of its 32x32
//           output tile (and the channel's weights) in shared memory once, so each input
//           element is read from global memory about once instead of KH*KW times; each of its
//           256 threads computes 4 outputs of one column. 3x3 windows of stride 1 or 2 without
//           dilation have their own instance, the window's rows and weights in registers.
//   vector  channels-last with C a multiple of 4 (float32) or 8 (float16): one thread per pixel
//           and 16 bytes of channels, 16-byte loads and stores.
//   direct  one thread per output, for everything else: other channels-last tensors (threads
//           run along C, so a warp's reads of one tap are contiguous), small planes (MobileNet's
//           7x7 and 14x14 stages), windows whose tile would not fit in shared memory.
#include "depthwise.h"

#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"

namespace edgert::cuda {
namespace {

constexpr int kTileW = 32, kTileH = 8;  // threads of a tiled block
constexpr int kRowsPerThread = 4;       // output rows each of them computes
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
  grid_stride(total, [&](auto index) {
    using I = decltype(index);
    const I channels = static_cast<I>(s.c), out_w = static_cast<I>(s.out_w), out_h = static_cast<I>(s.out_h);
    I n, c, oy, ox, rest = index;
    if (s.channels_last) {
      c = rest % channels;
      rest /= channels;
      ox = rest % out_w;
      rest /= out_w;
      oy = rest % out_h;
      n = rest / out_h;
    } else {
      ox = rest % out_w;
      rest /= out_w;
      oy = rest % out_h;
      rest /= out_h;
      c = rest % channels;
      n = rest / channels;
    }
    const int64_t iy0 = static_cast<int64_t>(oy) * s.stride_h - s.pad_top;
    const int64_t ix0 = static_cast<int64_t>(ox) * s.stride_w - s.pad_left;
    const T* wc = w + static_cast<int64_t>(c) * s.kh * s.kw;
    // Element (iy, ix) of this channel is at base + iy * row + ix * col.
    const int64_t row = s.channels_last ? s.w * s.c : s.w;
    const int64_t col = s.channels_last ? s.c : 1;
    const int64_t base = s.channels_last ? static_cast<int64_t>(n) * s.h * s.w * s.c + c
                                         : (static_cast<int64_t>(n) * s.c + c) * s.h * s.w;
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
    finish(acc, static_cast<int64_t>(index), static_cast<int64_t>(c), bias, residual, y, act);
  });
}

// Channels-last with C a multiple of the vector: one thread per pixel and 16 bytes of channels
// (4 float32 or 8 float16), read and written with 16-byte accesses.
template <typename T>
__global__ void depthwise_nhwc_vector(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                      const T* residual, T* y, DepthwiseShape s, Activation act, int64_t total) {
  constexpr int kLanes = sizeof(uint4) / sizeof(T);
  grid_stride(total, [&](auto index) {
    using I = decltype(index);
    const I vectors = static_cast<I>(s.c / kLanes), out_w = static_cast<I>(s.out_w), out_h = static_cast<I>(s.out_h);
    I rest = index;
    const int64_t c0 = static_cast<int64_t>(rest % vectors) * kLanes;
    rest /= vectors;
    const int64_t ox = static_cast<int64_t>(rest % out_w);
    rest /= out_w;
    const int64_t oy = static_cast<int64_t>(rest % out_h);
    const int64_t n = static_cast<int64_t>(rest / out_h);
    const int64_t iy0 = oy * s.stride_h - s.pad_top, ix0 = ox * s.stride_w - s.pad_left;
    const int64_t taps = s.kh * s.kw;
    float acc[kLanes] = {};
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t iy = iy0 + ky * s.dilation_h;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const int64_t ix = ix0 + kx * s.dilation_w;
        if (ix < 0 || ix >= s.w) continue;
        const uint4 packed = *reinterpret_cast<const uint4*>(x + ((n * s.h + iy) * s.w + ix) * s.c + c0);
        const T* lanes = reinterpret_cast<const T*>(&packed);
        const T* wk = w + c0 * taps + ky * s.kw + kx;
#pragma unroll
        for (int j = 0; j < kLanes; ++j) acc[j] += to_float(lanes[j]) * to_float(wk[j * taps]);
      }
    }
    const int64_t at = static_cast<int64_t>(index) * kLanes;  // the output is dense in this order
    uint4 packed, extra;
    T* out = reinterpret_cast<T*>(&packed);
    const T* added = reinterpret_cast<const T*>(&extra);
    if (residual) extra = *reinterpret_cast<const uint4*>(residual + at);
#pragma unroll
    for (int j = 0; j < kLanes; ++j) {
      float v = acc[j];
      if (bias) v += to_float(bias[c0 + j]);
      if (residual) v += to_float(added[j]);
      out[j] = from_float<T>(apply(act, v));
    }
    *reinterpret_cast<uint4*>(y + at) = packed;
  });
}

// Sizes of a tiled block's input window.
struct Window {
  int in_h, in_w;  // input rows and columns one output tile reads
  int64_t tiles_h, tiles_w;

  size_t shared_bytes(const DepthwiseShape& s) const {
    return (static_cast<size_t>(in_h) * in_w + static_cast<size_t>(s.kh * s.kw)) * sizeof(float);
  }
};

Window window_of(const DepthwiseShape& s) {
  Window win;
  win.in_h = static_cast<int>((kTileH * kRowsPerThread - 1) * s.stride_h + (s.kh - 1) * s.dilation_h + 1);
  win.in_w = static_cast<int>((kTileW - 1) * s.stride_w + (s.kw - 1) * s.dilation_w + 1);
  win.tiles_h = (s.out_h + kTileH * kRowsPerThread - 1) / (kTileH * kRowsPerThread);
  win.tiles_w = (s.out_w + kTileW - 1) / kTileW;
  return win;
}

// One block per tile of kTileW x (kTileH * kRowsPerThread) outputs of one (n, c) plane;
// blockIdx.x = (plane * tiles_h + tile row) * tiles_w + tile column. Thread (tx, ty) computes
// rows ty, ty + kTileH, ... of column tx, so a warp stores one contiguous row at a time.
template <typename T>
__global__ void __launch_bounds__(kTileW* kTileH)
    depthwise_tiled(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* residual,
                    T* y, DepthwiseShape s, Activation act, Window win) {
  extern __shared__ float shared[];
  float* tile = shared;                        // [in_h][in_w], zero outside the input (padding)
  float* taps = shared + win.in_h * win.in_w;  // [kh * kw]
  int64_t block = blockIdx.x;
  const int tile_x = static_cast<int>(block % win.tiles_w);
  block /= win.tiles_w;
  const int tile_y = static_cast<int>(block % win.tiles_h);
  const int64_t plane = block / win.tiles_h;  // n * C + c
  const int64_t c = plane % s.c;
  const int thread = threadIdx.y * kTileW + threadIdx.x;
  // Plane sizes fit in int: the launch checks h * w and out_h * out_w.
  const int h = static_cast<int>(s.h), wd = static_cast<int>(s.w), kh = static_cast<int>(s.kh),
            kw = static_cast<int>(s.kw);
  const int oy0 = tile_y * kTileH * kRowsPerThread, ox0 = tile_x * kTileW;
  const int iy0 = oy0 * static_cast<int>(s.stride_h) - static_cast<int>(s.pad_top);
  const int ix0 = ox0 * static_cast<int>(s.stride_w) - static_cast<int>(s.pad_left);
  const T* xp = x + plane * s.h * s.w;
  for (int i = thread; i < win.in_h * win.in_w; i += kTileW * kTileH) {
    const int iy = iy0 + i / win.in_w, ix = ix0 + i % win.in_w;
    tile[i] = iy >= 0 && iy < h && ix >= 0 && ix < wd ? to_float(xp[iy * wd + ix]) : 0.f;
  }
  for (int i = thread; i < kh * kw; i += kTileW * kTileH) taps[i] = to_float(w[c * kh * kw + i]);
  __syncthreads();

  const int ox = ox0 + threadIdx.x;
  if (ox >= s.out_w) return;
  const int sh = static_cast<int>(s.stride_h), sw = static_cast<int>(s.stride_w);
  const int dh = static_cast<int>(s.dilation_h), dw = static_cast<int>(s.dilation_w);
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int ty = threadIdx.y + r * kTileH;
    const int oy = oy0 + ty;
    if (oy >= s.out_h) break;
    const float* origin = tile + ty * sh * win.in_w + threadIdx.x * sw;
    float acc = 0.f;
    for (int ky = 0; ky < kh; ++ky) {
      const float* row = origin + ky * dh * win.in_w;
      for (int kx = 0; kx < kw; ++kx) acc += row[kx * dw] * taps[ky * kw + kx];
    }
    finish(acc, (plane * s.out_h + oy) * s.out_w + ox, c, bias, residual, y, act);
  }
}

// The tiled kernel for 3x3 windows without dilation, stride 1 or 2 (most of MobileNet's):
// each thread keeps the input rows of its kRowsPerThread consecutive output rows and the
// channel's 9 weights in registers.
template <typename T, int kStride>
__global__ void __launch_bounds__(kTileW* kTileH)
    depthwise_3x3(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* residual,
                  T* y, DepthwiseShape s, Activation act, Window win) {
  extern __shared__ float shared[];
  float* tile = shared;  // [in_h][in_w], zero outside the input (padding)
  int64_t block = blockIdx.x;
  const int tile_x = static_cast<int>(block % win.tiles_w);
  block /= win.tiles_w;
  const int tile_y = static_cast<int>(block % win.tiles_h);
  const int64_t plane = block / win.tiles_h;  // n * C + c
  const int64_t c = plane % s.c;
  const int thread = threadIdx.y * kTileW + threadIdx.x;
  const int h = static_cast<int>(s.h), wd = static_cast<int>(s.w);
  const int oy0 = tile_y * kTileH * kRowsPerThread, ox0 = tile_x * kTileW;
  const int iy0 = oy0 * kStride - static_cast<int>(s.pad_top), ix0 = ox0 * kStride - static_cast<int>(s.pad_left);
  const T* xp = x + plane * s.h * s.w;
  for (int i = thread; i < win.in_h * win.in_w; i += kTileW * kTileH) {
    const int iy = iy0 + i / win.in_w, ix = ix0 + i % win.in_w;
    tile[i] = iy >= 0 && iy < h && ix >= 0 && ix < wd ? to_float(xp[iy * wd + ix]) : 0.f;
  }
  float taps[9];
#pragma unroll
  for (int i = 0; i < 9; ++i) taps[i] = to_float(w[c * 9 + i]);
  __syncthreads();

  const int ox = ox0 + threadIdx.x;
  if (ox >= s.out_w) return;
  constexpr int kInRows = (kRowsPerThread - 1) * kStride + 3;
  const int first_row = threadIdx.y * kRowsPerThread;  // of this thread's output rows, in the tile
  const float* origin = tile + first_row * kStride * win.in_w + threadIdx.x * kStride;
  float in[kInRows][3];
#pragma unroll
  for (int i = 0; i < kInRows; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j) in[i][j] = origin[i * win.in_w + j];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int oy = oy0 + first_row + r;
    if (oy >= s.out_h) break;
    float acc = 0.f;
#pragma unroll
    for (int ky = 0; ky < 3; ++ky)
#pragma unroll
      for (int kx = 0; kx < 3; ++kx) acc += in[r * kStride + ky][kx] * taps[ky * 3 + kx];
    finish(acc, (plane * s.out_h + oy) * s.out_w + ox, c, bias, residual, y, act);
  }
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
  const bool tiled = !s.channels_last && s.out_w >= 16 && s.out_h >= 16 && s.h * s.w < (int64_t{1} << 31) &&
                     win.shared_bytes(s) <= kMaxSharedBytes;
  if (tiled) {
    const int64_t blocks = s.n * s.c * win.tiles_h * win.tiles_w;
    if (blocks > 0x7fffffff) fail(EDGERT_ERR_UNSUPPORTED, "depthwise convolution of %lld tiles", static_cast<long long>(blocks));
    const dim3 grid(static_cast<unsigned>(blocks)), threads(kTileW, kTileH);
    const bool window3 = s.kh == 3 && s.kw == 3 && s.dilation_h == 1 && s.dilation_w == 1 && s.stride_h == s.stride_w;
    if (window3 && s.stride_h == 1) {
      depthwise_3x3<T, 1><<<grid, threads, win.shared_bytes(s), stream>>>(xt, wt, bt, rt, yt, s, act, win);
      return check_launch("depthwise_3x3");
    }
    if (window3 && s.stride_h == 2) {
      depthwise_3x3<T, 2><<<grid, threads, win.shared_bytes(s), stream>>>(xt, wt, bt, rt, yt, s, act, win);
      return check_launch("depthwise_3x3");
    }
    depthwise_tiled<T><<<grid, threads, win.shared_bytes(s), stream>>>(xt, wt, bt, rt, yt, s, act, win);
    return check_launch("depthwise_tiled");
  }
  constexpr unsigned kThreads = 256;
  constexpr int64_t kLanes = sizeof(uint4) / sizeof(T);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % sizeof(uint4) == 0; };
  if (s.channels_last && s.c % kLanes == 0 && aligned(x) && aligned(y) && (!residual || aligned(residual))) {
    const int64_t vectors = total / kLanes;
    depthwise_nhwc_vector<T><<<blocks_for(vectors, kThreads), kThreads, 0, stream>>>(xt, wt, bt, rt, yt, s, act, vectors);
    return check_launch("depthwise_nhwc_vector");
  }
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
