// Float32 MatMul, FusedMatMul and Gemm on the packed GEMM (gemm/sgemm.h) that the convolutions
// use: the tactics f32-matmul-gemm-<tile>-<isa> and f32-gemm-packed-<tile>-<isa>. Transformers
// spend most of their time here.
//
// Two ways to a product, each a tactic family, timed against each other by the builder:
//  - activations as GEMM's A (packed at each run) and B read where it lies: one GEMM over all
//    batch rows when B is one matrix, else one per matrix (attention's batched products);
//  - with a constant B (the projections), the weights as GEMM's A, packed once in prepare (and
//    stored in the engine, as a convolution's are), the activations its B: Y^T = W^T X^T. A run
//    packs only the activations, which wins with few rows (49 tokens against 1536 x 768
//    weights: packing the weights at every run cost as much as the products) and loses with
//    many (the transposed writes of Y), hence the tactics ...-gemm-w-....
#pragma once

#include <cstdint>
#include <vector>

#include "activation.h"
#include "gemm/sgemm.h"
#include "kernel.h"

namespace edgert::cpu {

// Tactic ids of MatMul / FusedMatMul and of Gemm's packed GEMM (stored in engines and timing
// caches); the last digit names the micro-kernel family as the convolution tactics' do.
constexpr int64_t kMatMulGemmPortable = 50;
constexpr int64_t kMatMulGemmAvx2 = 51;
constexpr int64_t kMatMulGemmNeon = 52;
constexpr int64_t kMatMulGemmAvx512 = 53;
constexpr int64_t kMatMulGemmWeightsPortable = 54;  // 54-57: the same families, weights as A
constexpr int64_t kMatMulGemmWeightsAvx512 = 57;

// What a float32 MatMul lists: every family this CPU runs, the widest first, both ways when B
// is constant. `op` names them: "matmul" or "gemm".
std::vector<TacticSpec> matmul_gemm_tactics(const edgert_tensor* in, const char* op = "matmul");
bool is_matmul_gemm_tactic(int64_t tactic);

// What Gemm adds to its products: alpha times them, plus beta times C (strides broadcasting C
// over [m, n]; null: none).
struct GemmTerms {
  float alpha = 1.0f, beta = 1.0f;
  const float* c = nullptr;
  int64_t c_row_stride = 0, c_col_stride = 0;
};

class MatMulSgemm {
 public:
  // MatMul: A [..., m, k] x B [..., k, n] (ranks >= 2, batch dims broadcasting as numpy's
  // matmul). Returns the workspace bytes execute needs.
  size_t prepare(int64_t tactic, const edgert_tensor& a, const edgert_tensor& b, const Shape& out_shape);
  // y = activation(a b + bias[n]); bias may be null.
  void execute(const edgert_tensor& a, const edgert_tensor& b, float* y, const float* bias,
               const Activation& activation, void* workspace);

  // Gemm: y [m, n] = alpha A' B' + beta C, A' = transA ? A^T : A and B' likewise.
  size_t prepare_gemm(int64_t tactic, int64_t m, int64_t k, int64_t n, const float* constant_b, bool trans_b);
  void execute_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* y, const GemmTerms& terms,
                    void* workspace);

  // What prepare keeps: the packed weights, or room for packing A (edgert_prepare_info).
  size_t state_bytes() const { return gemm::state_bytes(packed_); }

 private:
  gemm::Isa isa_ = gemm::Isa::Portable;
  int threads_ = 1;
  int64_t m_ = 0, k_ = 0, n_ = 0;
  bool weights_ = false;  // B is constant: packed_ holds B^T, packed once
  bool flatten_ = false;  // B is one matrix and A's batch rows are contiguous: one GEMM
  Shape out_batch_, a_batch_, b_batch_;
  gemm::PackedA packed_;  // B^T (weights), or A packed at each run

  void choose_isa(int64_t tactic);
  // Packs `rows` x k at `a` (A(i, p) = a[i * row_stride + p * col_stride]) into packed_.
  void pack(const float* a, int64_t rows, int64_t row_stride, int64_t col_stride);
  // Y [rows, n] (y[r * n + i]) from X(r, p) = x[r * x_row_stride + p * x_col_stride] times the
  // packed weights.
  void times_weights(const float* x, int64_t rows, int64_t x_row_stride, int64_t x_col_stride, float* y,
                     const gemm::Epilogue& epilogue, void* workspace) const;
};

}  // namespace edgert::cpu
