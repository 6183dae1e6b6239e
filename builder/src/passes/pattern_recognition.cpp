// Recognises op patterns exporters spell out and replaces them with the one op they compute,
// which the plugin implements in one pass (and more exactly, in double):
//   GELU:      x * 0.5 * (1 + Erf(x / sqrt(2)))   (either Mul order)      -> Gelu (opset 20)
//   LayerNorm: d = x - ReduceMean(x); d / Sqrt(ReduceMean(d^2) + eps) [* gamma] [+ beta] over the
//              last axes                                                  -> LayerNormalization
//   Softmax followed by Log                                               -> LogSoftmax
// Every intermediate must be read only inside the pattern and not be an engine output.
#include <algorithm>
#include <cmath>
#include <functional>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

struct Matcher {
  Graph& graph;
  const ValueUses& uses;
  const std::vector<bool>& pinned;

  // The node reading `v` if it is the only one, of op `op`, and `v` is not pinned.
  int32_t only_reader(int32_t v, const char* op) const {
    if (v < 0 || pinned[v] || uses.reader_count(v) != 1) return -1;
    int32_t n = uses.readers[v][0].first;
    return is_op(graph.nodes[n], op) ? n : -1;
  }
  // For a binary node reading `v`: its other input.
  int32_t other_input(int32_t n, int32_t v) const {
    const Node& node = graph.nodes[n];
    if (node.inputs.size() != 2) return -1;
    if (node.inputs[0] == v) return node.inputs[1];
    if (node.inputs[1] == v) return node.inputs[0];
    return -1;
  }
  bool scalar_near(int32_t v, double x, double tolerance) const {
    if (v < 0) return false;
    std::vector<double> d = constant_as_doubles(graph.values[v]);
    return d.size() == 1 && std::fabs(d[0] - x) <= tolerance;
  }
  int32_t producer(int32_t v) const { return v >= 0 ? uses.producer[v] : -1; }
};

// Erf node `e` -> the nodes of a GELU pattern (last one first) and x, or empty.
std::vector<int32_t> match_gelu(const Matcher& m, int32_t e, int32_t& x) {
  const Node& erf = m.graph.nodes[e];
  int32_t scaled = erf.inputs[0];
  int32_t d = m.producer(scaled);
  if (d < 0 || m.pinned[scaled] || m.uses.reader_count(scaled) != 1) return {};
  const Node& div = m.graph.nodes[d];
  if (is_op(div, "Div") && m.scalar_near(div.inputs[1], std::sqrt(2.0), 1e-4)) x = div.inputs[0];
  else if (is_op(div, "Mul") && m.scalar_near(m.other_input(d, div.inputs[0]), std::sqrt(0.5), 1e-4)) x = div.inputs[0];
  else if (is_op(div, "Mul") && m.scalar_near(div.inputs[0], std::sqrt(0.5), 1e-4)) x = div.inputs[1];
  else return {};
  int32_t add = m.only_reader(erf.outputs[0], "Add");
  if (add < 0 || !m.scalar_near(m.other_input(add, erf.outputs[0]), 1.0, 0)) return {};
  int32_t mul = m.only_reader(m.graph.nodes[add].outputs[0], "Mul");
  if (mul < 0) return {};
  int32_t other = m.other_input(mul, m.graph.nodes[add].outputs[0]);
  if (other == x) {  // (x * (1 + erf)) * 0.5
    int32_t half = m.only_reader(m.graph.nodes[mul].outputs[0], "Mul");
    if (half < 0 || !m.scalar_near(m.other_input(half, m.graph.nodes[mul].outputs[0]), 0.5, 0)) return {};
    return {half, mul, add, e, d};
  }
  int32_t h = m.producer(other);  // (x * 0.5) * (1 + erf)
  if (h < 0 || m.pinned[other] || m.uses.reader_count(other) != 1 || !is_op(m.graph.nodes[h], "Mul") ||
      m.other_input(h, x) < 0 || !m.scalar_near(m.other_input(h, x), 0.5, 0))
    return {};
  return {mul, add, e, d, h};
}

