// Dead-code elimination: a node none of whose outputs is read, pinned (engine output,
// subgraph reference) or the output of the graph does nothing useful. One backward sweep
// removes whole dead chains. Control-flow nodes stay: the engine format ties every subgraph
// to the node that runs it.
#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {

int eliminate_dead_code(PassContext& context) {
  Graph& graph = context.graph;
  std::vector<int32_t> readers(graph.values.size(), 0);
  for (const Node& node : graph.nodes)
    for (int32_t t : node.inputs)
      if (t >= 0) ++readers[t];
  std::vector<bool> dead(graph.nodes.size(), false);
  int removed = 0;
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    if (has_graph_attribute(node)) continue;
    bool used = false;
    for (int32_t t : node.outputs) used = used || readers[t] > 0 || context.pinned[t];
    if (used) continue;
    dead[n] = true;
    ++removed;
    for (int32_t t : node.inputs)
      if (t >= 0) --readers[t];
  }
  if (removed) remove_nodes(graph, dead);
  return removed;
}

}  // namespace edgert::builder
