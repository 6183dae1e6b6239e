// Erases ops that return their input unchanged: Identity, inference Dropout (its mask unread),
// x * 1, x / 1, x + 0, x - 0 where the constant neither changes x's dtype nor broadcasts x to a
// larger shape, Pad by nothing on every side, and Slice of every element along the dims it
// slices. Readers of the output read the input instead. Exports emit the last two where a size
// needed no padding or cropping at the shape the model was traced at (Swin pads its feature
// maps to whole windows and crops them back: at 224x224 every such Pad and Slice is one).
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

// A constant input's values (empty when the input is absent or not constant).
std::vector<double> constant_input(const Graph& graph, const Node& node, size_t i) {
  if (i >= node.inputs.size() || node.inputs[i] < 0) return {};
  const Value& v = graph.values[node.inputs[i]];
  return v.is_constant() ? constant_as_doubles(v) : std::vector<double>{};
}

// Pad whose pads are all zero (an attribute before opset 11, a constant input from it on).
bool pads_nothing(const Graph& graph, const Node& node) {
  std::vector<double> pads;
  if (node.opset < 11) {
    const Attribute* a = node.attribute("pads");
    if (!a) return false;
    pads.assign(a->ints.begin(), a->ints.end());
  } else {
    pads = constant_input(graph, node, 1);
  }
  if (pads.empty()) return false;
  for (double p : pads)
    if (p != 0) return false;
  return true;
}

// Slice (opset 10 on: starts, ends, axes and steps as inputs) that keeps every element of each
// dim it slices: step 1, start 0, end at or past the dim, whose size is the same at every shape
// the engine accepts (or an end past any size, as exports write "to the end").
bool slices_everything(const Graph& graph, const Node& node) {
  if (node.opset < 10 || node.inputs.size() < 3) return false;
  const Value& x = graph.values[node.inputs[0]];
  if (!x.rank_known) return false;
  const std::vector<double> starts = constant_input(graph, node, 1), ends = constant_input(graph, node, 2);
  if (starts.empty() || starts.size() != ends.size()) return false;
  const bool has_axes = node.inputs.size() > 3 && node.inputs[3] >= 0;
  const bool has_steps = node.inputs.size() > 4 && node.inputs[4] >= 0;
  const std::vector<double> axes = constant_input(graph, node, 3), steps = constant_input(graph, node, 4);
  if ((has_axes && axes.size() != starts.size()) || (has_steps && steps.size() != starts.size())) return false;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = has_axes ? static_cast<int64_t>(axes[i]) : static_cast<int64_t>(i);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || (has_steps && steps[i] != 1) || starts[i] != 0) return false;
    const Dim& dim = x.shape[static_cast<size_t>(axis)];
    const bool to_the_end = ends[i] >= static_cast<double>(INT32_MAX);
    if (!to_the_end && (dim.value < 0 || dim.varies() || ends[i] < static_cast<double>(dim.value))) return false;
  }
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
  if (node.op_type == "Pad" && !node.inputs.empty() && pads_nothing(graph, node)) return node.inputs[0];
  if (node.op_type == "Slice" && slices_everything(graph, node)) return node.inputs[0];
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
