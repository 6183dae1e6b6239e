// Mul(x, s) -> 1x1 Conv  becomes one edgert.FusedConv reading x, with s as its input 4 (S):
// squeeze-and-excitation (efficientnet, mobilenet_v3) scales the channels of x by s [N, C, 1, 1]
// and the block's projection, a 1x1 convolution, is the scaled tensor's only reader. The CPU
// plugin multiplies while it packs x for its GEMM, so the scaled copy of x (a pass over 0.2-1.6
// MB per block) is never written. The product is rounded to float as the Mul rounded it, so
// results are bit-identical.
//
// The convolution: Conv, or a FusedConv without a pool; kernel 1x1, stride 1, no pads, group 1.
// x: float32 [N, C, H, W]; s: float32 [N, C, 1, 1]. The Mul's output must not be an engine
// output. The fused node takes the convolution's place.
#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

bool fuse_channel_scale_into(PassContext& context, const ValueUses& uses, int32_t m, NodeEdits& edits) {
  Graph& graph = context.graph;
  const Node& mul = graph.nodes[m];
  if (!is_op(mul, "Mul") || mul.inputs.size() != 2 || mul.outputs.size() != 1) return false;
  const int32_t product = mul.outputs[0];
  if (context.pinned[product]) return false;
  const int32_t reader = uses.sole_reader(product);
  if (reader < 0 || edits.dead(reader)) return false;
  const Node& conv = graph.nodes[reader];
  if (!pointwise_conv(graph, conv) || conv.inputs[0] != product) return false;
  // Which operand is x [N, C, H, W] and which s [N, C, 1, 1].
  std::vector<int64_t> a, b;
  if (mul.inputs[0] == mul.inputs[1] || !static_dims(graph.values[mul.inputs[0]], a) ||
      !static_dims(graph.values[mul.inputs[1]], b) || a.size() != 4 || b.size() != 4)
    return false;
  for (int32_t v : mul.inputs)
    if (graph.values[v].dtype != EDGERT_DTYPE_FLOAT32) return false;
  const auto is_scale_of = [](const std::vector<int64_t>& s, const std::vector<int64_t>& x) {
    return s[0] == x[0] && s[1] == x[1] && s[2] == 1 && s[3] == 1 && x[2] * x[3] > 1;
  };
  int32_t x = -1, s = -1;
  if (is_scale_of(b, a)) x = mul.inputs[0], s = mul.inputs[1];
  else if (is_scale_of(a, b)) x = mul.inputs[1], s = mul.inputs[0];
  else return false;

  Node fused = is_op(conv, "Conv") ? fused_conv_of(conv) : conv;
  fused.name = fused_name(mul.name, conv.name);
  fused.inputs[0] = x;
  fused.inputs.resize(5, -1);
  fused.inputs[4] = s;
  return replace_pair(edits, m, reader, std::move(fused));
}

}  // namespace

int fuse_channel_scales(PassContext& context) {
  return rewrite_nodes(context, [&](const ValueUses& uses, int32_t n, NodeEdits& edits) {
    return fuse_channel_scale_into(context, uses, n, edits);
  });
}

}  // namespace edgert::builder
