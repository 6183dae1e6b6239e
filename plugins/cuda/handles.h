// Library handles the kernels share. cuDNN handles are per host thread (a handle must not be
// used by two threads at once, and execution contexts may run on several); the cuBLASLt handle
// is thread-safe and process-wide. Both are created on first use and live until exit.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include "edgert/plugin.h"

namespace edgert::cuda {

cudnnHandle_t cudnn_handle();
cublasLtHandle_t cublaslt_handle();

// Throw KernelError naming `what` and the library's message on failure.
void check_cudnn(cudnnStatus_t status, const char* what);
void check_cublas(cublasStatus_t status, const char* what);

// Whether FP32 convolutions and GEMMs may use TF32 tensor cores: the node attribute
// `allow_tf32` (the builder's --tf32) says so; by default FP32 stays FP32.
bool allows_tf32(const edgert_node& node);

}  // namespace edgert::cuda
