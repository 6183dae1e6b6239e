// The one hand-edited list of kernel families in the CPU plugin. Each family file defines its
// register function; plugin_entry.cpp calls them all in this order. Adding a family = one line
// here plus its file in CMakeLists.txt.
#pragma once

#include "kernel.h"

#define EDGERT_CPU_KERNEL_FAMILIES(X) \
  X(elementwise_binary) \
  X(elementwise_unary) \
  X(cast) \
  X(tensor_shape) \
  X(tensor_layout) \
  X(tensor_index) \
  X(reduce) \
  X(softmax) \
  X(normalization) \
  X(rms_normalization) \
  X(rotary_embedding) \
  X(attention) \
  X(linear_attention) \
  X(flex_attention) \
  X(loss) \
  X(topk) \
  X(conv) \
  X(deform_conv) \
  X(causal_conv_with_state) \
  X(matmul) \
  X(pool) \
  X(quantize) \
  X(qlinear_contrib) \
  X(qlookup) \
  X(einsum) \
  X(resize) \
  X(grid_sample) \
  X(image_layout) \
  X(group_lp_normalization) \
  X(tensor_scatter) \
  X(detection) \
  X(rnn) \
  X(signal) \
  X(text) \
  X(unique) \
  X(image) \
  X(ml) \
  X(fused_attention)

namespace edgert::cpu {
#define EDGERT_DECLARE_FAMILY(family) void register_##family##_kernels(KernelRegistry& registry);
EDGERT_CPU_KERNEL_FAMILIES(EDGERT_DECLARE_FAMILY)
#undef EDGERT_DECLARE_FAMILY
}  // namespace edgert::cpu
