// Chains of element-wise ops on one float32 tensor (activations, and +, -, *, / by a constant
// scalar) become one edgert.PointwiseChain node: one read and one write of the tensor instead
// of one per op. The chain is a small program in attributes:
//   ops:    STRINGS, one per step: an activation name (as FusedConv's `activation`) or Add,
//           Sub, Mul, Div (x op c) and RSub, RDiv (c op x)
//   params: FLOATS, two per step: the activation's parameters or the scalar c
// Each step rounds to float32 as the separate op did, so results are identical.
#include <limits>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

struct Step {
  std::string op;
  float params[2] = {0, 0};
};

// The step node `n` applies to its chain input `x`, if it is one we chain.
bool match_step(const Graph& graph, const Node& node, int32_t x, Step& step) {
  if (!node.domain.empty() || node.outputs.size() != 1 || node.inputs.empty()) return false;
  const Value& out = graph.values[node.outputs[0]];
  if (out.dtype != EDGERT_DTYPE_FLOAT32) return false;
  auto attr_f = [&](const char* name, float fallback) {
    const Attribute* a = node.attribute(name);
    return a ? a->f : fallback;
  };
  const std::string& op = node.op_type;
  if (node.inputs[0] == x && node.inputs.size() == 1) {
    if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish") {
      step.op = op;
      return true;
    }
    if (op == "LeakyRelu") {
      step = {op, {attr_f("alpha", 0.01f), 0}};
      return true;
    }
    if (op == "HardSigmoid") {
      step = {op, {attr_f("alpha", 0.2f), attr_f("beta", 0.5f)}};
      return true;
    }
    if (op == "Gelu") {
      const Attribute* a = node.attribute("approximate");
      if (a && a->s != "none" && a->s != "tanh") return false;
      step = {op, {a && a->s == "tanh" ? 1.0f : 0.0f, 0}};
      return true;
    }
  }
  if (op == "Clip" && node.inputs[0] == x) {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (node.opset < 11) {
      if (node.inputs.size() != 1) return false;
      lo = attr_f("min", lo);
      hi = attr_f("max", hi);
    } else {
      for (size_t i = 1; i < node.inputs.size(); ++i) {
        if (i > 2) return false;
        if (node.inputs[i] < 0) continue;
        std::vector<double> b = constant_as_doubles(graph.values[node.inputs[i]]);
        if (b.size() != 1 || graph.values[node.inputs[i]].dtype != EDGERT_DTYPE_FLOAT32) return false;
        (i == 1 ? lo : hi) = static_cast<float>(b[0]);
      }
    }
    step = {op, {lo, hi}};
    return true;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && node.inputs.size() == 2) {
    const bool x_first = node.inputs[0] == x;
    int32_t c = x_first ? node.inputs[1] : node.inputs[0];
    if (!x_first && node.inputs[1] != x) return false;
    const Value& cv = graph.values[c];
    std::vector<double> values = constant_as_doubles(cv);
    if (values.size() != 1 || cv.dtype != EDGERT_DTYPE_FLOAT32) return false;
    // The scalar must not raise x's rank.
    const Value& xv = graph.values[x];
    if (!cv.rank_known || !xv.rank_known || cv.shape.size() > xv.shape.size()) return false;
    step.op = x_first || op == "Add" || op == "Mul" ? op : "R" + op;
    step.params[0] = static_cast<float>(values[0]);
    return true;
  }
  return false;
}

}  // namespace

int fuse_pointwise_chains(PassContext& context) {
  Graph& graph = context.graph;
  ValueUses uses(graph);
  std::vector<bool> dead(graph.nodes.size(), false);
  std::vector<bool> in_chain(graph.nodes.size(), false);
  int fused = 0;
  for (size_t start = 0; start < graph.nodes.size(); ++start) {
    if (in_chain[start] || graph.nodes[start].inputs.empty()) continue;
    int32_t x = graph.nodes[start].inputs[0];
    if (x < 0 || graph.values[x].dtype != EDGERT_DTYPE_FLOAT32) continue;
    std::vector<int32_t> nodes;
    std::vector<Step> steps;
    int32_t current = x;
    int32_t n = static_cast<int32_t>(start);
    while (true) {
      Step step;
      if (in_chain[n] || !match_step(graph, graph.nodes[n], current, step)) break;
      nodes.push_back(n);
      steps.push_back(step);
      current = graph.nodes[n].outputs[0];
      if (context.pinned[current]) break;  // an engine output ends the chain
      n = uses.sole_reader(current);
      if (n < 0 || uses.reader_count(current) != 1) break;
    }
    if (nodes.size() < 2) continue;
    Node chain;
    chain.domain = kFusedDomain;
    chain.op_type = "PointwiseChain";
    chain.opset = 1;
    chain.inputs = {x};
    chain.outputs = {current};
    chain.name = graph.nodes[nodes[0]].name;
    Attribute ops;
    ops.name = "ops";
    ops.type = EDGERT_ATTR_STRINGS;
    Attribute params;
    params.name = "params";
    params.type = EDGERT_ATTR_FLOATS;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i) chain.name = fused_name(chain.name, graph.nodes[nodes[i]].name);
      ops.strings.push_back(steps[i].op);
      params.floats.push_back(steps[i].params[0]);
      params.floats.push_back(steps[i].params[1]);
      in_chain[nodes[i]] = true;
      dead[nodes[i]] = true;
    }
    chain.attributes = {ops, params};
    dead[nodes.back()] = false;
    graph.nodes[nodes.back()] = std::move(chain);
    ++fused;
  }
  if (fused) remove_nodes(graph, dead);
  return fused;
}

}  // namespace edgert::builder
