// Where a logical element of a node's tensor lies in memory: row-major, or channels-last for
// the rank-4 activations of a node whose `layout` attribute is "NHWC" (cuda_op.h:
// channels_last), whose dims stay logical [N, C, H, W] while the bytes are [N, H, W, C].
// Kernels walk tensors in storage order and address operands through these strides, so one
// kernel serves both layouts.
#pragma once

#include "cuda_op.h"

namespace edgert::cuda {

// True when a tensor of rank `rank` of a node with channels_last(node) == `nhwc` is stored
// channels-last: only rank-4 tensors are.
inline bool stored_nhwc(int64_t rank, bool nhwc) { return nhwc && rank == 4; }

// The storage position of logical axis `axis` (N C H W -> positions 0 3 1 2 when channels-last).
inline int64_t storage_axis(int64_t axis, int64_t rank, bool nhwc) {
  static constexpr int64_t kPosition[4] = {0, 3, 1, 2};
  return stored_nhwc(rank, nhwc) ? kPosition[axis] : axis;
}

// The logical axis stored at storage position `position` (the inverse of storage_axis).
inline int64_t logical_axis(int64_t position, int64_t rank, bool nhwc) {
  static constexpr int64_t kAxis[4] = {0, 2, 3, 1};
  return stored_nhwc(rank, nhwc) ? kAxis[position] : position;
}

// The dims in storage order: [N, H, W, C] for a channels-last tensor, else `shape` itself.
inline Shape storage_shape(const Shape& shape, bool nhwc) {
  if (!stored_nhwc(static_cast<int64_t>(shape.size()), nhwc)) return shape;
  return {shape[0], shape[2], shape[3], shape[1]};
}

// Element strides of each logical axis of `shape` as stored.
inline std::vector<int64_t> storage_strides(const Shape& shape, bool nhwc) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> strides(shape.size(), 1);
  int64_t stride = 1;
  for (int64_t position = rank - 1; position >= 0; --position) {
    const int64_t axis = logical_axis(position, rank, nhwc);
    strides[static_cast<size_t>(axis)] = stride;
    stride *= shape[static_cast<size_t>(axis)];
  }
  return strides;
}

}  // namespace edgert::cuda
