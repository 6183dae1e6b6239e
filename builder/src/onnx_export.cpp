#include "onnx_export.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include <unistd.h>

#include "build_error.h"

namespace edgert::builder {
namespace {

void set_type(onnx::ValueInfoProto& info, const Value& v) {
  info.set_name(v.name);
  onnx::TypeProto_Tensor* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(v.dtype);
  if (!v.rank_known) return;
  onnx::TensorShapeProto* shape = tensor->mutable_shape();
  for (const Dim& d : v.shape) {
    onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (d.value >= 0 && !d.varies())
      dim->set_dim_value(d.value);
    else if (!d.name.empty())
      dim->set_dim_param(d.name);
  }
}

void set_tensor(onnx::TensorProto& proto, const Value& v) {
  proto.set_name(v.name);
  proto.set_data_type(v.dtype);
  for (const Dim& d : v.shape) proto.add_dims(d.value);
  proto.set_raw_data(v.data->data(), v.data->size());
}

void set_attribute(onnx::AttributeProto& proto, const Attribute& a, const Graph& graph, const Node& node) {
  proto.set_name(a.name);
  switch (a.type) {
    case EDGERT_ATTR_FLOAT: proto.set_type(onnx::AttributeProto::FLOAT); proto.set_f(a.f); break;
    case EDGERT_ATTR_INT: proto.set_type(onnx::AttributeProto::INT); proto.set_i(a.i); break;
    case EDGERT_ATTR_STRING: proto.set_type(onnx::AttributeProto::STRING); proto.set_s(a.s); break;
    case EDGERT_ATTR_FLOATS:
      proto.set_type(onnx::AttributeProto::FLOATS);
      for (float f : a.floats) proto.add_floats(f);
      break;
    case EDGERT_ATTR_INTS:
      proto.set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints) proto.add_ints(i);
      break;
    case EDGERT_ATTR_STRINGS:
      proto.set_type(onnx::AttributeProto::STRINGS);
      for (const std::string& s : a.strings) proto.add_strings(s);
      break;
    case EDGERT_ATTR_TENSOR:
      proto.set_type(onnx::AttributeProto::TENSOR);
      set_tensor(*proto.mutable_t(), graph.values[a.tensor]);
      break;
    default:
      build_fail(EDGERT_ERR_UNSUPPORTED, "node '%s' (%s): attribute '%s' cannot be written to ONNX (subgraphs are not "
                 "exported)", node.name.c_str(), node.op_type.c_str(), a.name.c_str());
  }
}

}  // namespace

void write_onnx_model(const Model& model, const std::string& path) {
  const Graph& graph = model.graphs[0];
  onnx::ModelProto proto;
  proto.set_ir_version(8);
  proto.set_producer_name("edgert");
  proto.set_producer_version(EDGERT_VERSION);
  for (const auto& [domain, version] : model.opsets) {
    onnx::OperatorSetIdProto* opset = proto.add_opset_import();
    opset->set_domain(domain);
    opset->set_version(version);
  }
  onnx::GraphProto* g = proto.mutable_graph();
  g->set_name(graph.name.empty() ? "main" : graph.name);
  std::set<int32_t> written;
  auto initializer = [&](int32_t v) {
    if (v < 0 || !graph.values[v].is_constant() || !written.insert(v).second) return;
    set_tensor(*g->add_initializer(), graph.values[v]);
  };
  for (int32_t v : graph.inputs) set_type(*g->add_input(), graph.values[v]);
  for (int32_t v : graph.outputs) set_type(*g->add_output(), graph.values[v]);
  for (const Node& node : graph.nodes) {
    onnx::NodeProto* n = g->add_node();
    n->set_name(node.name);
    n->set_op_type(node.op_type);
    if (!node.domain.empty()) n->set_domain(node.domain);
    for (int32_t v : node.inputs) {
      n->add_input(v < 0 ? std::string() : graph.values[v].name);
      initializer(v);
    }
    for (int32_t v : node.outputs) n->add_output(v < 0 ? std::string() : graph.values[v].name);
    for (const Attribute& a : node.attributes) set_attribute(*n->add_attribute(), a, graph, node);
  }
  for (int32_t v : graph.outputs) initializer(v);

  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out || !proto.SerializeToOstream(&out) || !out.flush())
      build_fail(EDGERT_ERR_IO, "cannot write '%s'", temporary.c_str());
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    build_fail(EDGERT_ERR_IO, "cannot replace '%s'", path.c_str());
  }
}

}  // namespace edgert::builder
