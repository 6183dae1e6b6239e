// The depthwise 2-D convolution (group == C_in == C_out, weights [C, 1, KH, KW]) the
// convolution kernels run instead of cuDNN, whose depthwise paths are slow at batch 1
// (depthwise.cu). Every epilogue is fused: y = act(conv(x) + bias[c] + residual).
#pragma once

#include <cuda_runtime.h>

#include "activation.cuh"

namespace edgert::cuda {

struct DepthwiseShape {
  int64_t n, c, h, w;             // input, logical NCHW
  int64_t kh, kw;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left;      // the bottom/right pads follow from out_h/out_w
  int64_t dilation_h, dilation_w;
  int64_t out_h, out_w;
  bool channels_last;             // x, y and residual stored [N, H, W, C]; weights stay [C, 1, KH, KW]
};

// Enqueues y = act(depthwise(x, weights) + bias + residual) on `stream`. x, weights, y: device
// pointers of `dtype` (float32 or float16); bias ([C]) and residual (y's shape and layout) may
// be null. residual may be y itself (each output element reads its residual before writing);
// x must not overlap y. Accumulates in float; fails (KernelError) on another dtype or a bad launch.
void launch_depthwise(const void* x, const void* weights, const void* bias, const void* residual, void* y,
                      edgert_dtype dtype, const DepthwiseShape& s, const Activation& act, cudaStream_t stream);

}  // namespace edgert::cuda
