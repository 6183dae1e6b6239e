#include "qdq_export.h"

#include <cstring>
#include <optional>

#include "passes/graph_rewrite.h"

namespace edgert::builder {
namespace {

int32_t add_constant(Graph& graph, const std::string& name, edgert_dtype dtype, int64_t count, const void* data,
                     size_t element_bytes) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.rank_known = true;
  v.shape = {fixed_dim(count)};
  auto storage = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(count) * element_bytes);
  if (!storage->empty()) std::memcpy(storage->data(), data, storage->size());
  v.data = std::move(storage);
  return graph.add_value(std::move(v));
}

int32_t add_scalar(Graph& graph, const std::string& name, edgert_dtype dtype, const void* data, size_t bytes) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.rank_known = true;
  v.data = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(data),
                                                  static_cast<const uint8_t*>(data) + bytes);
  return graph.add_value(std::move(v));
}

int32_t add_float_value(Graph& graph, const std::string& name) {
  Value v;
  v.name = name;
  v.dtype = EDGERT_DTYPE_FLOAT32;
  return graph.add_value(std::move(v));
}

Node linear(const char* op, const std::string& name, std::vector<int32_t> inputs, int32_t output, bool per_axis) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.opset = 13;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  if (per_axis) n.attributes.push_back(int_attribute("axis", 0));
  return n;
}

// A DequantizeLinear from the int8 node's constant input `slot` (its scale and zero point at
// slots scale_slot and scale_slot + 1) to a new float value; for the bias (slot 8) the scale is
// x_scale * w_scale and the zero point int32 zeros.
// gemm_trans_b: the weights of a Gemm rewritten as a 1x1 QLinearConv, written back in the Gemm's
// layout ([M, K] with transB, per axis 0; else [K, M], per axis 1) instead of [M, K, 1, 1].
// conv_weight_shape: the float Conv's weight shape, which the int8 weights take back.
int32_t dequantized_constant(Graph& out, const Graph& int8_graph, const Node& qconv, int slot, std::vector<Node>& nodes,
                             std::optional<bool> gemm_trans_b = std::nullopt,
                             const std::vector<Dim>* conv_weight_shape = nullptr) {
  Value q = int8_graph.values[qconv.inputs[slot]];
  const int64_t m = q.shape[0].value;
  int64_t axis = 0;
  if (slot == 3 && conv_weight_shape) q.shape = *conv_weight_shape;  // a 1-D Conv's [M, C, k], not [M, C, 1, k]
  if (slot == 3 && gemm_trans_b) {
    const int64_t k = q.numel() / m;
    if (*gemm_trans_b) {
      q.shape = {fixed_dim(m), fixed_dim(k)};
    } else {
      auto transposed = std::make_shared<std::vector<uint8_t>>(q.data->size());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < k; ++j) (*transposed)[j * m + i] = (*q.data)[i * k + j];
      q.data = std::move(transposed);
      q.shape = {fixed_dim(k), fixed_dim(m)};
      axis = 1;
    }
  }
  const int32_t data = out.add_value(q);
  int32_t scale = -1, zero = -1;
  if (slot == 3) {
    scale = out.add_value(int8_graph.values[qconv.inputs[4]]);
    zero = out.add_value(int8_graph.values[qconv.inputs[5]]);
  } else {
    const float x_scale = *reinterpret_cast<const float*>(int8_graph.values[qconv.inputs[1]].data->data());
    const float* w_scale = reinterpret_cast<const float*>(int8_graph.values[qconv.inputs[4]].data->data());
    std::vector<float> scales(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) scales[c] = x_scale * w_scale[c];
    const std::vector<int32_t> zeros(static_cast<size_t>(m), 0);
    scale = add_constant(out, q.name + "::scale", EDGERT_DTYPE_FLOAT32, m, scales.data(), sizeof(float));
    zero = add_constant(out, q.name + "::zero_point", EDGERT_DTYPE_INT32, m, zeros.data(), sizeof(int32_t));
  }
  const int32_t dequantized = add_float_value(out, q.name + "::dequantized");
  Node dq = linear("DequantizeLinear", q.name + "::dequantize", {data, scale, zero}, dequantized, true);
  dq.attributes = {int_attribute("axis", axis)};
  nodes.push_back(std::move(dq));
  return dequantized;
}

}  // namespace

