// edgert.FusedAttention's operands as every plugin reads them (builder/src/passes/attention_fusion.cpp):
// Q [..., L, D], the keys (Kt [..., D, S], or K [..., S, D] with keys_transposed 0) and
// V [..., S, Dv], batch dims broadcasting as MatMul's, each given either as the node's input
// itself or (attributes q_perm, k_perm, v_perm) as a Transpose of it with that perm, which the
// kernels read in place by strides; and the output [..., L, Dv], written as it is or (y_perm) as
// its Transpose with that perm. A perm keeps the last axis last, so every operand's rows are
// contiguous. Before its perm, an input may be one index of one of its axes (q_select, k_select,
// v_select: [axis, index], a Gather of a constant index): Q, K and V of a packed projection
// [L, B, 3, H, D] read in place at their offsets. The axis is not the last.
#pragma once

#include <cstdint>
#include <vector>

#include "op_support.h"

namespace edgert::plugin {

struct AttentionOperand {
  Shape dims;                    // as the attention sees it: [batch..., rows, cols]
  std::vector<int64_t> strides;  // elements per step along each of those dims; the last is 1
  std::vector<int64_t> batch;    // the strides along the output's batch dims: 0 where it broadcasts
  int64_t offset = 0;            // elements from the input's start to the operand's first
  int64_t row_stride() const { return strides[strides.size() - 2]; }
};

struct AttentionOperands {
  AttentionOperand q, keys, v, y;  // keys as the second input holds them: Kt, or K
  bool keys_transposed = true;
  int64_t l = 0, d = 0, s = 0, dv = 0;
  Shape batch;    // the output's batch dims
  Shape y_shape;  // the output tensor's dims (its Transpose's, with y_perm)
};

// The operands of `node` over its inputs `in`; fails (KernelError) saying what is wrong.
AttentionOperands attention_operands(const edgert_node& node, const edgert_tensor* in);

// The batch matrix at index `b` of the output's batch dims (last fastest): the element offset
// of `operand`'s matrix from its input's start.
int64_t batch_offset(const AttentionOperands& a, const AttentionOperand& operand, int64_t b);

}  // namespace edgert::plugin
