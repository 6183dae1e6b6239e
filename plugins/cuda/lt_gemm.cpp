#include "lt_gemm.h"

#include "handles.h"

namespace edgert::cuda {

const char* const kLtGemmTacticNames[kMaxLtAlgorithms] = {
    "gemm-cublaslt-heuristic-0", "gemm-cublaslt-heuristic-1", "gemm-cublaslt-heuristic-2", "gemm-cublaslt-heuristic-3",
    "gemm-cublaslt-heuristic-4", "gemm-cublaslt-heuristic-5", "gemm-cublaslt-heuristic-6", "gemm-cublaslt-heuristic-7"};
const char* const kLtConvTacticNames[kMaxLtAlgorithms] = {
    "conv-1x1-gemm-cublaslt-heuristic-0", "conv-1x1-gemm-cublaslt-heuristic-1", "conv-1x1-gemm-cublaslt-heuristic-2",
    "conv-1x1-gemm-cublaslt-heuristic-3", "conv-1x1-gemm-cublaslt-heuristic-4", "conv-1x1-gemm-cublaslt-heuristic-5",
    "conv-1x1-gemm-cublaslt-heuristic-6", "conv-1x1-gemm-cublaslt-heuristic-7"};

void LtPlan::reset() {
  if (op_) cublasLtMatmulDescDestroy(op_);
  for (cublasLtMatrixLayout_t* l : {&a_, &b_, &c_, &d_})
    if (*l) cublasLtMatrixLayoutDestroy(*l);
  if (preference_) cublasLtMatmulPreferenceDestroy(preference_);
  op_ = nullptr;
  a_ = b_ = c_ = d_ = nullptr;
  preference_ = nullptr;
  found_ = 0;
}

void LtPlan::build(const GemmShape& s, edgert_dtype dtype, cublasLtEpilogue_t epilogue, bool tf32) {
  reset();
  const cudaDataType_t type = dtype == EDGERT_DTYPE_FLOAT16 ? CUDA_R_16F : CUDA_R_32F;
  const cublasComputeType_t compute =
      dtype == EDGERT_DTYPE_FLOAT32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check_cublas(cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // cuBLASLt's A is our B: transposed exactly when our B is.
  const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "TRANSA");
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "TRANSB");
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
               "EPILOGUE");
  auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t stride) {
    check_cublas(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows),
                 "cublasLtMatrixLayoutCreate");
    if (s.batch > 1) {
      const int32_t count = static_cast<int32_t>(s.batch);
      check_cublas(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                   "BATCH_COUNT");
      check_cublas(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                    sizeof stride),
                   "STRIDED_BATCH_OFFSET");
    }
  };
  // Column-major views of the row-major buffers (leading dimension = rows of the view).
  layout(&a_, s.trans_b ? s.k : s.n, s.trans_b ? s.n : s.k, s.stride_b);
  layout(&b_, s.trans_a ? s.m : s.k, s.trans_a ? s.k : s.m, s.stride_a);
  layout(&c_, s.n, s.m, s.m * s.n);
  layout(&d_, s.n, s.m, s.m * s.n);
  check_cublas(cublasLtMatmulPreferenceCreate(&preference_), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kLtWorkspaceBytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof workspace),
               "MAX_WORKSPACE_BYTES");
  check_cublas(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), op_, a_, b_, c_, d_, preference_, kMaxLtAlgorithms,
                                              algorithms_.data(), &found_),
               "cublasLtMatmulAlgoGetHeuristic");
  if (found_ == 0) fail(EDGERT_ERR_UNSUPPORTED, "cuBLASLt proposes no algorithm for this product");
}

void LtPlan::run(int index, float alpha, const void* a, const void* b, float beta, const void* c, void* y,
                 const void* bias, void* workspace, cudaStream_t stream) {
  if (index < 0 || index >= found_)
    fail(EDGERT_ERR_UNSUPPORTED, "cuBLASLt proposes %d algorithms for this product; there is no algorithm %d", found_,
         index);
  if (bias)
    check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                 "BIAS_POINTER");
  check_cublas(cublasLtMatmul(cublaslt_handle(), op_, &alpha, b, a_, a, b_, &beta, c ? c : y, c_, y, d_,
                              &algorithms_[static_cast<size_t>(index)].algo, workspace, kLtWorkspaceBytes, stream),
               "cublasLtMatmul");
}

}  // namespace edgert::cuda
