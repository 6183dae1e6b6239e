// Transpose without per-element index math, the tactic xx-transpose-tiled-portable (id 60) of
// ref-transpose, for elements of 1, 2, 4 and 8 bytes ("xx": any of them, XNNPACK's spelling).
// Dims that stay neighbours in the output are merged first (size-1 dims dropped). When the
// input's innermost dim then stays innermost, every output row is one memcpy of an input run;
// otherwise the output's innermost dim and the input's contiguous one form a 2-D transpose,
// copied in square tiles 64 bytes a side (16 x 16 floats): a tile reads 16 cache lines and
// writes 16, all resident until it is done. Rows or tile strips are spread over the thread pool.
// Bit-identical to the reference: both only move bytes.
#pragma once

#include <vector>

#include "kernel.h"

namespace edgert::cpu {

constexpr int64_t kTransposeTiledTactic = 60;

std::vector<TacticSpec> transpose_tactics(const edgert_node* node, const edgert_tensor* inputs);

class FastTranspose {
 public:
  // `src_strides[a]`: the input stride (in elements) of output dim a. Returns false for an
  // element size the tiles do not handle; the op then runs the reference.
  bool prepare(const Shape& out_shape, const std::vector<int64_t>& src_strides, size_t elem);
  // Pointers borrowed for the call; the output is dense, distinct from the input.
  void execute(const void* src, void* dst) const;

 private:
  void copy_runs(const char* src, char* dst) const;
  template <typename T>
  void copy_tiles(const T* src, T* dst) const;

  size_t elem_ = 1;
  int64_t total_ = 0;  // elements
  int rank_ = 0;       // after merging
  int64_t dims_[EDGERT_MAX_RANK] = {}, src_strides_[EDGERT_MAX_RANK] = {}, dst_strides_[EDGERT_MAX_RANK] = {};
  // The output dim the input walks contiguously, the tiles' rows; -1 when the innermost output
  // dim is that one (runs, no tiles).
  int tile_dim_ = -1;
};

}  // namespace edgert::cpu
