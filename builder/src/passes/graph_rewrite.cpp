#include "graph_rewrite.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <string_view>

#include "error.h"

namespace edgert::builder {
namespace {

std::atomic<uint64_t> walks{0};

void count_walk() { walks.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t graph_walks() { return walks.load(std::memory_order_relaxed); }

ValueUses::ValueUses(const Graph& graph) {
  count_walk();
  producer.assign(graph.values.size(), -1);
  readers.assign(graph.values.size(), {});
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] >= 0) readers[node.inputs[i]].emplace_back(static_cast<int32_t>(n), static_cast<int32_t>(i));
    for (int32_t o : node.outputs) producer[o] = static_cast<int32_t>(n);
  }
}

int32_t ValueUses::sole_reader(int32_t value) const {
  const auto& r = readers[value];
  if (r.empty()) return -1;
  for (const auto& [node, slot] : r)
    if (node != r[0].first) return -1;
  return r[0].first;
}

void ValueUses::forget_node(const Graph& graph, int32_t n) {
  const Node& node = graph.nodes[n];
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int32_t v = node.inputs[i];
    if (v < 0 || static_cast<size_t>(v) >= readers.size()) continue;
    auto& r = readers[v];
    auto it = std::lower_bound(r.begin(), r.end(), std::make_pair(n, static_cast<int32_t>(i)));
    if (it != r.end() && *it == std::make_pair(n, static_cast<int32_t>(i))) r.erase(it);
  }
  for (int32_t o : node.outputs)
    if (static_cast<size_t>(o) < producer.size() && producer[o] == n) producer[o] = -1;
}

void ValueUses::learn_node(const Graph& graph, int32_t n) {
  if (producer.size() < graph.values.size()) {
    producer.resize(graph.values.size(), -1);
    readers.resize(graph.values.size());
  }
  const Node& node = graph.nodes[n];
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const int32_t v = node.inputs[i];
    if (v < 0) continue;
    auto& r = readers[v];
    const auto entry = std::make_pair(n, static_cast<int32_t>(i));
    r.insert(std::lower_bound(r.begin(), r.end(), entry), entry);
  }
  for (int32_t o : node.outputs) producer[o] = n;
}

std::vector<bool> pinned_values(const Model& model, const Graph& graph) {
  std::vector<bool> pinned(graph.values.size(), false);
  for (int32_t t : graph.inputs) pinned[t] = true;
  for (int32_t t : graph.outputs) pinned[t] = true;
  // Conservative: any name that appears in a subgraph may be an outer-scope reference.
  std::set<std::string> sub_names;
  for (size_t g = 0; g < model.graphs.size(); ++g) {
    if (&model.graphs[g] == &graph) continue;
    for (const Value& v : model.graphs[g].values) sub_names.insert(v.name);
  }
  if (!sub_names.empty())
    for (size_t v = 0; v < graph.values.size(); ++v)
      if (sub_names.count(graph.values[v].name)) pinned[v] = true;
  return pinned;
}

bool redirect_value(Graph& graph, int32_t from, int32_t to, std::vector<bool>& pinned, ValueUses& uses) {
  if (from == to) return true;
  // Only a pinned value can be a graph output: the scan of the outputs is needed only then.
  const bool from_pinned = pinned[from];
  if (from_pinned) {
    // The engine output keeps its name: `to` must be an ordinary node output to be renamed.
    bool to_is_input = false;
    for (int32_t t : graph.inputs) to_is_input = to_is_input || t == to;
    bool to_is_output = false;
    for (int32_t t : graph.outputs) to_is_output = to_is_output || t == to;
    if (pinned[to] || to_is_input || to_is_output || graph.values[to].is_constant()) return false;
    graph.values[to].name = graph.values[from].name;
    graph.values[from].name += "__replaced";
    pinned[to] = true;
    pinned[from] = false;
  }
  if (uses.readers.size() < graph.values.size()) {  // `to` may be a value added since
    uses.producer.resize(graph.values.size(), -1);
    uses.readers.resize(graph.values.size());
  }
  auto& moved = uses.readers[from];
  for (const auto& [node, slot] : moved) graph.nodes[node].inputs[slot] = to;
  auto& into = uses.readers[to];
  const size_t before = into.size();
  into.insert(into.end(), moved.begin(), moved.end());
  std::inplace_merge(into.begin(), into.begin() + static_cast<std::ptrdiff_t>(before), into.end());
  moved.clear();
  if (from_pinned)
    for (int32_t& out : graph.outputs)
      if (out == from) out = to;
  return true;
}

