// Winograd F(m x m, 3x3), m = 2 or 4, for dense 3x3 stride-1 convolutions (the tactic families
// f32-conv-wino23-gemm-* and f32-conv-wino43-gemm-*): weights transformed once in prepare into
// (m + 2)^2 packed [M, C] matrices U, then per block of m x m output tiles (one block per task,
// blocks spread over the threads) the input is transformed into (m + 2)^2 [C, tiles] matrices V,
// multiplied by the packed GEMM (2.25x fewer multiplies than direct for m = 2, 4x for m = 4), and
// transformed back with bias and residual; the activation follows in one pass. Results differ
// from the direct sum by rounding only; F(4x4) rounds a little more (its transforms scale by up
// to 8), still well inside the tolerance every fast tactic is tested to.
#pragma once

#include <vector>

#include "activation.h"
#include "gemm/sgemm.h"

namespace edgert::cpu {

class WinogradConv {
 public:
  // Dense (group 1) 3x3 stride 1 dilation 1 2-D convolutions only; the caller checks.
  // tile: m, the output tile side (2 or 4). Called again for other shapes, it keeps the
  // transformed weights made from the same `w` (the same pointer: weights never change).
  void prepare(gemm::Isa isa, int tile, const float* w, int64_t batch, int64_t channels, int64_t out_channels,
               int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, int64_t pad_top, int64_t pad_left,
               int threads);
  size_t workspace_bytes() const;
  // The transformed weights U it holds.
  size_t state_bytes() const;
  void execute(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
               void* workspace) const;

 private:
  int64_t positions() const;  // (m + 2)^2
  int64_t v_stride() const;
  int64_t m_stride() const;
  int64_t thread_floats() const;

  std::vector<gemm::PackedA> u_;  // one transformed weight matrix [M, C] per position
  const float* u_from_ = nullptr;  // the filters, tile and ISA U was made for
  int u_tile_ = 0;
  gemm::Isa u_isa_ = gemm::Isa::Portable;
  int tile_ = 2;
  bool avx512_transforms_ = false;  // transforms of x86/winograd_avx512.cpp (AVX-512 tactics)
  int threads_ = 1;
  int64_t batch_ = 0, channels_ = 0, out_channels_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  int64_t pad_top_ = 0, pad_left_ = 0, tiles_h_ = 0, tiles_w_ = 0, tile_block_ = 0;
};

}  // namespace edgert::cpu
