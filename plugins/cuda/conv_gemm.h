// Our own dense convolution (group 1): an implicit GEMM whose reduction is split across blocks.
// At batch 1 a late layer has few output pixels (ResNet-50's 3x3 layers at 14x14: 196 pixels x
// 256 filters), so cuDNN's and cuBLASLt's tiles give a dozen blocks for 132 SMs and the layer
// runs at a few percent of the GPU's peak. Splitting the reduction (C*KH*KW, 2304 there) into
// S slices gives S times the blocks; each writes float partial sums to the workspace and one
// more kernel adds them up, with bias, residual and activation, in a fixed order (the result
// does not depend on scheduling). With S = 1 the GEMM kernel writes the output itself.
//
// Both layouts: NCHW activations with weights [M, C, KH, KW], or channels-last activations with
// weights [M, KH, KW, C] (the builder's layout pass). float32 and float16 tensors, float math.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "activation.cuh"

namespace edgert::cuda {

struct ConvGemmShape {
  int64_t n, c, h, w;      // input, logical NCHW
  int64_t m, kh, kw;       // filters and window
  int64_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  int64_t out_h, out_w;
  bool channels_last;
};

// Reduction slices worth listing as tactics for `s` (1 first, then powers of two while each
// slice keeps at least two tiles of the reduction and the blocks stay within a few waves).
std::vector<int> conv_gemm_splits(const ConvGemmShape& s);

// Workspace bytes the kernel needs with `splits` slices (0 for one slice).
size_t conv_gemm_workspace_bytes(const ConvGemmShape& s, int splits);

// Enqueues y = act(conv(x, w) + bias[m] + residual) on `stream` with `splits` reduction slices.
// bias ([M]) and residual (y's shape and layout) may be null; residual may be y itself.
// `workspace` holds conv_gemm_workspace_bytes(s, splits) bytes.
void launch_conv_gemm(const void* x, const void* w, const void* bias, const void* residual, void* y,
                      edgert_dtype dtype, const ConvGemmShape& s, int splits, const Activation& act, void* workspace,
                      cudaStream_t stream);

}  // namespace edgert::cuda
