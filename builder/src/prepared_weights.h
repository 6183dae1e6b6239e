// Weights prepared at build time (plugin.h, ABI 5): every main-graph kernel that can export the
// state its prepare builds (weights in its tactic's layout) does so here, and the builder
// stores those bytes in the engine, so loading maps them instead of packing weights into
// private memory. Like TensorRT's plans, an engine then holds weights as its kernels read them.
#pragma once

#include <cstdint>
#include <vector>

#include "ir.h"
#include "plugin_loader.h"

namespace edgert::builder {

struct PreparedWeightsReport {
  int32_t nodes = 0;   // nodes whose kernel exported state
  uint64_t bytes = 0;  // what they exported, in all
};

// Sets Node::prepared (and prepared_replaces) for every node of `graph` whose selected kernel
// exports state at its tactic and the graph's current (static) shapes; clears it elsewhere. A kernel's failure to
// export is a build error naming the node: the same prepare runs when the engine loads.
PreparedWeightsReport export_prepared_weights(Graph& graph, const std::vector<const LoadedPlugin*>& plugins);

}  // namespace edgert::builder