void remove_nodes(Graph& graph, const std::vector<bool>& dead) {
  count_walk();
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    if (!dead[n]) kept.push_back(std::move(graph.nodes[n]));
  graph.nodes = std::move(kept);
}

void compact_values(Graph& graph, const std::vector<bool>& pinned) {
  count_walk();
  std::vector<bool> used(graph.values.size(), false);
  for (size_t v = 0; v < pinned.size() && v < used.size(); ++v) used[v] = pinned[v];
  for (const Node& node : graph.nodes) {
    for (int32_t t : node.inputs)
      if (t >= 0) used[t] = true;
    for (int32_t t : node.outputs) used[t] = true;
    for (const Attribute& a : node.attributes)
      if (a.tensor >= 0) used[a.tensor] = true;
  }
  for (int32_t t : graph.inputs) used[t] = true;
  for (int32_t t : graph.outputs) used[t] = true;
  std::vector<int32_t> remap(graph.values.size(), -1);
  std::vector<Value> kept;
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (used[v]) {
      remap[v] = static_cast<int32_t>(kept.size());
      kept.push_back(std::move(graph.values[v]));
    }
  graph.values = std::move(kept);
  auto fix = [&](int32_t& t) {
    if (t >= 0) t = remap[t];
  };
  for (Node& node : graph.nodes) {
    for (int32_t& t : node.inputs) fix(t);
    for (int32_t& t : node.outputs) fix(t);
    for (Attribute& a : node.attributes) fix(a.tensor);
  }
  for (int32_t& t : graph.inputs) fix(t);
  for (int32_t& t : graph.outputs) fix(t);
}

std::vector<double> constant_as_doubles(const Value& value) {
  std::vector<double> out;
  if (!value.is_constant() || value.numel() < 0) return out;
  const uint8_t* p = value.data->data();
  size_t n = static_cast<size_t>(value.numel());
  size_t bytes = dtype_size(value.dtype);
  if (bytes == 0 || value.data->size() < n * bytes) return out;
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* e = p + i * bytes;
    switch (value.dtype) {
      case EDGERT_DTYPE_FLOAT32: { float f; std::memcpy(&f, e, 4); out[i] = f; break; }
      case EDGERT_DTYPE_FLOAT64: std::memcpy(&out[i], e, 8); break;
      case EDGERT_DTYPE_INT64: { int64_t x; std::memcpy(&x, e, 8); out[i] = static_cast<double>(x); break; }
      case EDGERT_DTYPE_INT32: { int32_t x; std::memcpy(&x, e, 4); out[i] = x; break; }
      case EDGERT_DTYPE_UINT8: out[i] = *e; break;
      case EDGERT_DTYPE_INT8: out[i] = static_cast<int8_t>(*e); break;
      default: return {};
    }
  }
  return out;
}

bool is_scalar_constant(const Value& value, double x) {
  std::vector<double> v = constant_as_doubles(value);
  return v.size() == 1 && v[0] == x;
}

namespace {

int32_t add_constant(Graph& graph, const std::string& name, int32_t dtype, const std::vector<int64_t>& dims,
                     const void* data, size_t bytes) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.rank_known = true;
  for (int64_t d : dims) v.shape.push_back(Dim{d, ""});
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes);
  if (bytes) std::memcpy(copy->data(), data, bytes);
  v.data = std::move(copy);
  return graph.add_value(std::move(v));
}

}  // namespace

