// Per-channel epilogues the convolution and GEMM kernels run after cuDNN or cuBLASLt
// (elementwise.cu implements them). Each enqueues one kernel on `stream` and returns; pointers
// are device (or unified) memory the caller owns and keeps alive until the stream has run it.
// Tensors are [n, c, spatial] in NCHW order, or [n, spatial, c] when `channels_last`; `dtype`
// is float32 or float16 for every operand; math is in float, rounded once per element.
#pragma once

#include <cuda_runtime.h>

#include "activation.cuh"

namespace edgert::cuda {

// y = act(y + bias[c] + residual), in place. `bias` ([c]) and `residual` (y's shape and layout)
// may be null. `residual` may be y itself only as the caller's own business: each element
// reads residual[i] before writing y[i].
void launch_bias_activation(void* y, const void* bias, const void* residual, edgert_dtype dtype, int64_t n, int64_t c,
                            int64_t spatial, bool channels_last, const Activation& act, cudaStream_t stream);

// y[n, c, s] = x[n, c, s] * scale[n, c] (scale [N, C, 1, 1], identical bytes in both layouts).
// y may be x.
void launch_channel_scale(const void* x, const void* scale, void* y, edgert_dtype dtype, int64_t n, int64_t c,
                          int64_t spatial, bool channels_last, cudaStream_t stream);

// y[i, j] = beta * c[i * row_stride + j * col_stride] for y [rows, cols] row-major: a Gemm's C
// broadcast to the product's shape (a stride of 0 repeats C along that dimension).
void launch_broadcast_fill(const void* c, int64_t row_stride, int64_t col_stride, float beta, void* y, edgert_dtype dtype,
                           int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace edgert::cuda
