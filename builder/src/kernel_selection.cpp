#include "kernel_selection.h"

#include <cstring>

#include "build_error.h"
#include "node_view.h"
#include "value_kinds.h"

namespace edgert::builder {
namespace {

bool same_domain(const char* kernel_domain, const std::string& node_domain) {
  std::string k = kernel_domain ? kernel_domain : "";
  if (k == "ai.onnx") k.clear();
  return k == node_domain;
}

}  // namespace

bool infer_node_outputs(Graph& graph, Node& node, const LoadedPlugin& plugin, const edgert_kernel& kernel) {
  node.workspace_bytes = -1;
  node.kernel_state_bytes = -1;
  NodeView view(graph, node);
  if (!view.inputs_static()) return false;
  std::vector<edgert_tensor> outputs(node.outputs.size());
  void* state = nullptr;
  edgert_prepare_info info{};
  edgert_error error{};
  edgert_status status = kernel.prepare(&kernel, view.node(), node.tactic, view.inputs(), outputs.data(), &state,
                                        &info, &error);
  if (state) kernel.release(&kernel, state);
  if (status == EDGERT_ERR_NEEDS_DATA) return false;
  if (status != EDGERT_OK)
    build_fail(status, "node '%s' (%s, kernel %s/%s) rejects its inputs: %s", node.name.c_str(), node.op_type.c_str(),
               plugin.name.c_str(), kernel.name, error.message);
  node.workspace_bytes = static_cast<int64_t>(info.workspace_bytes);
  node.kernel_state_bytes = static_cast<int64_t>(info.kernel_state_bytes);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    Value& v = graph.values[node.outputs[o]];
    v.dtype = outputs[o].dtype;
    v.rank_known = true;
    std::vector<Dim> shape(outputs[o].rank);
    for (int32_t d = 0; d < outputs[o].rank; ++d) {
      shape[d].value = outputs[o].dims[d];
      // What inference at other shapes learnt of the dimension stays (shape_profiles.h).
      if (d < static_cast<int32_t>(v.shape.size())) {
        shape[d].name = v.shape[d].name;
        shape[d].low = v.shape[d].low;
        shape[d].high = v.shape[d].high;
      }
    }
    v.shape = std::move(shape);
  }
  return true;
}

const edgert_kernel* find_kernel(const Graph& graph, const Node& node, const std::vector<const LoadedPlugin*>& plugins,
                                 const LoadedPlugin** plugin_out) {
  NodeView view(graph, node);
  for (const LoadedPlugin* plugin : plugins) {
    for (int32_t k = 0; k < plugin->table->num_kernels; ++k) {
      const edgert_kernel& kernel = plugin->table->kernels[k];
      if (std::strcmp(kernel.op_type, node.op_type.c_str()) != 0 || !same_domain(kernel.domain, node.domain))
        continue;
      if (kernel.supports && !kernel.supports(&kernel, view.node(), view.inputs())) continue;
      if (plugin_out) *plugin_out = plugin;
      return &kernel;
    }
  }
  return nullptr;
}

// Control flow runs subgraphs, which only the runtime's executor can do (see
// runtime/src/control_flow.h), and sequences and optionals are the executor's values
// (runtime/src/sequence_ops.h); these nodes go to the reserved "builtin" plugin.
const char* builtin_kernel(const Node& node) {
  if (node.domain == "edgert" && node.op_type == "Copy") return "builtin-copy";
  if (!node.domain.empty()) return nullptr;
  if (node.op_type == "If") return "builtin-if";
  if (node.op_type == "Loop") return "builtin-loop";
  if (node.op_type == "Scan") return "builtin-scan";
  // Sequences and optionals are values of the runtime's executor, not tensors a plugin takes.
  if (is_sequence_op(node) || (node.op_type == "Identity" && node.reads_non_tensors)) return "builtin-sequence";
  return nullptr;
}

