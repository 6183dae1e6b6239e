// Float32 MatMul and FusedMatMul on the packed GEMM (gemm/sgemm.h) that the convolutions use:
// the tactics f32-matmul-gemm-<tile>-<isa>. Transformers spend most of their time here: the
// projections (activations [batch, seq, k] times a constant [k, n], one GEMM over all batch
// rows) and attention's batched products of two activations (one GEMM per matrix).
#pragma once

#include <cstdint>
#include <vector>

#include "activation.h"
#include "gemm/sgemm.h"
#include "kernel.h"

namespace edgert::cpu {

// Tactic ids of MatMul / FusedMatMul (stored in engines and timing caches); the last digit names
// the micro-kernel family as the convolution tactics' do.
constexpr int64_t kMatMulGemmPortable = 50;
constexpr int64_t kMatMulGemmAvx2 = 51;
constexpr int64_t kMatMulGemmNeon = 52;
constexpr int64_t kMatMulGemmAvx512 = 53;

// What a float32 MatMul lists: every family this CPU runs, the widest first.
std::vector<TacticSpec> matmul_gemm_tactics(const edgert_tensor* in);
bool is_matmul_gemm_tactic(int64_t tactic);

class MatMulSgemm {
 public:
  // A [..., m, k] x B [..., k, n] (ranks >= 2, batch dims broadcasting as numpy's matmul).
  // Returns the workspace bytes execute needs.
  size_t prepare(int64_t tactic, const edgert_tensor& a, const edgert_tensor& b, const Shape& out_shape);
  // y = activation(a b + bias[n]); bias may be null. Allocates nothing once A's largest packing
  // has been made (the first run at the largest shape).
  void execute(const edgert_tensor& a, const edgert_tensor& b, float* y, const float* bias,
               const Activation& activation, void* workspace);

  // Gemm: y [m, n] = epilogue(A' B'), A' = transA ? A^T : A and B' likewise (Gemm's alpha, and
  // beta times C, go in the epilogue). Returns the workspace bytes.
  size_t prepare_gemm(int64_t tactic, int64_t m, int64_t k, int64_t n);
  void execute_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* y,
                    const gemm::Epilogue& epilogue, void* workspace);

 private:
  gemm::Isa isa_ = gemm::Isa::Portable;
  int threads_ = 1;
  int64_t m_ = 0, k_ = 0, n_ = 0;
  bool flatten_ = false;  // B is one matrix and A's batch rows are contiguous: one GEMM
  Shape out_batch_, a_batch_, b_batch_;
  gemm::PackedA packed_;  // A, packed at each run (it is an activation)

  void pack(const float* a, int64_t rows, int64_t row_stride, int64_t col_stride);
};

}  // namespace edgert::cpu
