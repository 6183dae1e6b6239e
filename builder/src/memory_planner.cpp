#include "memory_planner.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>

#include "error.h"
#include "kernel_selection.h"

namespace edgert::builder {
namespace {

// Ops whose CPU kernels compute y[i] from x[i] alone (or copy), so y may be x's memory; for
// each, the input slots that may be aliased. Kernels a plugin adds for these ops must keep
// that property (the reference ones read element i before writing it).
std::vector<int> in_place_slots(const Node& node) {
  static const std::set<std::string> unary = {
      "Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSwish", "HardSigmoid", "Gelu", "Elu", "Selu", "Celu",
      "Softplus", "Softsign", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf", "Reciprocal", "Identity", "Dropout", "Reshape",
      "Flatten", "Squeeze", "Unsqueeze"};
  if (node.domain.empty()) {
    if (unary.count(node.op_type)) return {0};
    if (node.op_type == "Add" || node.op_type == "Sub" || node.op_type == "Mul" || node.op_type == "Div") return {0, 1};
    return {};
  }
  if (node.domain == "edgert") {
    if (node.op_type == "PointwiseChain") return {0};
    if (node.op_type == "FusedConv") return {3};
  }
  return {};
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The byte ranges of one memory space's arena taken by the tensors alive at the node at hand,
// and the free gaps between them by length, so a best-fit placement is a lookup rather than a
// sort of every alive tensor (quadratic in graphs with thousands of tensors alive at once, as
// many parallel branches joined at the end). Ranges are disjoint or equal (an output in place of
// its input takes exactly its range); add returns false for any other overlap, and the planner
// then goes back to scanning.
class ArenaOccupancy {
 public:
  bool add(uint64_t lo, uint64_t hi) {
    auto next = ranges_.lower_bound(lo);
    if (next != ranges_.end() && next->first == lo) {
      if (next->second.hi != hi) return false;
      ++next->second.count;
      return true;
    }
    const uint64_t before = next == ranges_.begin() ? 0 : std::prev(next)->second.hi;
    if (before > lo || (next != ranges_.end() && next->first < hi)) return false;
    if (next != ranges_.end()) {
      remove_gap(before, next->first);
      add_gap(hi, next->first);
    }
    add_gap(before, lo);
    ranges_.emplace_hint(next, lo, Range{hi, 1});
    return true;
  }
  void remove(uint64_t lo) {
    auto it = ranges_.find(lo);
    if (--it->second.count > 0) return;
    const uint64_t before = it == ranges_.begin() ? 0 : std::prev(it)->second.hi;
    remove_gap(before, lo);
    if (auto next = std::next(it); next != ranges_.end()) {
      remove_gap(it->second.hi, next->first);
      add_gap(before, next->first);
    }
    ranges_.erase(it);
  }
  // Best fit: the lowest offset of the shortest gap of at least `size` bytes; else the end of
  // the highest range.
  uint64_t place(uint64_t size) const {
    auto gap = gaps_.lower_bound({size, 0});
    if (gap != gaps_.end()) return gap->second;
    return ranges_.empty() ? 0 : ranges_.rbegin()->second.hi;
  }

 private:
  struct Range {
    uint64_t hi;
    int count;  // tensors on exactly this range
  };
  void add_gap(uint64_t lo, uint64_t hi) {
    if (hi > lo) gaps_.emplace(hi - lo, lo);
  }
  void remove_gap(uint64_t lo, uint64_t hi) {
    if (hi > lo) gaps_.erase({hi - lo, lo});
  }
  std::map<uint64_t, Range> ranges_;              // by first byte
  std::set<std::pair<uint64_t, uint64_t>> gaps_;  // (length, first byte), below the highest range
};

// A Concat whose inputs are planned at their place in its output, so the kernel has nothing
// to copy (Concat kernels skip an input whose data already sits where it goes).
struct ConcatInPlace {
  int32_t output = -1;
  std::vector<int32_t> members;   // the inputs, in order
  std::vector<uint64_t> offsets;  // each member's byte offset inside the output
};

// Concat nodes that can be planned in place: joined along an axis with only 1s before it (each
// input is then one contiguous run of the output), every input a planned tensor written
// before and read by this Concat alone (its bytes belong to the output from then on), no input
// twice or in two Concats, and every input's place aligned as the plan's offsets are.
// member_of[v] = index of the group holding v, -1 if none.
std::vector<ConcatInPlace> concats_in_place(const Graph& graph, const std::vector<bool>& plannable,
                                            const std::vector<uint64_t>& sizes, const std::vector<int32_t>& end,
                                            const std::vector<bool>& is_output, uint64_t alignment,
                                            std::vector<int32_t>& member_of) {
  std::vector<ConcatInPlace> groups;
  member_of.assign(graph.values.size(), -1);
  std::vector<bool> group_output(graph.values.size(), false);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (!node.domain.empty() || node.op_type != "Concat" || node.outputs.size() != 1 || node.inputs.size() < 2)
      continue;
    // Channels-last, a Concat over channels interleaves its inputs: no input is one run of it.
    if (const Attribute* layout = node.attribute("layout"); layout && layout->s == "NHWC") continue;
    const int32_t out = node.outputs[0];
    if (!plannable[out] || member_of[out] >= 0 || sizes[out] == 0) continue;
    const Value& y = graph.values[out];
    // Where each input lies inside the output depends on the sizes before it: only fixed shapes.
    if (!y.shape_is_fixed()) continue;
    const Attribute* axis_attr = node.attribute("axis");
    const int64_t rank = static_cast<int64_t>(y.shape.size());
    int64_t axis = axis_attr ? axis_attr->i : 1;  // Concat-1 defaulted to 1
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) continue;
    bool ok = true;
    for (int64_t a = 0; a < axis; ++a) ok = ok && y.shape[a].value == 1;
    ConcatInPlace group;
    group.output = out;
    uint64_t offset = 0;
    for (int32_t u : node.inputs) {
      ok = ok && u >= 0 && plannable[u] && member_of[u] < 0 && !group_output[u] && !is_output[u] &&
           graph.values[u].space == y.space &&
           end[u] == static_cast<int32_t>(n) && graph.values[u].dtype == y.dtype && offset % alignment == 0 &&
           std::count(node.inputs.begin(), node.inputs.end(), u) == 1;
      if (!ok) break;
      group.members.push_back(u);
      group.offsets.push_back(offset);
      offset += sizes[u];
    }
    if (!ok || offset != sizes[out]) continue;
    for (int32_t u : group.members) member_of[u] = static_cast<int32_t>(groups.size());
    group_output[out] = true;
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

MemoryPlan plan_memory(const Model& model) {
  const Graph& graph = model.graphs[0];
  const size_t num_values = graph.values.size();
  const int32_t end_of_run = static_cast<int32_t>(graph.nodes.size());
  MemoryPlan plan;
  plan.offsets.assign(num_values, -1);
  plan.sizes.assign(num_values, 0);

  std::vector<int32_t> start(num_values, -1), end(num_values, -1);
  std::vector<bool> plannable(num_values, false);
  std::unordered_multimap<std::string, int32_t> values_named;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    // Host and device kernels have workspaces of their own space.
    uint64_t& workspace = node.on_device ? plan.device_workspace_bytes : plan.workspace_bytes;
    if (node.workspace_bytes > 0) workspace = std::max<uint64_t>(workspace, node.workspace_bytes);
    for (int32_t t : node.inputs)
      if (t >= 0) end[t] = static_cast<int32_t>(n);
    std::set<std::string> captured;
    for (const Attribute& a : node.attributes)
      if (a.graph >= 0) outer_names(model, a.graph, captured);
    if (!captured.empty()) {
      // Built at the first control-flow node: a scan of every value per such node would be
      // quadratic in graphs with many of them.
      if (values_named.empty())
        for (size_t v = 0; v < num_values; ++v) values_named.emplace(graph.values[v].name, static_cast<int32_t>(v));
      for (const std::string& name : captured)
        for (auto [it, last] = values_named.equal_range(name); it != last; ++it)
          end[it->second] = std::max(end[it->second], static_cast<int32_t>(n));
    }
    for (int32_t t : node.outputs) {
      start[t] = static_cast<int32_t>(n);
      const Value& v = graph.values[t];
      // Kernels and copies between memory spaces write arena tensors; control flow does not.
      const char* builtin = builtin_kernel(node);
      const bool writes_arena = !builtin || std::string(builtin) == "builtin-copy";
      plannable[t] = writes_arena && !v.is_constant() && v.shape_is_static() &&
                     v.dtype != 0 && dtype_size(v.dtype) > 0;
    }
  }
  std::vector<bool> is_output(num_values, false);
  for (int32_t t : graph.outputs) {
    end[t] = end_of_run;
    is_output[t] = true;
  }
  for (int32_t t : graph.inputs) plannable[t] = false;

  for (size_t v = 0; v < num_values; ++v) {
    if (!plannable[v]) continue;
    if (end[v] < start[v]) end[v] = start[v];  // written, never read: lives through its node
    uint64_t bytes = dtype_size(graph.values[v].dtype) * static_cast<uint64_t>(graph.values[v].numel());
    plan.sizes[v] = bytes;
    plan.activation_bytes += bytes;
    plan.largest_tensor_bytes = std::max(plan.largest_tensor_bytes, bytes);
    ++plan.planned_tensors;
  }

  std::vector<int32_t> member_of;
  const std::vector<ConcatInPlace> concats =
      concats_in_place(graph, plannable, plan.sizes, end, is_output, plan.alignment, member_of);
  // A group's output holds its members' bytes from the first member's writing on.
  for (const ConcatInPlace& group : concats)
    for (int32_t u : group.members) start[group.output] = std::min(start[group.output], start[u]);

  std::vector<int32_t> placed;  // in placement order
  // Tensors are placed in the order of their first writing (start[v] is the node at hand), so a
  // tensor dead before one placement is dead for every later one: the occupancy drops it then.
  // Should either assumption fail, placement scans `placed` as it always could (same result).
  std::array<ArenaOccupancy, 3> occupancy;  // per memory space
  std::priority_queue<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>,
                      std::greater<std::pair<int32_t, int32_t>>>
      alive_until;  // (end, tensor) of the tensors in `occupancy`
  bool use_occupancy = true;
  int32_t dropped_before = -1;  // tensors ending before this node have left `occupancy`
  auto space_of = [&](int32_t t) { return static_cast<size_t>(graph.values[t].space); };
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::vector<int> slots = in_place_slots(node);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int32_t v = node.outputs[o];
      if (!plannable[v] || plan.offsets[v] >= 0) continue;  // placed with its Concat group
      const ConcatInPlace* group = member_of[v] >= 0 ? &concats[static_cast<size_t>(member_of[v])] : nullptr;
      if (group) v = group->output;  // the first member written: place the whole output now
      const uint64_t size = align_up(std::max<uint64_t>(plan.sizes[v], 1), plan.alignment);
      int64_t offset = -1;
      if (o == 0 && !group) {
        for (int slot : slots) {
          if (slot >= static_cast<int>(node.inputs.size())) continue;
          int32_t u = node.inputs[slot];
          // A Concat member's bytes are its Concat's output: no other tensor may take them.
          if (u < 0 || plan.offsets[u] < 0 || end[u] != static_cast<int32_t>(n) || plan.sizes[u] != plan.sizes[v] ||
              graph.values[u].dtype != graph.values[v].dtype || graph.values[u].space != graph.values[v].space ||
              member_of[u] >= 0)
            continue;
          // A second read of u by an element-wise binary op (x * x) is harmless; by anything else
          // (Conv reading X across planes while Z = X is overwritten) it is not.
          const bool binary = node.domain.empty() && slots.size() == 2;
          if (!binary && std::count(node.inputs.begin(), node.inputs.end(), u) != 1) continue;
          offset = plan.offsets[u];
          ++plan.in_place;
          break;
        }
      }
      if (offset < 0 && use_occupancy && start[v] >= dropped_before && space_of(v) < occupancy.size()) {
        dropped_before = start[v];
        while (!alive_until.empty() && alive_until.top().first < start[v]) {
          const int32_t p = alive_until.top().second;
          alive_until.pop();
          occupancy[space_of(p)].remove(static_cast<uint64_t>(plan.offsets[p]));
        }
        offset = static_cast<int64_t>(occupancy[space_of(v)].place(size));
      } else if (offset < 0) {
        use_occupancy = false;
        std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, offset + aligned size)
        for (int32_t p : placed)
          if (graph.values[p].space == graph.values[v].space && end[p] >= start[v])
            busy.emplace_back(plan.offsets[p],
                              plan.offsets[p] + align_up(std::max<uint64_t>(plan.sizes[p], 1), plan.alignment));
        std::sort(busy.begin(), busy.end());
        uint64_t cursor = 0, best_gap = UINT64_MAX;
        for (const auto& [lo, hi] : busy) {
          if (lo > cursor && lo - cursor >= size && lo - cursor < best_gap) {
            best_gap = lo - cursor;
            offset = static_cast<int64_t>(cursor);
          }
          cursor = std::max(cursor, hi);
        }
        if (offset < 0) offset = static_cast<int64_t>(cursor);
      }
      if (use_occupancy && space_of(v) < occupancy.size() &&
          occupancy[space_of(v)].add(static_cast<uint64_t>(offset), static_cast<uint64_t>(offset) + size))
        alive_until.emplace(end[v], v);
      else
        use_occupancy = false;
      plan.offsets[v] = offset;
      uint64_t& arena = plan.arena_bytes_of(graph.values[v].space);
      arena = std::max(arena, static_cast<uint64_t>(offset) + size);
      placed.push_back(v);
      if (group) {
        for (size_t i = 0; i < group->members.size(); ++i)
          plan.offsets[group->members[i]] = offset + static_cast<int64_t>(group->offsets[i]);
        ++plan.concats_in_place;
      }
    }
  }
  return plan;
}

}  // namespace edgert::builder
