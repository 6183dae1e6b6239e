#include "output_postprocess.h"

#include <cstdlib>
#include <cstring>

#include "build_error.h"
#include "edgert/plugin.h"

namespace edgert::builder {
namespace {

// `base`, or base_1, base_2, ... where the graph already has a value of that name.
std::string unused_name(const Graph& graph, const std::string& base) {
  std::string name = base;
  for (int i = 1; graph.find_value(name) >= 0; ++i) name = base + "_" + std::to_string(i);
  return name;
}

int32_t add_activation(Graph& graph, const std::string& name, int32_t dtype, std::vector<Dim> shape) {
  Value v;
  v.name = unused_name(graph, name);
  v.dtype = dtype;
  v.rank_known = true;
  v.shape = std::move(shape);
  return graph.add_value(std::move(v));
}

int32_t add_int64_constant(Graph& graph, const std::string& name, int64_t value) {
  Value v;
  v.name = unused_name(graph, name);
  v.dtype = EDGERT_DTYPE_INT64;
  v.rank_known = true;
  v.shape = {fixed_dim(1)};
  auto bytes = std::make_shared<std::vector<uint8_t>>(sizeof value);
  std::memcpy(bytes->data(), &value, sizeof value);
  v.data = std::move(bytes);
  return graph.add_value(std::move(v));
}

Node onnx_node(const std::string& name, const char* op_type, int32_t opset, std::vector<int32_t> inputs,
               std::vector<int32_t> outputs, std::vector<Attribute> attributes) {
  Node node;
  node.name = name;
  node.op_type = op_type;
  node.opset = opset;
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
  node.attributes = std::move(attributes);
  return node;
}

// Whether the value comes out of a Softmax over its last axis: its scores are probabilities.
bool ends_in_softmax(const Graph& graph, int32_t value) {
  for (const Node& node : graph.nodes) {
    if (node.outputs.empty() || node.outputs[0] != value) continue;
    if (!node.domain.empty() || node.op_type != "Softmax") return false;
    const Attribute* axis = node.attribute("axis");
    const int64_t rank = static_cast<int64_t>(graph.values[value].shape.size());
    const int64_t a = axis ? axis->i : (node.opset >= 13 ? -1 : 1);
    return a == -1 || a == rank - 1;
  }
  return false;
}

void append_classification(Graph& graph, int64_t k) {
  const int32_t scores = graph.outputs[0];
  const Value& in = graph.values[scores];
  const int64_t classes = in.shape.size() == 2 ? in.shape[1].value : -1;
  if (classes <= 0)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "--postprocess classification: output '%s' is not scores [N, classes] with a fixed number of classes",
               in.name.c_str());
  if (k > classes)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--postprocess classification:%lld: output '%s' has %lld classes",
               static_cast<long long>(k), in.name.c_str(), static_cast<long long>(classes));
  const std::vector<Dim> shape = in.shape;
  const std::string from = in.name;
  // edgertd reports probabilities: logits go through the softmax it would otherwise apply.
  int32_t probabilities = scores;
  if (!ends_in_softmax(graph, scores)) {
    probabilities = add_activation(graph, from + ":probabilities", EDGERT_DTYPE_FLOAT32, shape);
    graph.nodes.push_back(onnx_node("postprocess softmax", "Softmax", 13, {scores}, {probabilities},
                                    {int_attribute("axis", -1)}));
  }
  std::vector<Dim> top_shape = shape;
  top_shape.back() = fixed_dim(k);
  const int32_t top_scores = add_activation(graph, "scores", EDGERT_DTYPE_FLOAT32, top_shape);
  const int32_t top_classes = add_activation(graph, "classes", EDGERT_DTYPE_INT64, top_shape);
  const int32_t k_value = add_int64_constant(graph, "postprocess_k", k);
  graph.nodes.push_back(onnx_node("postprocess top-k", "TopK", 11, {probabilities, k_value}, {top_scores, top_classes},
                                  {int_attribute("axis", -1), int_attribute("largest", 1), int_attribute("sorted", 1)}));
  graph.outputs = {top_scores, top_classes};
}

void append_segmentation(Graph& graph) {
  const int32_t scores = graph.outputs[0];
  const Value& in = graph.values[scores];
  if (!in.rank_known || in.shape.size() != 4 || in.shape[1].value <= 0)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "--postprocess segmentation: output '%s' is not scores [N, classes, H, W] with a fixed number of classes",
               in.name.c_str());
  std::vector<Dim> map_shape = in.shape;
  map_shape[1] = fixed_dim(1);
  const int32_t class_map = add_activation(graph, "class_map", EDGERT_DTYPE_INT64, map_shape);
  graph.nodes.push_back(onnx_node("postprocess arg-max", "ArgMax", 13, {scores}, {class_map},
                                  {int_attribute("axis", 1), int_attribute("keepdims", 1),
                                   int_attribute("select_last_index", 0)}));
  graph.outputs = {class_map};
}

}  // namespace

OutputPostprocess parse_output_postprocess(const std::string& spec) {
  OutputPostprocess p;
  const size_t colon = spec.find(':');
  p.type = spec.substr(0, colon);
  if (p.type == "segmentation" && colon == std::string::npos) return p;
  if (p.type != "classification")
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "--postprocess '%s': must be classification, classification:K or segmentation", spec.c_str());
  if (colon == std::string::npos) return p;
  char* end = nullptr;
  const long long k = std::strtoll(spec.c_str() + colon + 1, &end, 10);
  if (end == spec.c_str() + colon + 1 || *end != '\0' || k < 1 || k > 1000)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--postprocess '%s': K must be 1..1000", spec.c_str());
  p.top_k = k;
  return p;
}

void append_output_postprocess(Model& model, const OutputPostprocess& postprocess) {
  Graph& graph = model.graphs[0];
  if (graph.outputs.size() != 1)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--postprocess %s: the model has %zu outputs; it reduces one",
               postprocess.type.c_str(), graph.outputs.size());
  if (graph.values[graph.outputs[0]].dtype != EDGERT_DTYPE_FLOAT32)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--postprocess %s: output '%s' is not float32", postprocess.type.c_str(),
               graph.values[graph.outputs[0]].name.c_str());
  if (postprocess.type == "classification") append_classification(graph, postprocess.top_k);
  else append_segmentation(graph);
}

}  // namespace edgert::builder
