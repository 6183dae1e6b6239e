// Picks, for every node, the plugin kernel that will run it, and infers output dtypes and
// shapes by asking that kernel's prepare with what is known at build time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir.h"
#include "plugin_loader.h"
#include "tactic_tuner.h"

namespace edgert::builder {

// Plugin name of the ops the runtime executes itself (If, Loop, Scan).
constexpr const char* kBuiltinPluginName = "builtin";

struct SelectionOptions {
  std::vector<const LoadedPlugin*> plugins;  // candidates, best score first
  std::function<void(const std::string&)> log;  // verbose build log; may be empty
  // Chooses each node's tactic; null: the kernel's first-listed one, untimed.
  TacticTuner* tuner = nullptr;
};

// The runtime builtin that runs `node` ("builtin-if", "builtin-copy", ...), or null for kernels.
const char* builtin_kernel(const Node& node);

// Fails (BuildError) at the first node no plugin supports, naming the op, the node and every
// plugin searched: an unsupported model must fail here, never at run time.
void select_kernels(Model& model, const SelectionOptions& options);

// Chooses, for every main-graph node, a tactic of the kernel select_kernels gave it, at the
// shapes the graph is specialized to now (a profile's opt: shape_profiles.h), and records it as
// the node's tactic for optimization profile `profile` (Node::profile_tactics); node.tactic
// is left as it was.
void select_profile_tactics(Model& model, const SelectionOptions& options, size_t profile, size_t num_profiles);

// The first kernel (plugins in order) whose op, domain and supports() accept `node`; null when
// none does. `plugin` receives the plugin it belongs to.
const edgert_kernel* find_kernel(const Graph& graph, const Node& node, const std::vector<const LoadedPlugin*>& plugins,
                                 const LoadedPlugin** plugin);

// Runs prepare on `node` to fill its outputs' dtype and shape where inputs allow. Returns false
// when values are not known yet (shapes stay as imported); throws on a real error. Sets
// node.workspace_bytes from what prepare asked for.
bool infer_node_outputs(Graph& graph, Node& node, const LoadedPlugin& plugin, const edgert_kernel& kernel);

}  // namespace edgert::builder
