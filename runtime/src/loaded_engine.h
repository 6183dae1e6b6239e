// An engine after verification: graphs resolved into the structs kernels receive, plugins and
// kernels looked up. Immutable once loaded; shared by every ExecutionContext made from it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "edgert/edgert.h"
#include "edgert/plugin.h"
#include "engine_file.h"
#include "plugin_loader.h"

namespace edgert {

// What a value is (engine.fbs Tensor.kind): sequences and optionals are produced and read by the
// builtin sequence ops only; an optional without a value is a tensor of dtype UNDEFINED.
enum class ValueKind : uint8_t { Tensor = 0, Sequence = 1, OptionalTensor = 2, OptionalSequence = 3 };

inline bool is_optional(ValueKind kind) { return kind == ValueKind::OptionalTensor || kind == ValueKind::OptionalSequence; }

struct LoadedTensor {
  const char* name = "";
  ValueKind kind = ValueKind::Tensor;
  int32_t dtype = 0;  // 0 when the builder could not infer it
  bool rank_known = false;
  int32_t rank = 0;
  int64_t dims[EDGERT_MAX_RANK] = {};        // -1: dynamic
  const char* dim_names[EDGERT_MAX_RANK] = {};
  bool is_constant = false;
  edgert_tensor constant{};  // for constants: data points into the mmap (read-only)
  edgert_memory_space space = EDGERT_MEMORY_HOST;  // where the runtime keeps it (engine.fbs)
};

// Ops the runtime runs itself, because they execute subgraphs (a kernel cannot call back into
// the executor) or move a tensor between memory spaces (edgert.Copy, which the builder puts
// where a host and a device kernel meet on a discrete GPU). The builder assigns them to the
// reserved plugin name "builtin".
enum class BuiltinOp { None, If, Loop, Scan, Copy, Sequence };
constexpr const char* kBuiltinPlugin = "builtin";

struct LoadedNode {
  edgert_node node{};
  BuiltinOp builtin = BuiltinOp::None;
  int32_t then_graph = -1, else_graph = -1, body_graph = -1;  // subgraph indices of If / Loop, Scan
  std::vector<edgert_attribute> attributes;
  std::vector<std::vector<const char*>> string_lists;  // backing store of STRINGS attributes
  std::vector<int32_t> inputs;                          // -1: omitted optional input
  std::vector<int32_t> outputs;
  const LoadedPlugin* plugin = nullptr;  // null for builtin ops
  const edgert_kernel* kernel = nullptr;
  const edgert_device* device = nullptr;  // the plugin's device; null for host kernels and builtins
  int64_t tactic = 0;
  std::vector<int64_t> profile_tactics;  // per optimization profile; empty: `tactic` for all

  int64_t tactic_for(size_t profile) const {
    return profile < profile_tactics.size() ? profile_tactics[profile] : tactic;
  }
};

struct LoadedGraph {
  std::vector<LoadedTensor> tensors;
  std::vector<LoadedNode> nodes;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  // Index of the last node reading each tensor; -1 when none does. Graph outputs and
  // constants are never freed early, whatever this says.
  std::vector<int32_t> last_use;
  std::vector<bool> is_graph_output;
  // Subgraphs read tensors of enclosing graphs by name: (tensor here, tensor in the parent),
  // copied from the parent when this graph starts. A value from further out reaches here
  // through every graph in between, each capturing it from its own parent.
  int32_t parent = -1;
  int32_t parent_node = -1;  // the node of the parent graph that runs this subgraph
  std::vector<std::pair<int32_t, int32_t>> captures;
};

// The builder's memory plan for graphs[0] (engine.fbs MemoryPlan), verified at load: every
// offset aligned and inside the arena, only node outputs planned, and no two tensors alive at
// the same time overlapping (except an output written in place over an input read for the
// last time by the same node, and a Concat's inputs that it reads last, planned at their place
// in its output). A hostile plan can therefore not make the runtime write
// outside the arena or over a live tensor.
struct ArenaPlan {
  uint64_t arena_bytes = 0;             // host arena
  uint64_t alignment = 64;
  uint64_t workspace_bytes = 0;         // host workspace
  uint64_t device_arena_bytes = 0, unified_arena_bytes = 0, device_workspace_bytes = 0;
  std::vector<int64_t> offsets;  // per tensor of graphs[0], in the arena of its space; -1: from the allocator
  std::vector<uint64_t> sizes;

