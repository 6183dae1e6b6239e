#include "node_view.h"

#include "build_error.h"

namespace edgert::builder {

edgert_tensor tensor_of(const Value& value) {
  edgert_tensor t{};
  t.dtype = static_cast<edgert_dtype>(value.dtype);
  t.rank = value.rank_known ? static_cast<int32_t>(value.shape.size()) : -1;
  for (int32_t d = 0; d < t.rank && d < EDGERT_MAX_RANK; ++d) t.dims[d] = value.shape[d].value;
  // Kernels only read inputs; the const_cast is the ABI's single non-const data pointer.
  t.data = value.data ? const_cast<uint8_t*>(value.data->data()) : nullptr;
  return t;
}

NodeView::NodeView(const Graph& graph, const Node& node) {
  if (node.outputs.empty())
    build_fail(EDGERT_ERR_FORMAT, "node '%s' (%s) has no outputs; no kernel can run it", node.name.c_str(),
               node.op_type.c_str());
  attributes_.resize(node.attributes.size());
  strings_.resize(node.attributes.size());
  tensor_attributes_.resize(node.attributes.size());
  for (size_t i = 0; i < node.attributes.size(); ++i) {
    const Attribute& a = node.attributes[i];
    edgert_attribute& out = attributes_[i];
    out.name = a.name.c_str();
    out.type = a.type;
    out.i = a.i;
    out.f = a.f;
    out.s = a.s.data();
    out.s_len = a.s.size();
    out.graph = a.graph;
    switch (a.type) {
      case EDGERT_ATTR_INTS: out.ints = a.ints.data(); out.count = a.ints.size(); break;
      case EDGERT_ATTR_FLOATS: out.floats = a.floats.data(); out.count = a.floats.size(); break;
      case EDGERT_ATTR_STRINGS:
        for (const std::string& s : a.strings) strings_[i].push_back(s.c_str());
        out.strings = strings_[i].data();
        out.count = strings_[i].size();
        break;
      case EDGERT_ATTR_TENSOR:
        tensor_attributes_[i] = tensor_of(graph.values[a.tensor]);
        out.tensor = &tensor_attributes_[i];
        break;
      default: break;
    }
  }
  node_.name = node.name.c_str();
  node_.domain = node.domain.c_str();
  node_.op_type = node.op_type.c_str();
  node_.opset = node.opset;
  node_.num_inputs = static_cast<int32_t>(node.inputs.size());
  node_.num_outputs = static_cast<int32_t>(node.outputs.size());
  node_.num_attributes = static_cast<int32_t>(attributes_.size());
  node_.attributes = attributes_.data();
  if (node.prepared) {
    node_.prepared = node.prepared->data();
    node_.prepared_bytes = node.prepared->size();
  }
  for (int32_t in : node.inputs) {
    if (in < 0) {
      inputs_.push_back(edgert_tensor{});
      continue;
    }
    const Value& v = graph.values[in];
    inputs_.push_back(tensor_of(v));
    if (v.dtype == 0 || !v.shape_is_static() || v.shape.size() > EDGERT_MAX_RANK) inputs_static_ = false;
  }
}

}  // namespace edgert::builder
