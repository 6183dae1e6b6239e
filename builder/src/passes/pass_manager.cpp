#include "pass_manager.h"

#include <set>

#include "graph_rewrite.h"
#include "kernel_selection.h"

namespace edgert::builder {

namespace {

// Output 0's dtype by the ONNX type constraints when prepare cannot run at build time (a shape
// that depends on input values: Expand to a computed shape, Range): the fusions and the tactic
// lists still need to know a tensor is float32, and one unknown dtype hid it from everything
// after it (a vision transformer's class-token Expand, a shifted-window mask). 0: no rule.
int32_t rule_dtype(const Graph& graph, const Node& node) {
  static const std::set<std::string> same_as_input0 = {
      "Conv", "ConvTranspose", "Gemm", "MatMul", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
      "HardSwish", "Gelu", "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Neg", "Abs", "Max", "Min", "MaxPool",
      "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "LayerNormalization", "Concat",
      "Resize", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Pad", "Softmax", "LogSoftmax",
      "Identity", "Dropout", "Erf", "Sqrt", "Exp", "Expand", "Tile", "Gather", "GatherElements", "GatherND",
      "ScatterND", "ScatterElements", "Range", "CumSum", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
      "FusedConv", "FusedGemm", "FusedMatMul", "PointwiseChain"};
  static const std::set<std::string> boolean = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
                                                "And", "Or", "Xor", "IsNaN", "IsInf"};
  static const std::set<std::string> int64 = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"};
  if (!node.domain.empty() && node.domain != kFusedDomain) return 0;
  auto input_dtype = [&](size_t i) {
    return i < node.inputs.size() && node.inputs[i] >= 0 ? graph.values[node.inputs[i]].dtype : 0;
  };
  const std::string& op = node.op_type;
  if (same_as_input0.count(op)) return input_dtype(0);
  if (op == "Where") return input_dtype(1);
  if (boolean.count(op)) return EDGERT_DTYPE_BOOL;
  if (int64.count(op)) return EDGERT_DTYPE_INT64;
  if (op == "Cast") {
    const Attribute* to = node.attribute("to");
    return to ? static_cast<int32_t>(to->i) : 0;
  }
  if (op == "ConstantOfShape") {
    const Attribute* value = node.attribute("value");
    return value && value->tensor >= 0 ? graph.values[value->tensor].dtype : EDGERT_DTYPE_FLOAT32;
  }
  return 0;
}

}  // namespace

void infer_shapes(Graph& graph, const std::vector<const LoadedPlugin*>& plugins) {
  // Shape arithmetic is a few int64s; anything larger is data, not a shape.
  constexpr size_t kShapeValueBytes = 256;
  std::vector<int32_t> computed;
  for (Node& node : graph.nodes) {
    if (has_graph_attribute(node)) continue;  // control flow: the runtime runs it
    if (builtin_kernel(node)) {  // a copy between memory spaces: what goes in comes out
      if (node.op_type == "Copy" && node.inputs.size() == 1 && node.outputs.size() == 1 && node.inputs[0] >= 0) {
        const Value& from = graph.values[node.inputs[0]];
        Value& to = graph.values[node.outputs[0]];
        to.dtype = from.dtype;
        to.rank_known = from.rank_known;
        to.shape = from.shape;
      }
      continue;
    }
    const LoadedPlugin* plugin = nullptr;
    const edgert_kernel* kernel = find_kernel(graph, node, plugins, &plugin);
    if (kernel) infer_node_outputs(graph, node, *plugin, *kernel);
    if (!node.outputs.empty() && graph.values[node.outputs[0]].dtype == 0)
      graph.values[node.outputs[0]].dtype = rule_dtype(graph, node);
    bool integer_outputs = !node.outputs.empty();
    for (int32_t t : node.outputs) {
      const int32_t dtype = graph.values[t].dtype;
      integer_outputs = integer_outputs && !graph.values[t].is_constant() &&
                        (dtype == EDGERT_DTYPE_INT64 || dtype == EDGERT_DTYPE_INT32);
    }
    if (kernel && integer_outputs && computable_from_constants(graph, node, true) &&
        compute_node_outputs(graph, node, plugins, kShapeValueBytes))
      computed.insert(computed.end(), node.outputs.begin(), node.outputs.end());
  }
  for (int32_t t : computed) graph.values[t].data.reset();
}

std::vector<PassReport> PassManager::run(Model& model) const {
  Graph& graph = model.graphs[0];
  std::vector<PassReport> reports;
  auto infer = [&] { infer_profile_shapes(graph, options_.plugins, options_.profiles, 0, ProfilePoint::kOpt); };
  infer();
  for (const auto& [name, pass] : passes_) {
    PassContext context{model, graph, options_, pinned_values(model, graph)};
    PassReport report;
    report.name = name;
    report.nodes_before = graph.nodes.size();
    report.rewrites = pass(context);
    if (report.rewrites > 0) {
      compact_values(graph, context.pinned);
      infer();
    }
    report.nodes_after = graph.nodes.size();
    if (options_.log)
      options_.log("pass " + name + ": " + std::to_string(report.nodes_before) + " -> " +
                   std::to_string(report.nodes_after) + " nodes (" + std::to_string(report.rewrites) + " rewrites)");
    reports.push_back(report);
  }
  return reports;
}

