// The builder's intermediate representation: an ONNX graph after import, before the writer.
// Values are indexed, not pointed to, so passes can append without invalidating references.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "edgert/plugin.h"

namespace edgert::builder {

struct Dim {
  int64_t value = -1;  // -1: dynamic
  std::string name;    // the symbolic name of a dynamic dimension ("batch", "height")
  // Builds with optimization profiles (shape_profiles.h) specialize the graph to one set of
  // input shapes at a time (a profile's opt for tuning, its max for the memory plan): `value` is
  // the size there, `low` and `high` the sizes at the smallest and the largest input shapes the
  // profiles accept. Where they differ the dimension varies, and the engine stores it as dynamic.
  int64_t low = -1, high = -1;
  bool varies() const { return low != high; }
};

// A dimension of one size at every shape the engine accepts.
Dim fixed_dim(int64_t value);

// What a value is: a tensor, or one of ONNX's other value types, which the runtime's builtin
// sequence and optional ops produce and read (runtime/src/sequence_ops.h). The numbering is the
// engine's (engine.fbs Tensor.kind).
enum class ValueKind : uint8_t { Tensor = 0, Sequence = 1, OptionalTensor = 2, OptionalSequence = 3 };

struct Value {
  std::string name;
  ValueKind kind = ValueKind::Tensor;  // dtype is the element type of a sequence's tensors
  int32_t dtype = 0;        // edgert_dtype; 0 = not inferred
  bool rank_known = false;
  std::vector<Dim> shape;
  // Constant data, little-endian and dense; null for activations. Shared so passes can
  // duplicate references without copying weights.
  std::shared_ptr<const std::vector<uint8_t>> data;
  // Where the value lives at run time (device_placement.h); constants stay HOST (the file).
  edgert_memory_space space = EDGERT_MEMORY_HOST;

  bool is_constant() const { return data != nullptr; }
  bool shape_is_static() const;
  // Static, and the same for every shape the engine accepts: no dimension varies. What a pass
  // may bake into the graph (a folded Shape, a dropped Reshape) must hold for every shape.
  bool shape_is_fixed() const;
  // Both static with equal dimensions at every shape the engine accepts (value, low and high).
  bool same_shape_as(const Value& other) const;
  int64_t numel() const;  // -1 unless static
};

struct Attribute {
  std::string name;
  edgert_attr_type type = EDGERT_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  int32_t tensor = -1;  // TENSOR: index of a constant Value in the same graph
  int32_t graph = -1;   // GRAPH: index in Model::graphs
};

// Attributes of nodes a pass or an option adds.
Attribute int_attribute(const char* name, int64_t value);
Attribute ints_attribute(const char* name, const std::vector<int64_t>& values);
Attribute float_attribute(const char* name, float value);
Attribute string_attribute(const char* name, const std::string& value);
Attribute floats_attribute(const char* name, const std::vector<float>& value);

struct Node {
  std::string name;
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int32_t opset = 0;
  std::vector<int32_t> inputs;  // value indices; -1 for an omitted optional input
  std::vector<int32_t> outputs;
  std::vector<Attribute> attributes;
  // Reads or writes a sequence or an optional (value_kinds.h): only the runtime's builtin ops do.
  bool reads_non_tensors = false;

  // Set by device placement (the plugin only) and kernel selection.
  std::string plugin;
  std::string kernel;
  bool on_device = false;  // the plugin has a device: the node's tensors are in its space
  int64_t tactic = 0;
  std::string tactic_name;  // the kernel's name for `tactic`; empty when it lists no tactics
  // With several optimization profiles: the tactic tuned at each profile's opt shapes (index =
  // profile; entry 0 equals `tactic`). Empty: `tactic` serves every profile.
  std::vector<int64_t> profile_tactics;
  std::vector<std::string> profile_tactic_names;
  // Scratch bytes the selected kernel asked for at the build's shapes; -1 when not known
  // (shapes not static). Used by the memory planner.
  int64_t workspace_bytes = -1;
  // What the kernel keeps after prepare at the same shapes (edgert_prepare_info.kernel_state_bytes:
  // packed weights and the like); -1 when not known. Counted in the engine's footprint.
  int64_t kernel_state_bytes = -1;
  // What the kernel exported for `tactic` (edgert_kernel.export_prepared), stored in the engine
  // and handed back to prepare as edgert_node.prepared; null: nothing (prepared_weights.h).
  std::shared_ptr<const std::vector<uint8_t>> prepared;
  // Inputs the kernel no longer reads given `prepared` (export_prepared's replaced_inputs).
  uint64_t prepared_replaces = 0;
  // Why the node runs in its precision (the precision passes set it; `edgert inspect` shows it);
  // empty: the model's own precision.
  std::string precision_note;

  const Attribute* attribute(const std::string& attr_name) const;
  Attribute* attribute(const std::string& attr_name);
  // Replaces or appends an attribute of the same name.
  void set_attribute(Attribute attribute);
};

struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;  // topologically sorted
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;

  int32_t add_value(Value value);
  int32_t find_value(const std::string& value_name) const;  // -1 if absent
};

struct Model {
  std::vector<Graph> graphs;  // graphs[0] is the main graph
  std::map<std::string, int64_t> opsets;
  std::string source_path;
  std::string producer;  // e.g. "pytorch 1.13.1"
};

// Adds to `names` the names graph `g` reads from enclosing scopes: those its nodes, its
// outputs or its subgraphs at any depth read, and it does not define itself (as an input, a
// constant or a node's output). A graph between the one defining a name and the one reading it
// reads it too: it passes the value on.
void outer_names(const Model& model, int32_t g, std::set<std::string>& names);

}  // namespace edgert::builder
