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
//   Reshape(Transpose(x, p), s) where the Reshape only splits dims (each of the Transpose's dims
//                                         into consecutive ones of s) -> Transpose(Reshape(x, s'), p'):
//                                         the split moves to x's side of the Transpose, where it
//                                         runs in place. Exported attention splits [B*H, L, D]
//                                         into [B, H, L, D] right after moving the heads there
//                                         from [L, B*H, D]: so the attention reads the
//                                         Transpose's input through (attention_fusion.cpp)
//   Squeeze(Transpose(Unsqueeze(x)))    -> Transpose(x, p') when the Squeeze takes out exactly the
//                                         dims the Unsqueeze put in (PyTorch 2's packed attention
//                                         projection: unflatten, unsqueeze(0), transpose(0, -2),
//                                         squeeze(-2))
//   Gather(Transpose(x, p), a, i) of one constant index, where p keeps the other dims in order
//                                      -> Gather(x, p[a], i): the Transpose only moved the axis
//                                         gathered from
//   Reshape(Gather(x, a, i), s) of one constant index, where the Reshape only splits dims
//                                      -> Gather(Reshape(x, s'), a', i): the split moves to x, where
//                                         it runs in place, and the attention reads one index of
//                                         the packed projection in place (q_select, ...)
// The pass sweeps the graph until a sweep changes nothing, at most four times (one rewrite
// enables the next, as the splits that move before a Transpose meet the Reshape before it). A
// shuffle that nothing reads any more goes at the end of each sweep, so that its input's other
// reader is then the sole one; the first shuffle of a pair disappears that way.
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

// When `y` only splits the dims of `t` (each t dim one run of consecutive y dims of the same
// size; a dim that varies between profile shapes split into one varying dim and fixed ones): for
// each t dim, the first of its y dims and their count. False otherwise, or when nothing splits.
bool split_groups(const Value& t, const Value& y, std::vector<std::pair<size_t, size_t>>& groups) {
  if (!t.rank_known || !y.rank_known || y.shape.size() <= t.shape.size()) return false;
  groups.clear();
  size_t j = 0;
  for (const Dim& dim : t.shape) {
    if (dim.value <= 0) return false;
    const size_t first = j;
    int64_t product = 1;
    int varying = 0;
    while (j < y.shape.size() && (product < dim.value || j == first)) {
      if (y.shape[j].value <= 0) return false;
      product *= y.shape[j].value;
      varying += y.shape[j].varies() ? 1 : 0;
      ++j;
    }
    if (product != dim.value || varying != (dim.varies() ? 1 : 0)) return false;
    groups.push_back({first, j - first});
  }
  return j == y.shape.size();
}

// For Reshape(Transpose(x, perm)) with the Transpose's output `t` and the Reshape's output `y`:
// when y only splits t's dims (split_groups), the dims of x reshaped by the same splits (`split`,
// y's dims in x's order) and the perm taking that to y (`split_perm`). False otherwise.
bool split_before_transpose(const Value& t, const Value& y, const std::vector<int64_t>& perm, std::vector<Dim>& split,
                            std::vector<int64_t>& split_perm) {
  std::vector<std::pair<size_t, size_t>> groups;
  if (perm.size() != t.shape.size() || !split_groups(t, y, groups)) return false;
  // x's axis a is t's dim i with perm[i] == a: in x's order the groups land at `start`.
  const size_t rank = perm.size();
  std::vector<size_t> of_axis(rank), start(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank)) return false;
    of_axis[static_cast<size_t>(perm[i])] = i;
  }
  split.clear();
  for (size_t a = 0; a < rank; ++a) {
    start[a] = split.size();
    const auto [first, count] = groups[of_axis[a]];
    for (size_t k = 0; k < count; ++k) split.push_back(y.shape[first + k]);
  }
  split_perm.clear();
  for (size_t i = 0; i < rank; ++i)
    for (size_t k = 0; k < groups[i].second; ++k)
      split_perm.push_back(static_cast<int64_t>(start[static_cast<size_t>(perm[i])] + k));
  return true;
}

// The axes of a Squeeze or Unsqueeze (its input from opset 13, its attribute before) over
// `rank` dims (the Unsqueeze's output, the Squeeze's input): sorted, non-negative, unique.
bool unit_axes(const Graph& graph, const Node& node, int64_t rank, std::vector<int64_t>& axes) {
  axes.clear();
  if (node.opset >= 13) {
    if (node.inputs.size() < 2 || node.inputs[1] < 0 || !graph.values[node.inputs[1]].is_constant()) return false;
    for (double a : constant_as_doubles(graph.values[node.inputs[1]])) axes.push_back(static_cast<int64_t>(a));
  } else if (const Attribute* a = node.attribute("axes")) {
    axes = a->ints;
  }
  if (axes.empty()) return false;
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return false;
  }
  std::sort(axes.begin(), axes.end());
  return std::adjacent_find(axes.begin(), axes.end()) == axes.end();
}

