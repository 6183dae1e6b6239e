// Pad a row at a time, the tactic xx-pad-rows-portable (id 60) of ref-pad: every mode, every
// element size ("xx": any size, XNNPACK's spelling). The output is written one row of its
// innermost dim at a time: the part a row takes from one input row is one memcpy, and only the
// pads are filled (memset for a zero value) or copied element by element; the input row of each
// output row comes from a table per outer dim made in prepare. Constant mode first merges every
// dim it does not pad into the dim before it, so padding H and W of NHWC copies rows of W x C,
// and a Pad of zeros (swin_t pads its windows by nothing at 224x224) is one memcpy.
// Bit-identical to the reference: both only move bytes.
#pragma once

#include <vector>

#include "kernel.h"

namespace edgert::cpu {

constexpr int64_t kPadRowsTactic = 60;

enum class PadMode { Constant, Reflect, Edge, Wrap };

std::vector<TacticSpec> pad_tactics(const edgert_node* node, const edgert_tensor* inputs);

class FastPad {
 public:
  // `pads`: the begin pads of every dim then the end ones, as ONNX orders them; negative ones
  // crop. The shapes were checked by the op (the output has no negative dim).
  void prepare(PadMode mode, const Shape& in_shape, const std::vector<int64_t>& pads, size_t elem);
  // `value`: constant mode's pad value, one element's bytes. Pointers borrowed for the call.
  void execute(const void* src, void* dst, const unsigned char* value) const;

 private:
  struct Dim {
    int64_t in = 1, out = 1, begin = 0;  // input size, output size, pad before (negative: crop)
    int64_t in_stride = 1;               // in elements
  };
  void write_row(char* row, const char* src_row, const unsigned char* value, bool zero_value) const;

  PadMode mode_ = PadMode::Constant;
  size_t elem_ = 1;
  std::vector<Dim> dims_;  // after merging; the last one is the row
  // For each outer dim (all but the last), from outer_table_start_[a]: the input offset in
  // elements (coordinate x in_stride) that each output coordinate reads, -1 for the pad value.
  std::vector<int64_t> outer_tables_;
  std::vector<size_t> outer_table_start_;
  int64_t rows_ = 1;                     // output rows: the product of the outer dims
  int64_t copy_begin_ = 0, copy_end_ = 0;  // the part of a row read from the input row as a block
};

}  // namespace edgert::cpu
