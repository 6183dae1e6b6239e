// The per-tensor scales and uint8 zero points of the INT8 ops, read on the host in prepare
// (their host_inputs bits are set): one value each, or a message naming the operand.
#pragma once

#include "cuda_op.h"
#include "host_operands.h"

namespace edgert::cuda {

inline bool optional_present(const edgert_node* node, const edgert_tensor* in, int i) {
  return node->num_inputs > i && is_present(in[i]);
}

// The one value of scale tensor `t`.
inline float scalar_scale(const edgert_tensor& t, const char* what) {
  if (numel(t) != 1)
    fail(EDGERT_ERR_UNSUPPORTED, "%s has %lld values; the GPU takes per-tensor quantization (one)", what,
         static_cast<long long>(numel(t)));
  return static_cast<float>(read_floats(t, what)[0]);
}

// The uint8 zero point input i holds (0 when absent); its value must be known.
inline int32_t uint8_zero_point(const edgert_node& node, const edgert_tensor* in, int i, const char* what) {
  if (!optional_present(&node, in, i)) return 0;
  const edgert_tensor& t = in[i];
  if (t.dtype != EDGERT_DTYPE_UINT8 || numel(t) != 1)
    fail(EDGERT_ERR_UNSUPPORTED, "%s is %s %s; the GPU takes one uint8 value", what, edgert_dtype_name(t.dtype),
         shape_string(shape_of(t)).c_str());
  if (!t.data) fail(EDGERT_ERR_NEEDS_DATA, "%s is not known yet", what);
  return *static_cast<const uint8_t*>(t.data);
}

}  // namespace edgert::cuda
