// One reduction as the reduce family runs it (reduce.cu), for the kernels that are reductions in
// another op's clothes (GlobalAveragePool and GlobalMaxPool in pool.cu).
#pragma once

#include <cuda_runtime.h>

#include "cuda_op.h"

namespace edgert::cuda {

enum class ReduceKind : int { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum };

// Output element o (dense, row-major over kept_dims) reduces the input elements at
// offset_of(o over kept_dims, kept_strides) + offset_of(j over reduced_dims, reduced_strides)
// for every j < count. Strides are in input elements; dims of 1 may be left out.
struct ReducePlan {
  ReduceKind kind = ReduceKind::Sum;
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[EDGERT_MAX_RANK] = {}, kept_strides[EDGERT_MAX_RANK] = {};
  int64_t reduced_dims[EDGERT_MAX_RANK] = {}, reduced_strides[EDGERT_MAX_RANK] = {};
  int64_t outputs = 0, count = 1;  // output elements; input elements per output
};

// Enqueues the reduction of x into y (float32 or float16 `dtype`, accumulating in float) on
// `stream`; picks the kernel from the plan's shape. Fails (KernelError) on a bad launch.
void launch_reduce(const void* x, void* y, edgert_dtype dtype, const ReducePlan& plan, cudaStream_t stream);

}  // namespace edgert::cuda