std::vector<int64_t> reduce_axes(const Graph& graph, const Node& node) {
  const Attribute* keep = node.attribute("keepdims");
  if (keep && keep->i == 0) return {};
  if (const Attribute* a = node.attribute("axes")) return a->ints;
  if (node.inputs.size() > 1 && node.inputs[1] >= 0) {
    std::vector<double> d = constant_as_doubles(graph.values[node.inputs[1]]);
    return std::vector<int64_t>(d.begin(), d.end());
  }
  return {};
}

// The first normalised axis (negative) when `axes` are the trailing axes of a rank-`rank` tensor.
int64_t trailing_axis(std::vector<int64_t> axes, int64_t rank) {
  if (axes.empty() || rank <= 0) return 0;
  for (int64_t& a : axes) a = a < 0 ? a : a - rank;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != -static_cast<int64_t>(axes.size() - i)) return 0;
  return axes[0];
}

}  // namespace

int recognize_patterns(PassContext& context) {
  Graph& graph = context.graph;
  int rewrites = 0;
  // One set of uses for the pass, kept current through the edits (a rebuild per node made the
  // pass quadratic in the graph's size).
  ValueUses uses(graph);
  NodeEdits edits(graph, uses);
  auto replace = [&](const std::vector<int32_t>& nodes, Node replacement) {
    // nodes[0] is the last of the pattern; its slot receives the replacement.
    for (int32_t n : nodes) {
      if (edits.dead(n)) return false;
    }
    for (size_t i = 1; i < nodes.size(); ++i) edits.absorb(nodes[i]);
    edits.replace(nodes[0], std::move(replacement));
    ++rewrites;
    return true;
  };
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (edits.dead(static_cast<int32_t>(n)) || graph.nodes[n].outputs.empty()) continue;
    Matcher m{graph, uses, context.pinned};
    const Node& node = graph.nodes[n];
    if (is_op(node, "Erf") && node.inputs.size() == 1) {
      int32_t x = -1;
      std::vector<int32_t> nodes = match_gelu(m, static_cast<int32_t>(n), x);
      if (nodes.empty() || graph.values[x].dtype != EDGERT_DTYPE_FLOAT32) continue;
      std::sort(nodes.begin(), nodes.end(), std::greater<int32_t>());
      Node gelu;
      gelu.name = graph.nodes[nodes.back()].name + " (gelu)";
      gelu.op_type = "Gelu";
      gelu.opset = 20;
      gelu.inputs = {x};
      gelu.outputs = {graph.nodes[nodes[0]].outputs[0]};
      replace(nodes, gelu);
    } else if (is_op(node, "Softmax") && node.outputs.size() == 1) {
      int32_t log = m.only_reader(node.outputs[0], "Log");
      if (log < 0) continue;
      Node ls = node;
      ls.op_type = "LogSoftmax";
      ls.name = fused_name(node.name, graph.nodes[log].name);
      ls.outputs = graph.nodes[log].outputs;
      replace({log, static_cast<int32_t>(n)}, ls);
    } else if (is_op(node, "ReduceMean")) {
      // mean -> Sub(x, mean) -> d; d -> Pow(d, 2) -> ReduceMean -> Add eps -> Sqrt; Div(d, sqrt)
      const int32_t x = node.inputs[0];
      const Value& xv = graph.values[x];
      if (xv.dtype != EDGERT_DTYPE_FLOAT32 || !xv.rank_known) continue;
      int64_t axis = trailing_axis(reduce_axes(graph, node), static_cast<int64_t>(xv.shape.size()));
      if (axis == 0) continue;
      int32_t sub = m.only_reader(node.outputs[0], "Sub");
      if (sub < 0 || graph.nodes[sub].inputs[0] != x) continue;
      int32_t d = graph.nodes[sub].outputs[0];
      if (m.pinned[d] || uses.reader_count(d) != 2) continue;
      int32_t pow = -1, div = -1;
      for (const auto& [r, slot] : uses.readers[d]) {
        if (is_op(graph.nodes[r], "Pow") && slot == 0) pow = r;
        if (is_op(graph.nodes[r], "Div") && slot == 0) div = r;
      }
      if (pow < 0 || div < 0 || !m.scalar_near(graph.nodes[pow].inputs[1], 2.0, 0)) continue;
      int32_t mean2 = m.only_reader(graph.nodes[pow].outputs[0], "ReduceMean");
      if (mean2 < 0 || trailing_axis(reduce_axes(graph, graph.nodes[mean2]), xv.shape.size()) != axis) continue;
      int32_t add = m.only_reader(graph.nodes[mean2].outputs[0], "Add");
      if (add < 0) continue;
      int32_t eps_v = m.other_input(add, graph.nodes[mean2].outputs[0]);
      std::vector<double> eps = eps_v >= 0 ? constant_as_doubles(graph.values[eps_v]) : std::vector<double>{};
      if (eps.size() != 1) continue;
      int32_t sqrt = m.only_reader(graph.nodes[add].outputs[0], "Sqrt");
      if (sqrt < 0 || m.only_reader(graph.nodes[sqrt].outputs[0], "Div") != div) continue;
      std::vector<int32_t> nodes = {div, sqrt, add, mean2, pow, sub, static_cast<int32_t>(n)};
      int32_t out = graph.nodes[div].outputs[0];
      // Scale and bias: constants of the normalised shape.
      std::vector<int64_t> norm_shape;
      for (size_t i = xv.shape.size() + axis; i < xv.shape.size(); ++i) norm_shape.push_back(xv.shape[i].value);
      auto normalised_constant = [&](int32_t v) {
        const Value& c = graph.values[v];
        if (!c.is_constant() || c.dtype != EDGERT_DTYPE_FLOAT32 || c.shape.size() != norm_shape.size()) return false;
        for (size_t i = 0; i < norm_shape.size(); ++i)
          if (c.shape[i].value != norm_shape[i]) return false;
        return true;
      };
      int32_t scale = -1, bias = -1;
      if (int32_t mul = m.only_reader(out, "Mul"); mul >= 0 && normalised_constant(m.other_input(mul, out))) {
        scale = m.other_input(mul, out);
        nodes.insert(nodes.begin(), mul);
        out = graph.nodes[mul].outputs[0];
        if (int32_t b = m.only_reader(out, "Add"); b >= 0 && normalised_constant(m.other_input(b, out))) {
          bias = m.other_input(b, out);
          nodes.insert(nodes.begin(), b);
          out = graph.nodes[b].outputs[0];
        }
      }
      bool static_norm = true;
      for (int64_t s : norm_shape) static_norm = static_norm && s > 0;
      if (scale < 0) {
        if (!static_norm) continue;
        int64_t count = 1;
        for (int64_t s : norm_shape) count *= s;
        scale = add_float_constant(graph, graph.nodes[n].name + "_layernorm_scale", norm_shape,
                                   std::vector<float>(static_cast<size_t>(count), 1.0f));
      }
      Node ln;
      ln.name = graph.nodes[n].name + " (layernorm)";
      ln.op_type = "LayerNormalization";
      ln.opset = 17;
      ln.inputs = {x, scale};
      if (bias >= 0) ln.inputs.push_back(bias);
      ln.outputs = {out};
      Attribute a;
      a.name = "axis";
      a.type = EDGERT_ATTR_INT;
      a.i = axis;
      ln.attributes.push_back(a);
      Attribute e;
      e.name = "epsilon";
      e.type = EDGERT_ATTR_FLOAT;
      e.f = static_cast<float>(eps[0]);
      ln.attributes.push_back(e);
      std::sort(nodes.begin(), nodes.end(), std::greater<int32_t>());
      replace(nodes, ln);
    }
  }
  if (rewrites) remove_nodes(graph, edits.dead_nodes());
  return rewrites;
}

}  // namespace edgert::builder