void NodeEdits::absorb(int32_t node) {
  uses_.forget_node(graph_, node);
  dead_[node] = true;
  graph_.nodes[node].inputs.clear();
  graph_.nodes[node].outputs.clear();
}

void NodeEdits::replace(int32_t node, Node replacement) {
  uses_.forget_node(graph_, node);
  dead_[node] = false;
  graph_.nodes[node] = std::move(replacement);
  uses_.learn_node(graph_, node);
}

int rewrite_nodes(PassContext& context,
                  const std::function<bool(const ValueUses& uses, int32_t node, NodeEdits& edits)>& rewrite) {
  Graph& graph = context.graph;
  int rewrites = 0;
  ValueUses uses(graph);
  NodeEdits edits(graph, uses);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (edits.dead(static_cast<int32_t>(n))) continue;
    if (rewrite(uses, static_cast<int32_t>(n), edits)) ++rewrites;
  }
  if (rewrites) remove_nodes(graph, edits.dead_nodes());
  return rewrites;
}

bool static_dims(const Value& v, std::vector<int64_t>& dims) {
  if (!v.shape_is_static()) return false;
  dims.clear();
  for (const auto& d : v.shape) dims.push_back(d.value);
  return true;
}

bool ints_equal(const Attribute* a, int64_t value) {
  if (!a) return true;
  for (int64_t v : a->ints)
    if (v != value) return false;
  return true;
}

bool pointwise_conv(const Graph& graph, const Node& conv) {
  const bool plain = is_op(conv, "Conv");
  const bool fused = conv.domain == kFusedDomain && conv.op_type == "FusedConv";
  if (!(plain || fused) || conv.inputs.size() < 2 || conv.inputs.size() > 4 || conv.outputs.size() != 1) return false;
  if (fused && conv.attribute("pool_kernel_shape")) return false;
  const Attribute* group = conv.attribute("group");
  if (group && group->i != 1) return false;
  const Attribute* auto_pad = conv.attribute("auto_pad");
  if (auto_pad && auto_pad->s != "NOTSET" && auto_pad->s != "VALID") return false;
  std::vector<int64_t> w;
  if (!static_dims(graph.values[conv.inputs[1]], w) || w.size() != 4 || w[2] != 1 || w[3] != 1) return false;
  return ints_equal(conv.attribute("strides"), 1) && ints_equal(conv.attribute("pads"), 0);
}

bool replace_pair(NodeEdits& edits, int32_t absorbed, int32_t into, Node fused) {
  edits.absorb(absorbed);
  edits.replace(into, std::move(fused));
  return true;
}

Node fused_conv_of(const Node& conv) {
  Node fused = conv;
  fused.domain = kFusedDomain;
  fused.op_type = "FusedConv";
  Attribute activation;
  activation.name = "activation";
  activation.type = EDGERT_ATTR_STRING;
  fused.set_attribute(activation);
  Attribute params;
  params.name = "activation_params";
  params.type = EDGERT_ATTR_FLOATS;
  fused.set_attribute(params);
  return fused;
}

PassManager PassManager::standard(PassOptions options) {
  PassManager manager(std::move(options));
  if (manager.options_.explicit_quantization) manager.add("qdq-folding", fold_qdq_pairs);
  manager.add("constant-folding", fold_constants);
  manager.add("identity-elimination", eliminate_identities);
  manager.add("shuffle-elimination", eliminate_shuffles);
  manager.add("common-subexpression", eliminate_common_subexpressions);
  manager.add("dead-code", eliminate_dead_code);
  manager.add("batchnorm-folding", fold_batchnorm);
  manager.add("pattern-recognition", recognize_patterns);
  if (manager.options_.precision) manager.add("precision", manager.options_.precision);
  if (manager.options_.stop_after_precision) return manager;
  // Both plugins run edgert.FusedAttention. On the GPU it is fused for float16 only: its
  // flash-style kernel (tensor cores) beats the separate products and softmax there, while in
  // float32 cuBLASLt's products (no TF32) and the softmax kernel are faster than its CUDA-core
  // products (vit_b_16 on an H200: 3.30 ms fused against 2.75 ms unfused; tests/bench/RESULTS.md).
  if (!manager.options_.target_device || manager.options_.device_fp16) manager.add("attention-fusion", fuse_attention);
  manager.add("activation-fusion", fuse_activations);
  if (!manager.options_.target_device) {
    manager.add("pool-fusion", fuse_max_pools);
    manager.add("channel-scale-fusion", fuse_channel_scales);
    manager.add("expand-depthwise-fusion", fuse_expand_depthwise);
  }
  manager.add("pointwise-fusion", fuse_pointwise_chains);
  manager.add("dead-code", eliminate_dead_code);
  return manager;
}

}  // namespace edgert::builder
