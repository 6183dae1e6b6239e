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

// Producer and readers of every value of one graph. Recompute after an edit.
struct ValueUses {
  std::vector<int32_t> producer;                                // node index, -1: none
  std::vector<std::vector<std::pair<int32_t, int32_t>>> readers;  // (node index, input slot)

  explicit ValueUses(const Graph& graph);
  size_t reader_count(int32_t value) const { return readers[value].size(); }
  // The one node reading `value`, or -1 when zero or several nodes read it.
  int32_t sole_reader(int32_t value) const;
};

// Values whose identity the engine depends on and that a pass must neither remove nor rename:
// graph inputs and outputs (IO bindings name them) and values a subgraph reads by name.
std::vector<bool> pinned_values(const Model& model, const Graph& graph);

// Makes every read of `from` (node inputs, graph outputs) read `to` instead. When `from` is
// pinned (an engine output), `to` takes over its name if `to` is a node output nobody pins;
// returns false and changes nothing when neither can give way.
bool redirect_value(Graph& graph, int32_t from, int32_t to, std::vector<bool>& pinned);

// Removes the nodes marked true, keeping the order of the rest.
void remove_nodes(Graph& graph, const std::vector<bool>& dead);

// Drops values no node, attribute or graph IO refers to and renumbers the rest; `pinned`
// values stay (a constant only a subgraph reads, by name). Subgraphs refer to main-graph
// values by name, so renumbering is invisible to them.
void compact_values(Graph& graph, const std::vector<bool>& pinned);

// A constant's values as doubles (float and integer dtypes); empty when not a constant or of
// another dtype.
std::vector<double> constant_as_doubles(const Value& value);
// True when `value` is a constant holding exactly one element equal to `x`.
bool is_scalar_constant(const Value& value, double x);
// A new float32 constant value in `graph`.
int32_t add_float_constant(Graph& graph, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<float>& data);

// A node is in the default ONNX domain and has this op type.
inline bool is_op(const Node& node, const char* op_type) {
  return node.domain.empty() && node.op_type == op_type;
}

bool has_graph_attribute(const Node& node);

// "a + b": how fused nodes are named, so inspect can list their parts.
std::string fused_name(const std::string& a, const std::string& b);

}  // namespace edgert::builder
