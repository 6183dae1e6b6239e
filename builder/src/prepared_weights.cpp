#include "prepared_weights.h"

#include <cstring>

#include "build_error.h"
#include "node_view.h"

namespace edgert::builder {
namespace {

const edgert_kernel* selected_kernel(const Node& node, const std::vector<const LoadedPlugin*>& plugins) {
  for (const LoadedPlugin* plugin : plugins) {
    if (plugin->name != node.plugin) continue;
    for (int32_t k = 0; k < plugin->table->num_kernels; ++k)
      if (std::strcmp(plugin->table->kernels[k].name, node.kernel.c_str()) == 0) return &plugin->table->kernels[k];
  }
  return nullptr;
}

}  // namespace

PreparedWeightsReport export_prepared_weights(Graph& graph, const std::vector<const LoadedPlugin*>& plugins) {
  PreparedWeightsReport report;
  for (Node& node : graph.nodes) {
    node.prepared.reset();
    node.prepared_replaces = 0;
    const edgert_kernel* kernel = selected_kernel(node, plugins);
    if (!kernel || !kernel->export_prepared) continue;
    NodeView view(graph, node);
    if (!view.inputs_static()) continue;
    size_t bytes = 0;
    uint64_t replaced = 0;
    edgert_error error{};
    edgert_status status = kernel->export_prepared(kernel, view.node(), node.tactic, view.inputs(), nullptr, 0, &bytes,
                                                   &replaced, &error);
    if (status == EDGERT_ERR_NEEDS_DATA) continue;  // shapes from values: prepared at run time
    if (status == EDGERT_OK && bytes > 0) {
      auto data = std::make_shared<std::vector<uint8_t>>(bytes);
      size_t written = 0;
      status = kernel->export_prepared(kernel, view.node(), node.tactic, view.inputs(), data->data(), data->size(),
                                       &written, &replaced, &error);
      if (status == EDGERT_OK && written != bytes)
        build_fail(EDGERT_ERR_INTERNAL, "node '%s' (kernel %s): its prepared state was %zu bytes, then %zu",
                   node.name.c_str(), node.kernel.c_str(), bytes, written);
      if (status == EDGERT_OK) {
        node.prepared = std::move(data);
        node.prepared_replaces = replaced;
        ++report.nodes;
        report.bytes += bytes;
      }
    }
    if (status != EDGERT_OK)
      build_fail(status, "node '%s' (%s, kernel %s/%s) cannot export its prepared weights: %s", node.name.c_str(),
                 node.op_type.c_str(), node.plugin.c_str(), node.kernel.c_str(), error.message);
  }
  return report;
}

}  // namespace edgert::builder