int insert_qdq(Graph& graph, const QuantizationTable& quantization, const Int8RewriteOptions& options,
               Int8RewriteReport* report) {
  Graph int8_graph = graph;
  Int8RewriteReport local;
  Int8RewriteReport& r = report ? *report : local;
  rewrite_int8(int8_graph, quantization, options, &r);

  // The int8 convolutions by the name of the Conv they replaced (the same name).
  std::map<std::string, const Node*> qconv;
  for (const Node& n : int8_graph.nodes)
    if (n.op_type == "QLinearConv") qconv[n.name] = &n;

  std::vector<int32_t> dequantized(graph.values.size(), -1);  // float value -> its Q/DQ output
  std::vector<Node> front, nodes;
  int pairs = 0;
  auto pair_after = [&](int32_t v, std::vector<Node>& into) {
    auto it = r.uint8_tensors.find(graph.values[v].name);
    if (it == r.uint8_tensors.end() || dequantized[v] >= 0) return;
    const std::string name = graph.values[v].name;
    const float scale = it->second.scale;
    const uint8_t zero = it->second.zero_point;
    const int32_t s = add_scalar(graph, name + "::scale", EDGERT_DTYPE_FLOAT32, &scale, sizeof scale);
    const int32_t z = add_scalar(graph, name + "::zero_point", EDGERT_DTYPE_UINT8, &zero, 1);
    Value q;
    q.name = name + "::quantized";
    q.dtype = EDGERT_DTYPE_UINT8;
    const int32_t quantized = graph.add_value(std::move(q));
    const int32_t out = add_float_value(graph, name + "::dequantized");
    into.push_back(linear("QuantizeLinear", name + "::quantize", {v, s, z}, quantized, false));
    into.push_back(linear("DequantizeLinear", name + "::dequantize", {quantized, s, z}, out, false));
    dequantized.resize(graph.values.size(), -1);
    dequantized[v] = out;
    ++pairs;
  };
  for (int32_t v : graph.inputs) pair_after(v, front);
  std::vector<Node> original = std::move(graph.nodes);
  graph.nodes.clear();
  for (Node& node : original) {
    for (int32_t& v : node.inputs)
      if (v >= 0 && v < static_cast<int32_t>(dequantized.size()) && dequantized[v] >= 0) v = dequantized[v];
    auto conv = qconv.find(node.name);
    if ((is_op(node, "Conv") || is_op(node, "Gemm")) && conv != qconv.end()) {
      std::optional<bool> gemm_trans_b;
      if (is_op(node, "Gemm")) {
        const Attribute* trans_b = node.attribute("transB");
        gemm_trans_b = trans_b && trans_b->i != 0;
      }
      const std::vector<Dim> weight_shape = graph.values[node.inputs[1]].shape;
      node.inputs[1] = dequantized_constant(graph, int8_graph, *conv->second, 3, front, gemm_trans_b,
                                            gemm_trans_b ? nullptr : &weight_shape);
      if (node.inputs.size() > 2 && node.inputs[2] >= 0 && conv->second->inputs.size() > 8)
        node.inputs[2] = dequantized_constant(graph, int8_graph, *conv->second, 8, front);
    }
    std::vector<int32_t> outputs = node.outputs;
    nodes.push_back(std::move(node));
    for (int32_t v : outputs)
      if (v >= 0) pair_after(v, nodes);
  }
  graph.nodes = std::move(front);
  for (Node& n : nodes) graph.nodes.push_back(std::move(n));
  return pairs;
}

}  // namespace edgert::builder