// For Squeeze(Transpose(Unsqueeze(x, inserted), perm), squeezed): when the Squeeze takes out
// exactly the dims the Unsqueeze put in, the perm of x that gives the same tensor.
bool unit_dims_round_trip(const std::vector<int64_t>& inserted, const std::vector<int64_t>& perm,
                          const std::vector<int64_t>& squeezed, std::vector<int64_t>& x_perm) {
  std::vector<int64_t> landed;
  for (int64_t s : squeezed) {
    if (s >= static_cast<int64_t>(perm.size())) return false;
    landed.push_back(perm[static_cast<size_t>(s)]);
  }
  std::sort(landed.begin(), landed.end());
  if (landed != inserted) return false;
  x_perm.clear();
  for (size_t j = 0; j < perm.size(); ++j) {
    if (std::binary_search(squeezed.begin(), squeezed.end(), static_cast<int64_t>(j))) continue;
    const int64_t a = perm[j];
    x_perm.push_back(a - (std::lower_bound(inserted.begin(), inserted.end(), a) - inserted.begin()));
  }
  return true;
}

// Whether `perm` without its entry `skipped` keeps the other axes in their order.
bool keeps_order_but(const std::vector<int64_t>& perm, size_t skipped) {
  int64_t previous = -1;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (i == skipped) continue;
    if (perm[i] < previous) return false;
    previous = perm[i];
  }
  return true;
}

bool is_shuffle(const Node& node) {
  return is_op(node, "Transpose") || is_op(node, "Reshape") || is_op(node, "Flatten") || is_op(node, "Squeeze") ||
         is_op(node, "Unsqueeze") || is_op(node, "Gather");
}

// Shuffle `first` (producing value x) and the Reshape `second` (reading x) trade places: `first`
// becomes the Reshape of `source` to `dims` (x's dims now `split`), and `second` becomes `op`
// with `attribute` reading x (and `extra`, unless -1). The nodes keep their order and names.
void swap_with_split(Graph& graph, ValueUses& uses, int32_t first, int32_t second, int32_t source,
                     const std::vector<int64_t>& dims, const std::vector<Dim>& split, const char* op,
                     const Attribute& attribute, int32_t extra) {
  const int32_t x = graph.nodes[first].outputs[0];
  const int32_t shape = add_int64_constant(graph, graph.values[x].name + ":split", {static_cast<int64_t>(dims.size())}, dims);
  uses.forget_node(graph, first);
  uses.forget_node(graph, second);
  Node& reshape = graph.nodes[first];
  Node& moved = graph.nodes[second];
  reshape.op_type = "Reshape";
  reshape.opset = moved.opset;
  reshape.attributes.clear();
  reshape.inputs = {source, shape};
  graph.values[x].shape = split;
  moved.op_type = op;
  moved.opset = 13;
  moved.attributes.clear();
  moved.set_attribute(attribute);
  moved.inputs = {x};
  if (extra >= 0) moved.inputs.push_back(extra);
  uses.learn_node(graph, first);
  uses.learn_node(graph, second);
}

bool is_reshape_like(const Node& node) {
  return is_op(node, "Reshape") || is_op(node, "Flatten") || is_op(node, "Squeeze") || is_op(node, "Unsqueeze");
}

