// Helpers the optimization passes share to read and edit the main graph of a Model: who
// produces and who reads each value, which values must keep their identity, and the edits
// (redirect reads, drop nodes, drop unreferenced values) that keep the IR valid.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir.h"

namespace edgert::builder {

// Producer and readers of every value of one graph. A pass that edits nodes one rewrite at a
// time keeps them current with forget_node / learn_node around each edit: rebuilding them after
// every rewrite walks the whole graph per rewrite, quadratic in its size.
struct ValueUses {
  std::vector<int32_t> producer;  // node index, -1: none
  // (node index, input slot), sorted: what a rebuild from the edited graph would list.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> readers;

  explicit ValueUses(const Graph& graph);
  size_t reader_count(int32_t value) const { return readers[value].size(); }
  // The one node reading `value`, or -1 when zero or several nodes read it.
  int32_t sole_reader(int32_t value) const;
  // Before node `node` of `graph` changes its inputs or outputs: drops what it reads and writes.
  void forget_node(const Graph& graph, int32_t node);
  // After the change: records what it reads and writes now (values added since are taken in).
  void learn_node(const Graph& graph, int32_t node);
};

// How many times a pass helper walked every node of a graph (ValueUses built, nodes removed,
// values compacted), over the process's life. A pass that runs in time linear in the graph walks
// it a fixed number of times whatever its size; the scaling tests read this to check that
// without timing anything.
uint64_t graph_walks();

// Values whose identity the engine depends on and that a pass must neither remove nor rename:
// graph inputs and outputs (IO bindings name them) and values a subgraph reads by name.
std::vector<bool> pinned_values(const Model& model, const Graph& graph);

// Makes every read of `from` (node inputs, graph outputs) read `to` instead. When `from` is
// pinned (an engine output), `to` takes over its name if `to` is a node output nobody pins;
// returns false and changes nothing when neither can give way. The readers come from `uses`,
// which is kept current, so a redirect costs the readers of `from`, not a walk of the graph.
// Graph outputs must be pinned (pinned_values pins them).
bool redirect_value(Graph& graph, int32_t from, int32_t to, std::vector<bool>& pinned, ValueUses& uses);

// Removes the nodes marked true, keeping the order of the rest.
void remove_nodes(Graph& graph, const std::vector<bool>& dead);

// Drops values no node, attribute or graph IO refers to and renumbers the rest; `pinned`
// values stay (a constant only a subgraph reads, by name). Subgraphs refer to main-graph
// values by name, so renumbering is invisible to them.
void compact_values(Graph& graph, const std::vector<bool>& pinned);

// A constant's values as doubles (float32/64, int64/32, uint8, int8); empty when not a constant or of
// another dtype.
std::vector<double> constant_as_doubles(const Value& value);
// True when `value` is a constant holding exactly one element equal to `x`.
bool is_scalar_constant(const Value& value, double x);
// A new float32 constant value in `graph`.
int32_t add_float_constant(Graph& graph, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<float>& data);
// The same for int64 data (a Reshape's shape, a Slice's bounds).
int32_t add_int64_constant(Graph& graph, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& data);

// A node is in the default ONNX domain and has this op type.
// A Gather of one constant index (a scalar: the axis goes away) along an axis of its data whose
// size is known and the same at every shape: that axis (non-negative) and the index (within it).
bool constant_pick(const Graph& graph, const Node& node, int64_t& axis, int64_t& index);

inline bool is_op(const Node& node, const char* op_type) {
  return node.domain.empty() && node.op_type == op_type;
}

bool has_graph_attribute(const Node& node);

// "a + b": how fused nodes are named, so inspect can list their parts. A name of more than
// kFusedNameMembers parts keeps the first and the last and counts them, "Relu_0 + ... + Relu_3999
// (4000 nodes)": listing every part of a long chain would make the name, the -v log and the
// engine grow with the square of the chain's length. `a` and `b` may be such names themselves;
// parts are counted by their " + " separators.
constexpr size_t kFusedNameMembers = 8;
std::string fused_name(const std::string& a, const std::string& b);
// The parts a fused_name lists, in order: every one, or the first and the last of a shortened
// name; `count` receives how many nodes were fused (1 for a name that is no fusion).
std::vector<std::string> fused_name_parts(const std::string& name, size_t* count);

}  // namespace edgert::builder
