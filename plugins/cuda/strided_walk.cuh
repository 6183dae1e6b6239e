// A walk over a dense index space that keeps one element offset per operand: the index i of
// the walk (row-major over `dims`, last axis fastest) is at element offset sum(coord[a] *
// strides[k][a]) of operand k. Transpose, Slice, Concat, Tile, Expand, Pad and broadcasting
// element-wise ops are all such walks. Built on the host in prepare and handed to kernels by
// value (no device memory), so execute stays allocation-free.
#pragma once

#include <array>

#include "cuda_op.h"

namespace edgert::cuda {

// Tile and DepthToSpace walk views of up to twice a tensor's rank.
constexpr int kMaxWalkRank = 2 * EDGERT_MAX_RANK;

template <int N>
struct StridedWalk {
  int rank = 0;
  int64_t dims[kMaxWalkRank] = {};
  int64_t strides[N][kMaxWalkRank] = {};

  // The walk over `dims` with operand k at `strides[k]` (one stride per axis, in elements, any
  // sign). Axes of size 1 are dropped and neighbouring axes every operand walks contiguously
  // are merged, so a dense copy is a walk of rank 1 and few indices need dividing.
  static StridedWalk make(const Shape& dims, const std::array<std::vector<int64_t>, N>& strides) {
    if (dims.size() > static_cast<size_t>(kMaxWalkRank))
      fail(EDGERT_ERR_UNSUPPORTED, "a walk of rank %zu exceeds the supported %d", dims.size(), kMaxWalkRank);
    for (const std::vector<int64_t>& s : strides)
      if (s.size() != dims.size()) fail(EDGERT_ERR_INTERNAL, "walk strides of rank %zu for dims of rank %zu", s.size(), dims.size());
    StridedWalk w;
    for (size_t a = 0; a < dims.size(); ++a) {
      if (dims[a] == 1) continue;
      bool merge = w.rank > 0;
      for (int k = 0; k < N && merge; ++k) merge = w.strides[k][w.rank - 1] == strides[k][a] * dims[a];
      if (merge) {
        w.dims[w.rank - 1] *= dims[a];
        for (int k = 0; k < N; ++k) w.strides[k][w.rank - 1] = strides[k][a];
        continue;
      }
      w.dims[w.rank] = dims[a];
      for (int k = 0; k < N; ++k) w.strides[k][w.rank] = strides[k][a];
      ++w.rank;
    }
    return w;
  }

  // True when operand k is walked densely (offset == index), e.g. the output of most walks.
  bool dense(int k) const {
    int64_t expected = 1;
    for (int a = rank - 1; a >= 0; --a) {
      if (strides[k][a] != expected) return false;
      expected *= dims[a];
    }
    return true;
  }

#ifdef __CUDACC__
  // Offsets of walk index `index`, divided in I (uint32_t when the walk is under 2^31 elements:
  // see grid.cuh).
  template <typename I>
  __device__ __forceinline__ void offsets(I index, int64_t (&out)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = 0;
    for (int a = rank - 1; a >= 0; --a) {
      const I d = static_cast<I>(dims[a]);
      const I q = index / d;
      const int64_t r = static_cast<int64_t>(index - q * d);
      index = q;
#pragma unroll
      for (int k = 0; k < N; ++k) out[k] += r * strides[k][a];
    }
  }
#endif
};

}  // namespace edgert::cuda
