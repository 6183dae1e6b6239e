// Constant folding: a node whose inputs are all constants is run once at build time with the
// plugin's own kernel (the same prepare/execute the runtime would call), so the folded values
// are exactly what the engine would have computed. Shape and Size only need their input's
// shape, so once shapes are static, Shape -> Gather -> Concat -> Reshape chains fold away.
#include <cstring>
#include <memory>
#include <set>

#include "build_error.h"
#include "error.h"
#include "graph_rewrite.h"
#include "kernel_selection.h"
#include "node_view.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

// Ops whose result is not a function of their inputs.
bool is_nondeterministic(const Node& node) {
  static const std::set<std::string> ops = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "Multinomial", "Bernoulli"};
  return ops.count(node.op_type) > 0;
}

}  // namespace

bool computable_from_constants(const Graph& graph, const Node& node, bool shapes_at_specialization) {
  if (node.inputs.empty() || !node.domain.empty() || has_graph_attribute(node) || is_nondeterministic(node)) return false;
  bool shape_only = node.op_type == "Shape" || node.op_type == "Size";
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int32_t t = node.inputs[i];
    if (t < 0) continue;
    const Value& v = graph.values[t];
    if (v.is_constant()) continue;
    if (shape_only && i == 0 && v.dtype != 0 &&
        (shapes_at_specialization ? v.shape_is_static() : v.shape_is_fixed()))
      continue;
    return false;
  }
  return true;
}

bool compute_node_outputs(Graph& graph, Node& node, const std::vector<const LoadedPlugin*>& plugins, size_t max_bytes) {
  // The values are computed here, in host memory: host kernels only.
  std::vector<const LoadedPlugin*> host;
  for (const LoadedPlugin* p : plugins)
    if (!p->table->device) host.push_back(p);
  const LoadedPlugin* plugin = nullptr;
  const edgert_kernel* kernel = find_kernel(graph, node, host, &plugin);
  if (!kernel) return false;
  NodeView view(graph, node);
  if (!view.inputs_static()) return false;
  std::vector<edgert_tensor> outputs(node.outputs.size());
  void* state = nullptr;
  edgert_prepare_info info{};
  edgert_error error{};
  edgert_status status = kernel->prepare(kernel, view.node(), 0, view.inputs(), outputs.data(), &state, &info, &error);
  struct Release {
    const edgert_kernel* k;
    void* s;
    ~Release() {
      if (s) k->release(k, s);
    }
  } release{kernel, state};
  if (status != EDGERT_OK) return false;  // kernel selection reports real errors with context
  std::vector<std::shared_ptr<std::vector<uint8_t>>> data(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    uint64_t bytes = dtype_size(outputs[o].dtype);
    if (bytes == 0 || outputs[o].rank < 0 || outputs[o].rank > EDGERT_MAX_RANK) return false;
    for (int32_t d = 0; d < outputs[o].rank; ++d)
      if (outputs[o].dims[d] < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(outputs[o].dims[d]), &bytes))
        return false;
    if (bytes > max_bytes) return false;
    // At least one element of room so a zero-size output still gets a valid pointer.
    data[o] = std::make_shared<std::vector<uint8_t>>(std::max<uint64_t>(bytes, 1));
    outputs[o].data = data[o]->data();
  }
  std::vector<uint64_t> workspace((info.workspace_bytes + 7) / 8 + 1);
  status = kernel->execute(kernel, release.s, view.node(), view.inputs(), outputs.data(), workspace.data(), nullptr, &error);
  if (status != EDGERT_OK) return false;
  for (size_t o = 0; o < outputs.size(); ++o) {
    Value& v = graph.values[node.outputs[o]];
    uint64_t bytes = dtype_size(outputs[o].dtype);
    v.dtype = outputs[o].dtype;
    v.rank_known = true;
    v.shape.assign(outputs[o].rank, Dim{});
    for (int32_t d = 0; d < outputs[o].rank; ++d) {
      v.shape[d].value = outputs[o].dims[d];
      bytes *= static_cast<uint64_t>(outputs[o].dims[d]);
    }
    data[o]->resize(bytes);
    v.data = data[o];
  }
  return true;
}

int fold_constants(PassContext& context) {
  Graph& graph = context.graph;
  std::vector<bool> dead(graph.nodes.size(), false);
  int folded = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& node = graph.nodes[n];
    bool inputs_pinned = false;
    for (int32_t t : node.outputs) inputs_pinned = inputs_pinned || context.graph.values[t].is_constant();
    // Fold in order so a chain folds in one sweep. A node that does not fold has its outputs
    // re-inferred at once: a Reshape whose shape input was just folded gets a static output,
    // so the Shape -> ... -> Reshape chain after it can fold too (ShuffleNet's channel shuffles).
    if (inputs_pinned || !computable_from_constants(graph, node, false) ||
        !compute_node_outputs(graph, node, context.options.plugins, context.options.max_folded_bytes)) {
      const LoadedPlugin* plugin = nullptr;
      if (const edgert_kernel* kernel = find_kernel(graph, node, context.options.plugins, &plugin))
        infer_node_outputs(graph, node, *plugin, *kernel);
      continue;
    }
    dead[n] = true;
    ++folded;
  }
  if (folded) remove_nodes(graph, dead);
  return folded;
}

}  // namespace edgert::builder
