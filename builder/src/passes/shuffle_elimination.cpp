// Removes shuffles that cancel or compose:
//   Transpose(Transpose(x, p1), p2)     -> Transpose(x, p1[p2]), or x when that is the identity
//   Transpose(x, identity perm)         -> x
//   Transpose(x, p) that moves only dims of size 1 (a fixed shape) -> Reshape(x, its output
//                                         shape): the same bytes in the same order, and a Reshape
//                                         runs in place ([1, L, E] <-> [L, 1, E] around exported
//                                         attention at batch 1, twice per transformer layer)
//   Reshape(R(x), s) for R in Reshape, Flatten, Squeeze, Unsqueeze -> Reshape(x, s), when s is
//                                         a constant without 0 entries (0 copies a dim of the
//                                         input, which would then be another tensor's)
//   Reshape / Flatten / Squeeze / Unsqueeze whose output shape equals its static input shape -> x
// The first shuffle of a pair disappears in dead-code elimination once nothing reads it.
#include <algorithm>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

std::vector<int64_t> transpose_perm(const Graph& graph, const Node& node) {
  const Attribute* perm = node.attribute("perm");
  if (perm) return perm->ints;
  const Value& x = graph.values[node.inputs[0]];
  std::vector<int64_t> p;
  if (!x.rank_known) return p;
  for (size_t i = x.shape.size(); i-- > 0;) p.push_back(static_cast<int64_t>(i));  // default: reverse
  return p;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Whether `perm` keeps the dims of `x` that are not 1 in their order: then the transpose moves
// no element. Only for a fixed shape: a dim that is 1 at one profile shape may be 4 at another.
bool moves_only_unit_dims(const Value& x, const std::vector<int64_t>& perm) {
  if (!x.rank_known || !x.shape_is_fixed() || perm.size() != x.shape.size()) return false;
  int64_t previous = -1;
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size())) return false;
    if (x.shape[static_cast<size_t>(axis)].value == 1) continue;
    if (axis < previous) return false;
    previous = axis;
  }
  return true;
}

bool is_reshape_like(const Node& node) {
  return is_op(node, "Reshape") || is_op(node, "Flatten") || is_op(node, "Squeeze") || is_op(node, "Unsqueeze");
}

}  // namespace

int eliminate_shuffles(PassContext& context) {
  Graph& graph = context.graph;
  int rewrites = 0;
  std::vector<bool> dead(graph.nodes.size(), false);
  // Built once and kept current: a rebuild per node made the pass quadratic in the graph's size.
  // The edits below change inputs, never outputs, so producers stay as they were.
  ValueUses uses(graph);
  // Node `n` reads `from`'s input instead of `from`'s output.
  auto bypass = [&](int32_t n, int32_t from) {
    uses.forget_node(graph, n);
    graph.nodes[n].inputs[0] = graph.nodes[from].inputs[0];
    uses.learn_node(graph, n);
    graph.nodes[n].name = fused_name(graph.nodes[from].name, graph.nodes[n].name);
  };
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.size() != 1) continue;
    const int32_t x = node.inputs[0], y = node.outputs[0];
    const int32_t p = uses.producer[x];
    if (is_op(node, "Transpose")) {
      std::vector<int64_t> perm = transpose_perm(graph, node);
      if (perm.empty()) continue;
      if (p >= 0 && !dead[p] && is_op(graph.nodes[p], "Transpose")) {
        std::vector<int64_t> first = transpose_perm(graph, graph.nodes[p]);
        if (first.size() != perm.size()) continue;
        std::vector<int64_t> composed(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) composed[i] = first[perm[i]];
        bypass(static_cast<int32_t>(n), p);
        node.set_attribute(ints_attribute("perm", composed));
        perm = composed;
        ++rewrites;
      }
      if (is_identity_perm(perm) && redirect_value(graph, y, node.inputs[0], context.pinned, uses)) {
        dead[n] = true;
        ++rewrites;
        continue;
      }
      if (moves_only_unit_dims(graph.values[node.inputs[0]], perm) && graph.values[y].rank_known &&
          graph.values[y].shape_is_fixed()) {
        std::vector<int64_t> dims;
        for (const Dim& d : graph.values[y].shape) dims.push_back(d.value);
        const int64_t rank = static_cast<int64_t>(dims.size());
        const int32_t shape = add_int64_constant(graph, graph.values[y].name + ":shape", {rank}, dims);
        uses.forget_node(graph, static_cast<int32_t>(n));
        node.op_type = "Reshape";
        node.opset = std::max(node.opset, 5);
        node.attributes.clear();
        node.inputs = {node.inputs[0], shape};
        uses.learn_node(graph, static_cast<int32_t>(n));
        ++rewrites;
      }
      continue;
    }
    if (!is_reshape_like(node)) continue;
    if (is_op(node, "Reshape") && node.inputs.size() == 2 && p >= 0 && !dead[p] && is_reshape_like(graph.nodes[p])) {
      std::vector<double> target = constant_as_doubles(graph.values[node.inputs[1]]);
      const Attribute* allowzero = node.attribute("allowzero");
      bool zero_free = !target.empty();
      for (double v : target) zero_free = zero_free && v != 0;
      if (zero_free || (allowzero && allowzero->i != 0)) {
        bypass(static_cast<int32_t>(n), p);
        ++rewrites;
      }
    }
    if (graph.values[node.inputs[0]].same_shape_as(graph.values[y]) &&
        graph.values[node.inputs[0]].dtype == graph.values[y].dtype &&
        redirect_value(graph, y, node.inputs[0], context.pinned, uses)) {
      dead[n] = true;
      ++rewrites;
    }
  }
  if (rewrites) remove_nodes(graph, dead);
  return rewrites;
}

}  // namespace edgert::builder
