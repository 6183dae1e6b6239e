#include "ir.h"

namespace edgert::builder {

bool Value::shape_is_static() const {
  if (!rank_known) return false;
  for (const Dim& d : shape)
    if (d.value < 0) return false;
  return true;
}

bool Value::shape_is_fixed() const {
  if (!shape_is_static()) return false;
  for (const Dim& d : shape)
    if (d.varies()) return false;
  return true;
}

bool Value::same_shape_as(const Value& other) const {
  if (!shape_is_static() || !other.shape_is_static() || shape.size() != other.shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d].value != other.shape[d].value || shape[d].low != other.shape[d].low ||
        shape[d].high != other.shape[d].high)
      return false;
  return true;
}

int64_t Value::numel() const {
  if (!shape_is_static()) return -1;
  int64_t n = 1;
  for (const Dim& d : shape) n *= d.value;
  return n;
}

const Attribute* Node::attribute(const std::string& attr_name) const {
  for (const Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

Attribute* Node::attribute(const std::string& attr_name) {
  for (Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

void Node::set_attribute(Attribute attr) {
  if (Attribute* existing = attribute(attr.name)) *existing = std::move(attr);
  else attributes.push_back(std::move(attr));
}

Dim fixed_dim(int64_t value) {
  Dim d;
  d.value = d.low = d.high = value;
  return d;
}

Attribute int_attribute(const char* name, int64_t value) {
  Attribute a;
  a.name = name;
  a.type = EDGERT_ATTR_INT;
  a.i = value;
  return a;
}

Attribute ints_attribute(const char* name, const std::vector<int64_t>& values) {
  Attribute a;
  a.name = name;
  a.type = EDGERT_ATTR_INTS;
  a.ints = values;
  return a;
}

Attribute float_attribute(const char* name, float value) {
  Attribute a;
  a.name = name;
  a.type = EDGERT_ATTR_FLOAT;
  a.f = value;
  return a;
}

Attribute string_attribute(const char* name, const std::string& value) {
  Attribute a;
  a.name = name;
  a.type = EDGERT_ATTR_STRING;
  a.s = value;
  return a;
}

Attribute floats_attribute(const char* name, const std::vector<float>& value) {
  Attribute a;
  a.name = name;
  a.type = EDGERT_ATTR_FLOATS;
  a.floats = value;
  return a;
}

int32_t Graph::add_value(Value value) {
  values.push_back(std::move(value));
  return static_cast<int32_t>(values.size() - 1);
}

int32_t Graph::find_value(const std::string& value_name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == value_name) return static_cast<int32_t>(i);
  return -1;
}

void outer_names(const Model& model, int32_t g, std::set<std::string>& names) {
  const Graph& graph = model.graphs[g];
  std::set<std::string> defined, read;
  for (int32_t t : graph.inputs) defined.insert(graph.values[t].name);
  for (const Value& v : graph.values)
    if (v.is_constant()) defined.insert(v.name);
  for (const Node& n : graph.nodes) {
    for (int32_t t : n.inputs)
      if (t >= 0) read.insert(graph.values[t].name);
    for (int32_t t : n.outputs) defined.insert(graph.values[t].name);
    for (const Attribute& a : n.attributes)
      if (a.graph >= 0) outer_names(model, a.graph, read);
  }
  for (int32_t t : graph.outputs) read.insert(graph.values[t].name);
  for (const std::string& name : read)
    if (!defined.count(name)) names.insert(name);
}

}  // namespace edgert::builder