int sweep(PassContext& context) {
  Graph& graph = context.graph;
  context.pinned.resize(graph.values.size(), false);  // the constants a sweep before added
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
    if (is_op(node, "Gather")) {
      int64_t axis = 0, index = 0;
      if (p >= 0 && !dead[p] && is_op(graph.nodes[p], "Transpose") && constant_pick(graph, node, axis, index)) {
        const std::vector<int64_t> perm = transpose_perm(graph, graph.nodes[p]);
        if (perm.size() == graph.values[x].shape.size() && keeps_order_but(perm, static_cast<size_t>(axis))) {
          const int64_t source_axis = perm[static_cast<size_t>(axis)];
          bypass(static_cast<int32_t>(n), p);
          graph.nodes[n].set_attribute(int_attribute("axis", source_axis));
          ++rewrites;
        }
      }
      continue;
    }
    if (is_op(node, "Squeeze") && p >= 0 && !dead[p] && is_op(graph.nodes[p], "Transpose")) {
      const Node& transpose = graph.nodes[p];
      const int32_t u = uses.producer[transpose.inputs[0]];
      std::vector<int64_t> inserted, squeezed, x_perm;
      const std::vector<int64_t> perm = transpose_perm(graph, transpose);
      const int64_t rank = static_cast<int64_t>(perm.size());
      if (u >= 0 && !dead[u] && is_op(graph.nodes[u], "Unsqueeze") && graph.nodes[u].inputs[0] >= 0 &&
          unit_axes(graph, graph.nodes[u], rank, inserted) && unit_axes(graph, node, rank, squeezed) &&
          unit_dims_round_trip(inserted, perm, squeezed, x_perm)) {
        const int32_t source = graph.nodes[u].inputs[0];
        uses.forget_node(graph, static_cast<int32_t>(n));
        node.name = fused_name(fused_name(graph.nodes[u].name, transpose.name), node.name);
        node.op_type = "Transpose";
        node.opset = 13;
        node.attributes.clear();
        node.set_attribute(ints_attribute("perm", x_perm));
        node.inputs = {source};
        uses.learn_node(graph, static_cast<int32_t>(n));
        ++rewrites;
        continue;
      }
    }
    if (!is_reshape_like(node)) continue;
    int64_t gather_axis = 0, gather_index = 0;
    if (is_op(node, "Reshape") && node.opset >= 5 && node.inputs.size() == 2 && p >= 0 && !dead[p] &&
        uses.reader_count(x) == 1 && !context.pinned[x] && constant_pick(graph, graph.nodes[p], gather_axis, gather_index)) {
      // Reshape(Gather(source, a, i), s) -> Gather(Reshape(source, s'), a', i): s' is s with the
      // gathered axis put back where its dims land.
      std::vector<std::pair<size_t, size_t>> groups;
      const int32_t source = graph.nodes[p].inputs[0];
      const Value& from = graph.values[source];
      if (split_groups(graph.values[x], graph.values[y], groups)) {
        std::vector<int64_t> dims;
        int64_t split_axis = 0;
        int varying = 0;
        for (size_t a = 0; a < from.shape.size(); ++a) {
          if (a == static_cast<size_t>(gather_axis)) {
            split_axis = static_cast<int64_t>(dims.size());
            dims.push_back(from.shape[a].value);
            continue;
          }
          const auto [first, count] = groups[a < static_cast<size_t>(gather_axis) ? a : a - 1];
          for (size_t k = 0; k < count; ++k) {
            const Dim& d = graph.values[y].shape[first + k];
            dims.push_back(d.varies() ? -1 : d.value);
            varying += d.varies() ? 1 : 0;
          }
        }
        if (varying <= 1) {
          std::vector<Dim> split;
          for (size_t a = 0, k = 0; a < dims.size(); ++a)
            split.push_back(static_cast<int64_t>(a) == split_axis ? from.shape[static_cast<size_t>(gather_axis)]
                                                                  : graph.values[y].shape[k++]);
          // The Gather node becomes the Reshape of its data, the Reshape node the Gather from it.
          const int32_t index = graph.nodes[p].inputs[1];
          swap_with_split(graph, uses, p, static_cast<int32_t>(n), source, dims, split, "Gather",
                          int_attribute("axis", split_axis), index);
          ++rewrites;
          continue;
        }
      }
    }
    if (is_op(node, "Reshape") && node.opset >= 5 && node.inputs.size() == 2 && p >= 0 && !dead[p] &&
        is_op(graph.nodes[p], "Transpose") && uses.reader_count(x) == 1 && !context.pinned[x]) {
      std::vector<Dim> split;
      std::vector<int64_t> split_perm;
      const std::vector<int64_t> perm = transpose_perm(graph, graph.nodes[p]);
      int varying = 0;
      if (split_before_transpose(graph.values[x], graph.values[y], perm, split, split_perm)) {
        std::vector<int64_t> dims;
        for (const Dim& d : split) {
          dims.push_back(d.varies() ? -1 : d.value);
          varying += d.varies() ? 1 : 0;
        }
        if (varying <= 1) {
          // The Transpose node becomes the Reshape of x, the Reshape node the Transpose of that.
          swap_with_split(graph, uses, p, static_cast<int32_t>(n), graph.nodes[p].inputs[0], dims, split, "Transpose",
                          ints_attribute("perm", split_perm), -1);
          ++rewrites;
          continue;
        }
      }
    }
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
  // Shuffles nothing reads any more, last first: their inputs' other readers become sole ones.
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    if (dead[n] || !is_shuffle(node) || node.outputs.size() != 1 || node.outputs[0] < 0) continue;
    const int32_t y = node.outputs[0];
    if (context.pinned[y] || uses.reader_count(y) != 0) continue;
    uses.forget_node(graph, static_cast<int32_t>(n));
    dead[n] = true;
    ++rewrites;
  }
  if (rewrites) remove_nodes(graph, dead);
  return rewrites;
}

}  // namespace

int eliminate_shuffles(PassContext& context) {
  // Each sweep is linear in the graph; a rewrite enables at most a few more, so a few sweeps
  // reach the fixed point on the shapes exports produce.
  constexpr int kMaxSweeps = 4;
  int rewrites = 0;
  for (int i = 0; i < kMaxSweeps; ++i) {
    const int changed = sweep(context);
    rewrites += changed;
    if (changed == 0) break;
  }
  return rewrites;
}

}  // namespace edgert::builder