int32_t add_float_constant(Graph& graph, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<float>& data) {
  return add_constant(graph, name, EDGERT_DTYPE_FLOAT32, dims, data.data(), data.size() * sizeof(float));
}

int32_t add_int64_constant(Graph& graph, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& data) {
  return add_constant(graph, name, EDGERT_DTYPE_INT64, dims, data.data(), data.size() * sizeof(int64_t));
}

bool has_graph_attribute(const Node& node) {
  for (const Attribute& a : node.attributes)
    if (a.type == EDGERT_ATTR_GRAPH || a.graph >= 0) return true;
  return false;
}

namespace {

// The parts of a name fused_name made: the first, the last and how many.
struct FusedParts {
  std::string_view first, last;
  size_t count = 1;
};

FusedParts fused_parts(std::string_view name) {
  static constexpr std::string_view kPlus = " + ", kElided = " + ... + ", kSuffix = " nodes)";
  FusedParts parts;
  // A shortened name: "first + ... + last (N nodes)".
  const size_t elided = name.find(kElided);
  const size_t open = name.rfind(" (");
  if (elided != std::string_view::npos && open != std::string_view::npos && open > elided &&
      name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix) {
    const std::string_view digits = name.substr(open + 2, name.size() - kSuffix.size() - open - 2);
    size_t count = 0;
    bool numeric = !digits.empty();
    for (char c : digits) {
      numeric = numeric && c >= '0' && c <= '9';
      count = count * 10 + static_cast<size_t>(c - '0');
    }
    if (numeric) {
      parts.first = name.substr(0, elided);
      parts.last = name.substr(elided + kElided.size(), open - elided - kElided.size());
      parts.count = count;
      return parts;
    }
  }
  const size_t first_plus = name.find(kPlus), last_plus = name.rfind(kPlus);
  parts.first = name.substr(0, first_plus);
  parts.last = last_plus == std::string_view::npos ? name : name.substr(last_plus + kPlus.size());
  for (size_t at = first_plus; at != std::string_view::npos; at = name.find(kPlus, at + kPlus.size())) ++parts.count;
  return parts;
}

}  // namespace

std::vector<std::string> fused_name_parts(const std::string& name, size_t* count) {
  const FusedParts parts = fused_parts(name);
  *count = parts.count;
  std::vector<std::string> listed;
  if (name.find(" + ... + ") != std::string::npos && parts.count > kFusedNameMembers) {
    listed = {std::string(parts.first), std::string(parts.last)};
    return listed;
  }
  size_t start = 0;
  while (true) {
    const size_t plus = name.find(" + ", start);
    listed.push_back(name.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
    if (plus == std::string::npos) return listed;
    start = plus + 3;
  }
}

std::string fused_name(const std::string& a, const std::string& b) {
  const FusedParts pa = fused_parts(a), pb = fused_parts(b);
  const size_t count = pa.count + pb.count;
  if (count <= kFusedNameMembers) return a + " + " + b;
  std::string name(pa.first);
  name += " + ... + ";
  name += pb.last;
  name += " (" + std::to_string(count) + " nodes)";
  return name;
}

bool constant_pick(const Graph& graph, const Node& node, int64_t& axis, int64_t& index) {
  if (!is_op(node, "Gather") || node.inputs.size() != 2 || node.inputs[0] < 0 || node.inputs[1] < 0) return false;
  const Value& x = graph.values[node.inputs[0]];
  const Value& i = graph.values[node.inputs[1]];
  if (!x.rank_known || !i.rank_known || !i.shape.empty()) return false;
  const std::vector<double> picked = constant_as_doubles(i);
  if (picked.size() != 1) return false;
  const Attribute* a = node.attribute("axis");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  axis = a ? a->i : 0;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  const Dim& extent = x.shape[static_cast<size_t>(axis)];
  if (extent.varies() || extent.value <= 0) return false;
  index = static_cast<int64_t>(picked[0]);
  if (index < 0) index += extent.value;
  return index >= 0 && index < extent.value;
}

}  // namespace edgert::builder
