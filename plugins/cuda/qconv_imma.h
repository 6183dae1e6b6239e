// Our own INT8 convolution on the integer tensor cores (IMMA: mma.sync m16n8k32, uint8
// activations times int8 weights, int32 sums), fastest channels-last, with the requantisation of
// QLinearConv in its epilogue. Why our own: cuDNN's INT8 convolutions scale by one alpha for the
// whole layer, not per output channel, and take no zero point; per-channel symmetric weights
// and asymmetric uint8 activations are what calibration gives (and what ONNX Runtime's Q/DQ
// models carry). The zero point costs nothing in the loop: the kernel sums each filter's
// weights as it stages them and subtracts x_zero_point times that sum once, padding reading as
// the zero point.
//
// As conv_gemm.h, the reduction (KH*KW*C) may be split across blocks for layers with few
// output pixels. On Hopper and later, up to 8 slices of a tile run as one thread-block cluster
// and add their sums through each other's shared memory, with no workspace and no second
// kernel (at batch 1 a kernel boundary costs as much as a small layer); otherwise slices write
// int32 partial sums to the workspace and one more kernel adds them and requantises. Either
// way the bytes equal the CPU reference's: the same integer sum, the same float multiplier and
// rounding.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace edgert::cuda {

struct QConvShape {
  int64_t n, c, h, w;  // input, logical NCHW; stored [N, H, W, C] when channels_last
  int64_t m, kh, kw;   // filters [M, KH, KW, C] (channels-last) or [M, C, KH, KW], and window
  int64_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  int64_t out_h, out_w;
  bool channels_last;
};

// A residual add fused into the epilogue (edgert.QLinearConvAdd, the builder's INT8 residual
// fusion): the convolution's bytes (y_scale, y_zero_point) go through QLinearAdd with
// `residual` as the CPU reference computes it, with ratios conv y_scale / sum scale and
// residual scale / sum scale.
struct QConvResidual {
  const uint8_t* residual = nullptr;  // Y's shape and layout; null: no add
  float conv_ratio = 1, residual_ratio = 1;
  int32_t residual_zero = 0, sum_zero = 0;
};

// The per-layer quantization: the zero points read on the host, per-filter arrays on the device.
struct QConvQuantization {
  const float* multiplier;  // [M]: x_scale * w_scale[m] / y_scale, in float as the CPU reference
  const int32_t* bias;      // [M], or null
  int32_t x_zero_point, y_zero_point;
  QConvResidual add;
};

// A block's tile: output pixels (64, 32 or 16) x filters (64 or 32).
struct QConvTiling {
  int pixels = 64, filters = 64;
};

// The tilings listed as tactics, 64x64 first.
const std::vector<QConvTiling>& qconv_tilings();

// Reduction slices worth listing as tactics with tiling `t` (1 first).
std::vector<int> qconv_splits(const QConvShape& s, QConvTiling t);

// Whether `splits` slices reduce through a cluster on this GPU (no workspace).
bool qconv_cluster_reduction(int splits);

size_t qconv_workspace_bytes(const QConvShape& s, int splits);

// y = requantise(conv(x - x_zero_point, w) + bias) with `splits` reduction slices.
void launch_qconv(const uint8_t* x, const int8_t* w, uint8_t* y, const QConvShape& s, const QConvQuantization& q,
                  QConvTiling tiling, int splits, void* workspace, cudaStream_t stream);

}  // namespace edgert::cuda