// Without a tuner, the kernel's own first choice: it lists its best guess first.
void first_listed_tactic(const Graph& graph, Node& node, const edgert_kernel& kernel) {
  node.tactic = 0;
  node.tactic_name.clear();
  if (!kernel.tactics) return;
  NodeView view(graph, node);
  edgert_tactic first{};
  if (kernel.tactics(&kernel, view.node(), view.inputs(), &first, 1) > 0) {
    node.tactic = first.id;
    node.tactic_name = first.name ? first.name : "";
  }
}

void select_kernels(Model& model, const SelectionOptions& options) {
  for (Graph& graph : model.graphs) {
    for (Node& node : graph.nodes) {
      if (const char* builtin = builtin_kernel(node)) {
        node.plugin = kBuiltinPluginName;
        node.kernel = builtin;
        if (options.log) options.log("node '" + node.name + "' (" + node.op_type + ") -> runtime builtin");
        continue;
      }
      const LoadedPlugin* chosen_plugin = nullptr;
      // A node placed on a plugin (device_placement.h) takes its kernel from that plugin.
      std::vector<const LoadedPlugin*> candidates;
      for (const LoadedPlugin* p : options.plugins)
        if (node.plugin.empty() || p->name == node.plugin) candidates.push_back(p);
      const edgert_kernel* chosen = find_kernel(graph, node, candidates, &chosen_plugin);
      if (!chosen && !node.plugin.empty()) chosen = find_kernel(graph, node, options.plugins, &chosen_plugin);
      if (!chosen) {
        std::string searched;
        for (const LoadedPlugin* p : options.plugins) searched += (searched.empty() ? "" : ", ") + p->name + " (" + p->path + ")";
        build_fail(EDGERT_ERR_UNSUPPORTED, "op '%s%s%s' of node '%s' is not supported by any plugin; searched: %s",
                   node.domain.c_str(), node.domain.empty() ? "" : ".", node.op_type.c_str(), node.name.c_str(),
                   searched.empty() ? "(no plugins found)" : searched.c_str());
      }
      node.plugin = chosen_plugin->name;
      node.kernel = chosen->name;
      node.on_device = chosen_plugin->table->device != nullptr;
      if (options.log) options.log("node '" + node.name + "' (" + node.op_type + ") -> " + node.plugin + "/" + node.kernel);
      // Tactics before shape inference: prepare sizes the workspace for the chosen tactic.
      if (options.tuner) options.tuner->choose(graph, node, *chosen_plugin, *chosen);
      else first_listed_tactic(graph, node, *chosen);
      // Only the main graph has known shapes; subgraph shapes depend on the iteration.
      if (&graph == &model.graphs[0]) infer_node_outputs(graph, node, *chosen_plugin, *chosen);
    }
  }
}

void select_profile_tactics(Model& model, const SelectionOptions& options, size_t profile, size_t num_profiles) {
  Graph& graph = model.graphs[0];
  for (Node& node : graph.nodes) {
    if (node.plugin == kBuiltinPluginName) continue;
    const LoadedPlugin* plugin = nullptr;
    for (const LoadedPlugin* p : options.plugins)
      if (p->name == node.plugin) plugin = p;
    const edgert_kernel* kernel = plugin ? plugin->find_kernel(node.kernel.c_str()) : nullptr;
    if (!kernel)
      build_fail(EDGERT_ERR_INTERNAL, "node '%s': selected kernel %s/%s is gone", node.name.c_str(),
                 node.plugin.c_str(), node.kernel.c_str());
    if (node.profile_tactics.size() != num_profiles) {
      node.profile_tactics.assign(num_profiles, node.tactic);
      node.profile_tactic_names.assign(num_profiles, node.tactic_name);
    }
    const int64_t tactic = node.tactic;
    const std::string tactic_name = node.tactic_name;
    if (options.tuner) options.tuner->choose(graph, node, *plugin, *kernel);
    else first_listed_tactic(graph, node, *kernel);
    node.profile_tactics[profile] = node.tactic;
    node.profile_tactic_names[profile] = node.tactic_name;
    node.tactic = tactic;
    node.tactic_name = tactic_name;
  }
}

}  // namespace edgert::builder
