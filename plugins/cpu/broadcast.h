// Numpy-style multidirectional broadcasting for reference kernels.
#pragma once

#include <vector>

#include "kernel.h"

namespace edgert::cpu {

// The broadcast of the given shapes; fails with EDGERT_ERR_SHAPE naming both when incompatible.
Shape broadcast_shapes(const std::vector<Shape>& shapes);

// Strides of `input` laid out against `output` (rank-aligned to the right); 0 on broadcast axes.
std::vector<int64_t> broadcast_strides(const Shape& input, const Shape& output);

// Walks every element of `output` in row-major order, keeping one offset per input.
// Usage: for (BroadcastIterator it(out, {a, b}); !it.done(); it.next()) use(it.offset(0), ...)
class BroadcastIterator {
 public:
  BroadcastIterator(const Shape& output, const std::vector<Shape>& inputs);
  bool done() const { return index_ >= total_; }
  int64_t index() const { return index_; }
  int64_t offset(size_t input) const { return offsets_[input]; }
  void next();

 private:
  Shape output_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> counter_;
  std::vector<int64_t> offsets_;
  int64_t index_ = 0;
  int64_t total_ = 0;
};

}  // namespace edgert::cpu
