// cuBLASLt for the plugin's row-major products (matmul.cpp) and for the 1x1 convolutions that
// are products (conv.cpp): the descriptors of one shape and the algorithms cuBLASLt's
// heuristic proposes for it, in its order. A tactic "heuristic algorithm i" names the same
// algorithm wherever the same cuBLASLt version runs it (the timing cache keys on the version).
//
// cuBLASLt is column-major: the row-major Y[M,N] = A'[M,K] B'[K,N] is computed as the
// column-major Y^T[N,M] = B'^T A'^T, so B's buffer is cuBLASLt's A and A's is its B; a bias
// vector in the epilogue then has N values, one per column of Y.
#pragma once

#include <cublasLt.h>

#include <array>

#include "cuda_op.h"

namespace edgert::cuda {

constexpr int kMaxLtAlgorithms = 8;
constexpr size_t kLtWorkspaceBytes = size_t{4} << 20;
// Static names of the tactics "heuristic algorithm i" of a product and of a 1x1 convolution.
extern const char* const kLtGemmTacticNames[kMaxLtAlgorithms];
extern const char* const kLtConvTacticNames[kMaxLtAlgorithms];

// One product's shapes, as row-major operands.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0;  // elements between batches (0: broadcast)
  bool trans_a = false, trans_b = false;
  Shape out;
};

// The descriptors of one product; cuBLASLt keeps no state between calls.
class LtPlan {
 public:
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() { reset(); }

  // Descriptors of `s` in `dtype` (accumulating in float32; TF32 for float32 when `tf32`) with
  // the epilogue, and up to kMaxLtAlgorithms algorithms; fails when cuBLASLt proposes none.
  void build(const GemmShape& s, edgert_dtype dtype, cublasLtEpilogue_t epilogue, bool tf32);
  int algorithms() const { return found_; }
  // Y = alpha A' B' + beta C, then the epilogue (bias: N values, or null), with algorithm
  // `index`; `c` may be `y` (beta 0, or a residual already in y).
  void run(int index, float alpha, const void* a, const void* b, float beta, const void* c, void* y, const void* bias,
           void* workspace, cudaStream_t stream);

 private:
  void reset();

  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  std::array<cublasLtMatmulHeuristicResult_t, kMaxLtAlgorithms> algorithms_{};
  int found_ = 0;
};

}  // namespace edgert::cuda