  uint64_t arena_bytes_of(edgert_memory_space space) const {
    return space == EDGERT_MEMORY_DEVICE ? device_arena_bytes
           : space == EDGERT_MEMORY_UNIFIED ? unified_arena_bytes : arena_bytes;
  }
};

class LoadedEngine {
 public:
  static std::unique_ptr<LoadedEngine> load(const std::string& path, const edgert_load_options& options,
                                            edgert_error* error);
  // For tests and fuzzing: load from memory that outlives the engine.
  static std::unique_ptr<LoadedEngine> load_memory(const void* data, size_t size,
                                                   const edgert_load_options& options, edgert_error* error);

  const EngineFile& file() const { return file_; }
  const LoadedGraph& main_graph() const { return graphs_[0]; }
  const std::vector<LoadedGraph>& graphs() const { return graphs_; }
  const std::vector<int32_t>& input_tensors() const { return inputs_; }
  const std::vector<int32_t>& output_tensors() const { return outputs_; }
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::string& board() const { return board_; }

  struct ShapeRange {
    std::vector<int64_t> min, opt, max;
  };
  // Optimization profiles (engine.fbs OptimizationProfile): per engine input its range, empty
  // vectors where the profile leaves the input unconstrained. An engine without profiles has
  // none; its inputs take any shape they declare.
  using Profile = std::vector<ShapeRange>;
  size_t num_profiles() const { return profiles_.size(); }
  const Profile& profile(size_t index) const { return profiles_[index]; }
  // The range profile 0 gives engine input `index`, or null when it sets none.
  const ShapeRange* profile_range(size_t index) const;
  // The plan of profile `profile` (of the whole engine without profiles), or null when the
  // engine has none.
  const ArenaPlan* arena_plan(size_t profile = 0) const {
    return plans_.empty() ? nullptr : &plans_[std::min(profile, plans_.size() - 1)];
  }

  // The device of the engine's device plugin (at most one per engine), or null when every node
  // runs on the host.
  const edgert_device* device() const { return device_; }
  // The engine's copy, in device memory, of constant tensor `t` of the main graph when a device
  // kernel reads it; null otherwise. Made once at load and shared by every context.
  const void* device_constant(int32_t t) const {
    return t >= 0 && static_cast<size_t>(t) < device_constants_.size() ? device_constants_[t] : nullptr;
  }
  ~LoadedEngine();

  // The first profile whose ranges hold every input shape (0 without profiles); fails with a
  // message giving each profile's ranges when none does.
  edgert_status select_profile(const edgert_tensor* inputs, size_t num_inputs, size_t* profile,
                               edgert_error* error) const;

 private:
  bool resolve(const edgert_load_options& options, edgert_error* error);
  bool resolve_graph(uint32_t index, edgert_error* error);
  // The tensor of graph `index`'s parent named `name` (which graph `index` reads), kept alive
  // there until the node running graph `index` is done. A parent that does not write it
  // captures it from its own parent in turn, and so on up to the graph that does. -1 (error
  // set) when an enclosing graph on the way has no tensor of that name.
  int32_t capture_outer(uint32_t index, const char* name, edgert_error* error);
  bool resolve_profiles(edgert_error* error);
  bool resolve_memory_plan(edgert_error* error);
  bool verify_memory_plan(const fb::MemoryPlan* plan, uint32_t index, ArenaPlan* out, edgert_error* error);
  bool resolve_device(edgert_error* error);

  EngineFile file_;
  std::vector<const LoadedPlugin*> plugins_;  // null entry for the builtin pseudo-plugin
  std::vector<LoadedGraph> graphs_;
  // While resolving: per resolved graph, per tensor, whether it has a value when the graph runs
  // (a constant, an input, a capture or a node's output).
  std::vector<std::vector<bool>> written_;
  // While resolving: per graph, its tensors of each name in index order, made at the first
  // capture from that graph (a scan of every tensor per capture is quadratic in large graphs).
  std::vector<std::unordered_map<std::string_view, std::vector<int32_t>>> tensors_named_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<std::string> input_names_, output_names_;
  std::string board_;
  std::vector<Profile> profiles_;
  std::vector<ArenaPlan> plans_;  // one per profile (or one for the engine); empty: no plan
  const edgert_device* device_ = nullptr;
  std::vector<void*> device_constants_;  // per tensor of graphs[0]; device memory of device_
};

void fill_tensor_info(const LoadedTensor& tensor, const std::string& binding_name, edgert_tensor_info* info);

}  // namespace edgert
