// The CUDA plugin's kernel families, one file each (the same base names as the CPU plugin's
// where they implement the same ops). A family registers its kernels in register_<family>_kernels.
#pragma once

#include "cuda_op.h"

#define EDGERT_CUDA_KERNEL_FAMILIES(X) \
  X(conv)                              \
  X(qconv)                             \
  X(quantized)                         \
  X(matmul)                            \
  X(elementwise)                       \
  X(pool)                              \
  X(softmax)                           \
  X(fused_attention)                   \
  X(tensor_layout)                     \
  X(resize)                            \
  X(reduce)                            \
  X(topk)                              \
  X(normalization)                     \
  X(reformat)                          \
  X(image)

namespace edgert::cuda {

#define EDGERT_DECLARE_FAMILY(family) void register_##family##_kernels(KernelRegistry& registry);
EDGERT_CUDA_KERNEL_FAMILIES(EDGERT_DECLARE_FAMILY)
#undef EDGERT_DECLARE_FAMILY

}  // namespace edgert::cuda
