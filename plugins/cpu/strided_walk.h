// Visiting every coordinate of a strided view: the loop reductions and normalizations share.
#pragma once

#include <cstdint>

#include "edgert/types.h"

namespace edgert::cpu {

// Calls f(offset) for every combination of coordinates over `dims` (row-major), where offset
// is base + sum(coord[i] * strides[i]). Rank 0 visits `base` once; a zero dimension, never.
template <typename F>
void strided_walk(const int64_t* dims, const int64_t* strides, int rank, int64_t base, F&& f) {
  for (int i = 0; i < rank; ++i)
    if (dims[i] == 0) return;
  int64_t counter[EDGERT_MAX_RANK] = {};
  int64_t offset = base;
  while (true) {
    f(offset);
    int i = rank - 1;
    for (; i >= 0; --i) {
      offset += strides[i];
      if (++counter[i] < dims[i]) break;
      offset -= strides[i] * dims[i];
      counter[i] = 0;
    }
    if (i < 0) return;
  }
}

}  // namespace edgert::cpu
