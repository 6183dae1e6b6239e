// Grid-stride loops whose index arithmetic is 32-bit when the range allows. Kernels that
// decompose a flat index into coordinates (divisions and remainders per element) spend most of
// their instructions there, and a 64-bit division costs several times a 32-bit one; ranges of
// 2^31 elements or more (8 GiB of float32) take the 64-bit path.
#pragma once

#include <cstdint>

namespace edgert::cuda {

#ifdef __CUDACC__
// Calls body(i) for every i in [0, n) this thread owns, with i of type I.
template <typename I, typename Body>
__device__ __forceinline__ void grid_stride_as(int64_t n, Body&& body) {
  const I end = static_cast<I>(n);
  const I step = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + threadIdx.x; i < end; i += step) body(i);
}

// body is a generic lambda: it is instantiated for uint32_t and for int64_t indices.
template <typename Body>
__device__ __forceinline__ void grid_stride(int64_t n, Body&& body) {
  if (n < (int64_t{1} << 31)) grid_stride_as<uint32_t>(n, body);
  else grid_stride_as<int64_t>(n, body);
}
#endif

}  // namespace edgert::cuda
