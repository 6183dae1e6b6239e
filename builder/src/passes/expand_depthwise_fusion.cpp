// 1x1 Conv -> depthwise Conv  becomes one edgert.FusedConv: the depthwise node, reading the 1x1
// convolution's input, with the 1x1 weights and bias as its inputs 5 and 6 and the 1x1's
// activation as pre_activation (plugins/cpu/activation.h). The inverted residual blocks of
// mobilenet_v2 and efficientnet expand 16-24 channels six times, then filter each expanded
// channel alone; at 112x112 and 56x56 the expanded tensor (4.8 MB, 1.8 MB) is larger than L2 and
// its memory cold at every inference, so writing it and reading it back cost more than either
// convolution's arithmetic. Fused, the CPU plugin expands a band of rows at a time into a
// cache-sized buffer and filters it there. The pre-convolution rounds to float and applies its
// activation as the separate node did, so results are bit-identical to the unfused kernels' formulas.
//
// The 1x1: Conv or FusedConv (activation allowed; no residual, channel scale or pool), stride 1,
// no pads, group 1. The depthwise: Conv or FusedConv (activation allowed; no residual, channel
// scale or pool), group = channels, square 3x3 or 5x5, stride 1 or 2 both ways, no dilation. The
// expanded tensor must have the depthwise as its only reader, not be an engine output, and hold
// at least kMinExpandedBytes (smaller ones stay in cache: the split buys nothing). The fused node
// takes the depthwise node's place.
#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

constexpr int64_t kMinExpandedBytes = 3 << 20;

bool depthwise_conv(const Graph& graph, const Node& conv) {
  const bool plain = is_op(conv, "Conv");
  const bool fused = conv.domain == kFusedDomain && conv.op_type == "FusedConv";
  if (!(plain || fused) || conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.outputs.size() != 1) return false;
  if (fused && conv.attribute("pool_kernel_shape")) return false;
  const Attribute* auto_pad = conv.attribute("auto_pad");
  if (auto_pad && auto_pad->s != "NOTSET") return false;
  std::vector<int64_t> w, x;
  if (!static_dims(graph.values[conv.inputs[1]], w) || !static_dims(graph.values[conv.inputs[0]], x) ||
      w.size() != 4 || x.size() != 4)
    return false;
  const Attribute* group = conv.attribute("group");
  if (!group || group->i != x[1] || w[0] != x[1] || w[1] != 1) return false;
  if (w[2] != w[3] || (w[2] != 3 && w[2] != 5) || !ints_equal(conv.attribute("dilations"), 1)) return false;
  const Attribute* strides = conv.attribute("strides");
  if (strides && (strides->ints.size() != 2 || strides->ints[0] != strides->ints[1] || strides->ints[0] > 2))
    return false;
  return x[1] * x[2] * x[3] * 4 >= kMinExpandedBytes;
}

Attribute copied(const Node& from, const char* name, const char* as, edgert_attr_type type) {
  const Attribute* a = from.attribute(name);
  Attribute out = a ? *a : Attribute{};
  out.name = as;
  out.type = type;
  return out;
}

bool fuse_expand_into_depthwise(PassContext& context, const ValueUses& uses, int32_t p, NodeEdits& edits) {
  Graph& graph = context.graph;
  const Node& expand = graph.nodes[p];
  if (!pointwise_conv(graph, expand) || expand.inputs.size() > 3) return false;
  const int32_t expanded = expand.outputs[0];
  if (context.pinned[expanded] || graph.values[expanded].dtype != EDGERT_DTYPE_FLOAT32) return false;
  const int32_t reader = uses.sole_reader(expanded);
  if (reader < 0 || edits.dead(reader)) return false;
  const Node& conv = graph.nodes[reader];
  if (!depthwise_conv(graph, conv) || conv.inputs[0] != expanded) return false;

  Node fused = is_op(conv, "Conv") ? fused_conv_of(conv) : conv;
  fused.name = fused_name(expand.name, conv.name);
  fused.inputs[0] = expand.inputs[0];
  fused.inputs.resize(7, -1);
  fused.inputs[5] = expand.inputs[1];
  fused.inputs[6] = expand.inputs.size() > 2 ? expand.inputs[2] : -1;
  fused.set_attribute(copied(expand, "activation", "pre_activation", EDGERT_ATTR_STRING));
  fused.set_attribute(copied(expand, "activation_params", "pre_activation_params", EDGERT_ATTR_FLOATS));
  return replace_pair(edits, p, reader, std::move(fused));
}

}  // namespace

int fuse_expand_depthwise(PassContext& context) {
  return rewrite_nodes(context, [&](const ValueUses& uses, int32_t n, NodeEdits& edits) {
    return fuse_expand_into_depthwise(context, uses, n, edits);
  });
}

}  // namespace edgert::builder
