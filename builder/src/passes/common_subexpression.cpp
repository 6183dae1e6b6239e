// Common-subexpression elimination: equal constants are merged first (same dtype, shape and
// bytes), then nodes with the same op, opset, attributes and inputs compute the same values,
// so the later one's readers read the earlier one's outputs. Nodes in execution order, so one
// sweep also merges chains of duplicates.
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string_view>
#include <unordered_map>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

// A float's bit pattern (memcpy: reading it through a uint32_t pointer breaks strict aliasing).
uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

std::string node_key(const Node& node) {
  std::string key = node.domain + "|" + node.op_type + "|" + std::to_string(node.opset) + "|";
  for (int32_t t : node.inputs) key += std::to_string(t) + ",";
  key += "|" + std::to_string(node.outputs.size()) + "|";
  for (const Attribute& a : node.attributes) {
    key += a.name + "=" + std::to_string(a.type) + ":" + std::to_string(a.i) + ":";
    // Bit pattern, not decimal text: 0.1f and its neighbours must differ.
    key += std::to_string(float_bits(a.f)) + ":" + a.s + ":";
    for (int64_t v : a.ints) key += std::to_string(v) + ",";
    for (float v : a.floats) key += std::to_string(float_bits(v)) + ",";
    for (const std::string& s : a.strings) key += std::to_string(s.size()) + "#" + s + ",";
    key += std::to_string(a.tensor) + ":" + std::to_string(a.graph) + ";";
  }
  return key;
}

bool same_constant(const Value& a, const Value& b) {
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size() || *a.data != *b.data) return false;
  for (size_t d = 0; d < a.shape.size(); ++d)
    if (a.shape[d].value != b.shape[d].value) return false;
  return true;
}

int merge_constants(PassContext& context) {
  Graph& graph = context.graph;
  std::unordered_map<size_t, std::vector<int32_t>> by_hash;
  int merged = 0;
  std::vector<int32_t> replacement(graph.values.size(), -1);
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const Value& value = graph.values[v];
    if (!value.is_constant() || context.pinned[v]) continue;
    std::string_view bytes(reinterpret_cast<const char*>(value.data->data()), value.data->size());
    size_t h = std::hash<std::string_view>()(bytes) ^ static_cast<size_t>(value.dtype);
    auto& bucket = by_hash[h];
    for (int32_t other : bucket)
      if (same_constant(graph.values[other], value)) {
        replacement[v] = other;
        break;
      }
    if (replacement[v] < 0) bucket.push_back(static_cast<int32_t>(v));
  }
  for (Node& node : graph.nodes) {
    for (int32_t& t : node.inputs)
      if (t >= 0 && replacement[t] >= 0) {
        t = replacement[t];
        ++merged;
      }
  }
  return merged;
}

}  // namespace

int eliminate_common_subexpressions(PassContext& context) {
  Graph& graph = context.graph;
  int rewrites = merge_constants(context);
  std::map<std::string, int32_t> seen;
  std::vector<bool> dead(graph.nodes.size(), false);
  ValueUses uses(graph);  // after merge_constants, which edits inputs
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (has_graph_attribute(node) || node.outputs.empty()) continue;
    if (node.op_type.rfind("Random", 0) == 0 || node.op_type == "Bernoulli" || node.op_type == "Multinomial") continue;
    auto [it, inserted] = seen.emplace(node_key(node), static_cast<int32_t>(n));
    if (inserted) continue;
    const Node& first = graph.nodes[it->second];
    bool ok = true;
    for (size_t o = 0; o < node.outputs.size() && ok; ++o) ok = !context.pinned[node.outputs[o]];
    if (!ok) continue;  // an engine output keeps its own node; rare enough not to matter
    for (size_t o = 0; o < node.outputs.size(); ++o)
      redirect_value(graph, node.outputs[o], first.outputs[o], context.pinned, uses);
    dead[n] = true;
    ++rewrites;
  }
  if (rewrites) remove_nodes(graph, dead);
  return rewrites;
}

}  // namespace edgert::builder
