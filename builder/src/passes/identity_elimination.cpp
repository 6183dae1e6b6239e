// Erases ops that return their input unchanged: Identity, inference Dropout (its mask unread),
// x * 1, x / 1, x + 0, x - 0 where the constant neither changes x's dtype nor broadcasts x to a
// larger shape. Readers of the output read the input instead.
#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

// True when `constant` holds only `x` and broadcasting it against `input` yields input's shape.
bool neutral_operand(const Value& input, const Value& constant, double x) {
  if (!constant.is_constant() || !input.shape_is_fixed() || input.dtype == 0 || constant.dtype != input.dtype)
    return false;
  if (!constant.rank_known || constant.shape.size() > input.shape.size()) return false;
  for (size_t d = 0; d < constant.shape.size(); ++d) {
    int64_t c = constant.shape[constant.shape.size() - 1 - d].value;
    int64_t i = input.shape[input.shape.size() - 1 - d].value;
    if (c != 1 && c != i) return false;
  }
  std::vector<double> values = constant_as_doubles(constant);
  if (values.empty()) return false;
  for (double v : values)
    if (v != x) return false;
  return true;
}

// The input a pass-through node forwards, or -1 when the node is not one.
int32_t forwarded_input(const Graph& graph, const Node& node, const ValueUses& uses) {
  if (!node.domain.empty() || node.outputs.empty()) return -1;
  if (node.op_type == "Identity" && node.inputs.size() == 1) return node.inputs[0];
  if (node.op_type == "Dropout" && !node.inputs.empty()) {
    // Training mode would need a random mask; only inference Dropout (no training_mode
    // input, or a constant false one) is the identity.
    if (node.inputs.size() >= 3 && node.inputs[2] >= 0) {
      const Value& training = graph.values[node.inputs[2]];
      if (!training.is_constant() || training.data->empty() || (*training.data)[0] != 0) return -1;
    }
    if (node.opset < 7) {
      const Attribute* is_test = node.attribute("is_test");
      if (!is_test || is_test->i == 0) return -1;
    }
    if (node.outputs.size() > 1 && uses.reader_count(node.outputs[1]) > 0) return -1;
    return node.inputs[0];
  }
  if (node.inputs.size() != 2) return -1;
  const Value& a = graph.values[node.inputs[0]];
  const Value& b = graph.values[node.inputs[1]];
  if (node.op_type == "Mul") {
    if (neutral_operand(a, b, 1)) return node.inputs[0];
    if (neutral_operand(b, a, 1)) return node.inputs[1];
  } else if (node.op_type == "Add") {
    if (neutral_operand(a, b, 0)) return node.inputs[0];
    if (neutral_operand(b, a, 0)) return node.inputs[1];
  } else if (node.op_type == "Div") {
    if (neutral_operand(a, b, 1)) return node.inputs[0];
  } else if (node.op_type == "Sub") {
    if (neutral_operand(a, b, 0)) return node.inputs[0];
  }
  return -1;
}

}  // namespace

int eliminate_identities(PassContext& context) {
  Graph& graph = context.graph;
  ValueUses uses(graph);
  std::vector<bool> dead(graph.nodes.size(), false);
  int removed = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    int32_t input = forwarded_input(graph, node, uses);
    if (input < 0) continue;
    int32_t output = node.outputs[0];
    if (node.outputs.size() > 1 && context.pinned[node.outputs[1]]) continue;
    if (!redirect_value(graph, output, input, context.pinned, uses)) continue;
    dead[n] = true;
    ++removed;
  }
  if (removed) remove_nodes(graph, dead);
  return removed;
}

}  // namespace edgert::builder
