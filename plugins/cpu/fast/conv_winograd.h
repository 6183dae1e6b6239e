// Winograd F(2x2, 3x3) for dense 3x3 stride-1 convolutions (the tactic family
// f32-conv-wino23-gemm-*): weights transformed once in prepare into 16 packed [M, C] matrices
// U, then per block of 2x2 output tiles (one block per task, blocks spread over the threads) the
// input is transformed into 16 [C, tiles] matrices V, multiplied by the packed GEMM (2.25x fewer
// multiplies than direct), and transformed back with bias and residual; the activation follows
// in one pass. Results differ from the direct sum by
// rounding only (a few ulp relative to the magnitudes involved).
#pragma once

#include <vector>

#include "activation.h"
#include "gemm/sgemm.h"

namespace edgert::cpu {

class WinogradConv {
 public:
  // Dense (group 1) 3x3 stride 1 dilation 1 2-D convolutions only; the caller checks.
  void prepare(gemm::Isa isa, const float* w, int64_t batch, int64_t channels, int64_t out_channels, int64_t in_h,
               int64_t in_w, int64_t out_h, int64_t out_w, int64_t pad_top, int64_t pad_left, int threads);
  size_t workspace_bytes() const;
  void execute(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
               void* workspace) const;

 private:
  int64_t v_stride() const;
  int64_t m_stride() const;
  int64_t thread_floats() const;
  void input_transform(const float* plane, int64_t t0, int64_t count, float* v, int64_t pos_stride) const;
  void output_transform(const float* mt, int64_t pos_stride, int64_t t0, int64_t count, float bias, const float* z,
                        float* y) const;

  std::vector<gemm::PackedA> u_;  // 16 transformed weight matrices [M, C]
  int threads_ = 1;
  int64_t batch_ = 0, channels_ = 0, out_channels_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  int64_t pad_top_ = 0, pad_left_ = 0, tiles_h_ = 0, tiles_w_ = 0, tile_block_ = 0;
};

}  // namespace edgert::cpu
