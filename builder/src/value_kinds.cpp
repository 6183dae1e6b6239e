#include "value_kinds.h"

#include <set>
#include <string>

namespace edgert::builder {
namespace {

ValueKind optional_of(ValueKind kind) {
  if (kind == ValueKind::Sequence) return ValueKind::OptionalSequence;
  if (kind == ValueKind::Tensor) return ValueKind::OptionalTensor;
  return kind;
}

ValueKind content_of(ValueKind kind) {
  if (kind == ValueKind::OptionalSequence) return ValueKind::Sequence;
  if (kind == ValueKind::OptionalTensor) return ValueKind::Tensor;
  return kind;
}

int32_t graph_attribute(const Node& node, const char* name) {
  const Attribute* a = node.attribute(name);
  return a && a->type == EDGERT_ATTR_GRAPH ? a->graph : -1;
}

void set(Value& v, ValueKind kind, int32_t dtype) {
  v.kind = kind;
  if (dtype != 0) v.dtype = dtype;
  if (kind != ValueKind::Tensor) {
    // A sequence's tensors have shapes of their own; an optional's may be absent.
    v.rank_known = false;
    v.shape.clear();
  }
}

void set_scalar(Value& v, int32_t dtype) {
  v.kind = ValueKind::Tensor;
  v.dtype = dtype;
  v.rank_known = true;
  v.shape.clear();
}

void infer_graph(Model& model, int32_t g);

// Subgraph output i's kind and dtype, inferred first.
const Value& subgraph_output(Model& model, int32_t sub, size_t i) {
  infer_graph(model, sub);
  const Graph& graph = model.graphs[sub];
  return graph.values[graph.outputs[i]];
}

void infer_node(Model& model, int32_t g, Node& node) {
  auto in = [&](size_t i) -> const Value* {
    return i < node.inputs.size() && node.inputs[i] >= 0 ? &model.graphs[g].values[node.inputs[i]] : nullptr;
  };
  auto out = [&](size_t i) -> Value& { return model.graphs[g].values[node.outputs[i]]; };
  const std::string& op = node.op_type;
  if (!node.domain.empty() || node.outputs.empty()) return;
  if (op == "SequenceEmpty") {
    const Attribute* dtype = node.attribute("dtype");
    set(out(0), ValueKind::Sequence, dtype ? static_cast<int32_t>(dtype->i) : EDGERT_DTYPE_FLOAT32);
  } else if (op == "SequenceConstruct" || op == "SequenceInsert" || op == "SequenceErase" || op == "SplitToSequence") {
    set(out(0), ValueKind::Sequence, in(0) ? in(0)->dtype : 0);
  } else if (op == "SequenceAt" || op == "ConcatFromSequence") {
    set(out(0), ValueKind::Tensor, in(0) ? in(0)->dtype : 0);
  } else if (op == "SequenceLength") {
    set_scalar(out(0), EDGERT_DTYPE_INT64);
  } else if (op == "OptionalHasElement") {
    set_scalar(out(0), EDGERT_DTYPE_BOOL);
  } else if (op == "Optional") {
    if (in(0)) {
      set(out(0), optional_of(in(0)->kind), in(0)->dtype);
    } else if (const Attribute* type = node.attribute("type"); type && type->ints.size() == 2) {
      set(out(0), optional_of(static_cast<ValueKind>(type->ints[0])), static_cast<int32_t>(type->ints[1]));
    }
  } else if (op == "OptionalGetElement" || (op == "Identity" && in(0) && in(0)->kind != ValueKind::Tensor)) {
    if (in(0)) set(out(0), op == "Identity" ? in(0)->kind : content_of(in(0)->kind), in(0)->dtype);
  } else if (op == "SequenceMap") {
    const int32_t body = graph_attribute(node, "body");
    for (size_t i = 0; body >= 0 && i < node.outputs.size() && i < model.graphs[body].outputs.size(); ++i)
      set(out(i), ValueKind::Sequence, subgraph_output(model, body, i).dtype);
  } else if (op == "If") {
    const int32_t then_branch = graph_attribute(node, "then_branch");
    for (size_t i = 0; then_branch >= 0 && i < node.outputs.size() && i < model.graphs[then_branch].outputs.size(); ++i) {
      const Value& branch = subgraph_output(model, then_branch, i);
      if (branch.kind != ValueKind::Tensor) set(out(i), branch.kind, branch.dtype);
    }
  } else if (op == "Loop") {
    // Loop-carried values keep their kind: the body's inputs 2.. and outputs 1.. are the node's.
    const int32_t body = graph_attribute(node, "body");
    if (body < 0) return;
    Graph& graph = model.graphs[body];
    for (size_t j = 0; j + 2 < node.inputs.size() && j + 2 < graph.inputs.size(); ++j) {
      Value& body_in = graph.values[graph.inputs[j + 2]];
      if (in(j + 2) && in(j + 2)->kind != ValueKind::Tensor && body_in.kind == ValueKind::Tensor)
        set(body_in, in(j + 2)->kind, in(j + 2)->dtype);
    }
    for (size_t j = 0; j < node.outputs.size() && j + 1 < graph.outputs.size(); ++j) {
      const Value& body_out = subgraph_output(model, body, j + 1);
      if (body_out.kind != ValueKind::Tensor) set(out(j), body_out.kind, body_out.dtype);
    }
  }
}

void infer_graph(Model& model, int32_t g) {
  for (size_t n = 0; n < model.graphs[g].nodes.size(); ++n) {
    infer_node(model, g, model.graphs[g].nodes[n]);
    Node& node = model.graphs[g].nodes[n];
    node.reads_non_tensors = false;
    for (const std::vector<int32_t>* list : {&node.inputs, &node.outputs})
      for (int32_t v : *list)
        node.reads_non_tensors = node.reads_non_tensors || (v >= 0 && model.graphs[g].values[v].kind != ValueKind::Tensor);
  }
}

}  // namespace

bool is_sequence_op(const Node& node) {
  static const std::set<std::string> ops = {
      "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength",
      "SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement"};
  return node.domain.empty() && ops.count(node.op_type) > 0;
}

void infer_value_kinds(Model& model) { infer_graph(model, 0); }

}  // namespace edgert::builder
