#include "handles.h"

#include "cuda_op.h"

namespace edgert::cuda {

void check_cudnn(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    fail(status == CUDNN_STATUS_NOT_SUPPORTED ? EDGERT_ERR_UNSUPPORTED : EDGERT_ERR_PLUGIN, "%s: %s", what,
         cudnnGetErrorString(status));
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(status == CUBLAS_STATUS_NOT_SUPPORTED ? EDGERT_ERR_UNSUPPORTED : EDGERT_ERR_PLUGIN, "%s: cuBLAS status %d",
         what, static_cast<int>(status));
}

cudnnHandle_t cudnn_handle() {
  // Deliberately leaked at thread exit: destroying it there races CUDA's own teardown.
  thread_local cudnnHandle_t handle = [] {
    cudnnHandle_t h = nullptr;
    check_cudnn(cudnnCreate(&h), "cudnnCreate");
    return h;
  }();
  return handle;
}

cublasLtHandle_t cublaslt_handle() {
  static cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    check_cublas(cublasLtCreate(&h), "cublasLtCreate");
    return h;
  }();
  return handle;
}

bool allows_tf32(const edgert_node& node) { return Attributes(&node).get_int("allow_tf32", 0) != 0; }

}  // namespace edgert::cuda
