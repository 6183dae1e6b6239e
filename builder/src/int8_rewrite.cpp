#include "int8_rewrite.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "passes/graph_rewrite.h"
#include "passes/pass_manager.h"

namespace edgert::builder {
namespace {

constexpr const char* kMicrosoft = "com.microsoft";

bool is_float32_activation(const Value& v) { return v.dtype == EDGERT_DTYPE_FLOAT32 && !v.is_constant(); }

int32_t add_constant(Graph& graph, const std::string& name, edgert_dtype dtype, const std::vector<int64_t>& dims,
                     const void* data, size_t bytes) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.rank_known = true;
  for (int64_t d : dims) v.shape.push_back(fixed_dim(d));
  auto storage = std::make_shared<std::vector<uint8_t>>(bytes);
  if (bytes) std::memcpy(storage->data(), data, bytes);
  v.data = std::move(storage);
  return graph.add_value(std::move(v));
}

class Int8Rewriter {
 public:
  Int8Rewriter(Graph& graph, const QuantizationTable& quantization, const Int8RewriteOptions& options,
               Int8RewriteReport& report)
      : graph_(graph), uses_(graph), options_(options), report_(report) {
    const size_t n = graph.values.size();
    quant_.resize(n);
    has_quant_.assign(n, false);
    for (size_t v = 0; v < n; ++v) {
      auto it = quantization.find(graph.values[v].name);
      if (it != quantization.end() && is_float32_activation(graph.values[v])) {
        quant_[v] = it->second;
        has_quant_[v] = true;
      }
    }
    twin_.assign(n, -1);
    float_pending_.assign(n, false);
    original_values_ = n;
    absorbed_.assign(graph.nodes.size(), false);
    for (int32_t o : graph.outputs) graph_output_.insert(o);
  }

  int run() {
    unify_concat_inputs();
    std::vector<Node> nodes = std::move(graph_.nodes);
    graph_.nodes.clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (absorbed_[i]) continue;
      Node& node = nodes[i];
      if (!options_.keep_float.count(node.name) && rewrite(nodes, static_cast<int32_t>(i))) continue;
      if (options_.keep_float.count(node.name))
        node.precision_note = options_.fell_back.count(node.name) ? "float32: fell back (accuracy guard)"
                                                                  : "float32: forced (--layer-precisions)";
      else if (const auto why = kept_why_.find(node.name); why != kept_why_.end())
        node.precision_note = "float32: " + why->second;
      for (int32_t v : node.inputs)
        if (v >= 0) materialize_float(v);
      graph_.nodes.push_back(std::move(node));
    }
    for (int32_t o : graph_.outputs) materialize_float(o);
    if (options_.expose_uint8_tensors) {
      std::set<int32_t> outputs(graph_.outputs.begin(), graph_.outputs.end());
      for (size_t v = 0; v < original_values_; ++v)
        if (twin_[v] >= 0) {
          materialize_float(static_cast<int32_t>(v));
          if (outputs.insert(static_cast<int32_t>(v)).second) graph_.outputs.push_back(static_cast<int32_t>(v));
        }
    }
    return made_;
  }

 private:
  // A Concat's inputs read by nothing else take its output's quantization: their producers
  // then write the Concat's scale and the Concat copies bytes.
  void unify_concat_inputs() {
    for (const Node& node : graph_.nodes) {
      if (!is_op(node, "Concat") || node.outputs.size() != 1 || !has_quant_[node.outputs[0]]) continue;
      for (int32_t v : node.inputs)
        if (v >= 0 && has_quant_[v] && uses_.reader_count(v) == 1 && !graph_output_.count(v))
          quant_[v] = quant_[node.outputs[0]];
    }
  }

  void grow(int32_t v) {
    const size_t n = static_cast<size_t>(v) + 1;
    if (quant_.size() < n) {
      quant_.resize(n);
      has_quant_.resize(n, false);
      twin_.resize(n, -1);
      float_pending_.resize(n, false);
    }
  }

  int32_t scale_constant(float scale, const std::string& name) {
    return add_constant(graph_, name + "::scale", EDGERT_DTYPE_FLOAT32, {}, &scale, sizeof scale);
  }
  int32_t zero_point_constant(int32_t zero_point, const std::string& name) {
    const uint8_t z = static_cast<uint8_t>(zero_point);
    return add_constant(graph_, name + "::zero_point", EDGERT_DTYPE_UINT8, {}, &z, 1);
  }

  // The uint8 twin of float value v, quantizing it (a QuantizeLinear after its producer) when
  // no int8 node made it.
  int32_t need_uint8(int32_t v) {
    if (twin_[v] >= 0) return twin_[v];
    const std::string name = graph_.values[v].name;  // a copy: adding constants moves the values
    Node q;
    q.name = name + "::quantize";
    q.op_type = "QuantizeLinear";
    q.opset = 13;
    q.inputs = {v, scale_constant(quant_[v].scale, name), zero_point_constant(quant_[v].zero_point, name)};
    q.outputs = {new_uint8_value(v)};
    graph_.nodes.push_back(std::move(q));
    ++report_.quantize;
    return twin_[v];
  }

  int32_t new_uint8_value(int32_t v) {
    Value u;
    u.name = graph_.values[v].name + "::u8";
    u.dtype = EDGERT_DTYPE_UINT8;
    const int32_t index = graph_.add_value(std::move(u));
    grow(index);
    twin_[v] = index;
    report_.uint8_tensors[graph_.values[v].name] = quant_[v];
    return index;
  }

  // Float value v computed by an int8 node: a DequantizeLinear writes it before its first float
  // reader (or as an engine output).
  void materialize_float(int32_t v) {
    if (!float_pending_[v]) return;
    float_pending_[v] = false;
    const std::string name = graph_.values[v].name;  // a copy: adding constants moves the values
    Node dq;
    dq.name = name + "::dequantize";
    dq.op_type = "DequantizeLinear";
    dq.opset = 13;
    dq.inputs = {twin_[v], scale_constant(quant_[v].scale, name), zero_point_constant(quant_[v].zero_point, name)};
    dq.outputs = {v};
    graph_.nodes.push_back(std::move(dq));
    ++report_.dequantize;
  }

  // Output v of an int8 node: its uint8 twin, the float value pending.
  int32_t int8_output(int32_t v) {
    const int32_t u = new_uint8_value(v);
    float_pending_[v] = true;
    return u;
  }

  bool usable_input(int32_t v) const { return v >= 0 && v < static_cast<int32_t>(has_quant_.size()) && has_quant_[v]; }
  // A value an int8 node may write: quantized, and not an engine output (the model's results stay
  // float32: quantizing them to 256 levels would add its own error to every output).
  bool usable_output(int32_t v) const { return usable_input(v) && !graph_output_.count(v); }

  // The Relu or Clip reading y alone whose output's quantization saturates where it clips
  // (the int8 node then writes that output and the activation is absorbed): its node index, or
  // -1 when there is none (the int8 node writes y).
  int32_t absorbable_activation(const std::vector<Node>& nodes, int32_t y) const {
    const int32_t reader = uses_.sole_reader(y);
    if (reader < 0 || graph_output_.count(y)) return -1;
    const Node& a = nodes[reader];
    if (a.outputs.size() != 1 || a.inputs.empty() || a.inputs[0] != y || !usable_output(a.outputs[0])) return -1;
    if (options_.keep_float.count(a.name)) return -1;
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (is_op(a, "Relu")) {
      lo = 0;
    } else if (is_op(a, "Clip")) {
      if (const Attribute* at = a.attribute("min")) lo = at->f;
      if (const Attribute* at = a.attribute("max")) hi = at->f;
      for (size_t slot : {size_t{1}, size_t{2}}) {
        if (a.inputs.size() <= slot || a.inputs[slot] < 0) continue;
        const std::vector<double> bound = constant_as_doubles(graph_.values[a.inputs[slot]]);
        if (bound.size() != 1) return -1;
        (slot == 1 ? lo : hi) = bound[0];
      }
    } else {
      return -1;
    }
    const ActivationQuantization& q = quant_[a.outputs[0]];
    const double half = 0.5 * q.scale;
    if (q.scale * (0.0 - q.zero_point) < lo - half || q.scale * (255.0 - q.zero_point) > hi + half) return -1;
    return reader;
  }

  // The value an int8 node producing y writes (y, or the output of the activation it absorbs)
  // and the absorbed node (-1: none); -1 as the value when that value has no quantization.
  std::pair<int32_t, int32_t> int8_destination(const std::vector<Node>& nodes, int32_t y) const {
    const int32_t activation = absorbable_activation(nodes, y);
    if (activation >= 0) return {nodes[activation].outputs[0], activation};
    return {usable_output(y) ? y : -1, -1};
  }

  void absorb(int32_t activation) {
    if (activation < 0) return;
    absorbed_[activation] = true;
    ++report_.absorbed_activations;
  }

  // After `made`'s inputs and outputs are set: the layer, by the float tensors of the node it
  // replaced (with an absorbed activation's output in place of the node's own).
  void record(Node& made, const Node& replaced, int32_t output = -1) {
    made.precision_note = "int8: quantized";
    report_.replaced.emplace_back(made.name, replaced.name);
    Int8RewriteReport::Layer layer;
    layer.name = replaced.name;
    for (int32_t v : replaced.inputs)
      if (v >= 0 && usable_input(v)) layer.inputs.push_back(graph_.values[v].name);
    if (output >= 0) {
      layer.outputs.push_back(graph_.values[output].name);
    } else {
      for (int32_t v : replaced.outputs)
        if (v >= 0) layer.outputs.push_back(graph_.values[v].name);
    }
    report_.layers.push_back(std::move(layer));
    ++made_;
  }

  bool rewrite(const std::vector<Node>& nodes, int32_t index) {
    const Node& node = nodes[index];
    if (is_op(node, "Conv")) return rewrite_conv(nodes, index);
    if (is_op(node, "Gemm")) return rewrite_gemm(nodes, index);
    if (is_op(node, "Add")) return rewrite_add(nodes, index);
    if (is_op(node, "Mul")) return rewrite_mul(node);
    if (is_op(node, "GlobalAveragePool")) return rewrite_global_average(node);
    if (rewrite_lookup(nodes, index)) return true;
    if (is_op(node, "MaxPool") || is_op(node, "Concat") || is_op(node, "Reshape") || is_op(node, "Flatten") ||
        is_op(node, "Transpose") || is_op(node, "Squeeze") || is_op(node, "Unsqueeze") || is_op(node, "Slice") ||
        is_op(node, "Split"))
      return rewrite_move(node);
    return false;
  }

  void keep(const Node& node, const char* why) {
    report_.kept_float.push_back(node.name + ": " + why);
    kept_why_[node.name] = why;
  }

  bool rewrite_conv(const std::vector<Node>& nodes, int32_t index) {
    const Node& node = nodes[index];
    if (node.inputs.size() < 2 || node.outputs.size() != 1) return false;
    const int32_t x = node.inputs[0], w = node.inputs[1];
    const int32_t b = node.inputs.size() > 2 ? node.inputs[2] : -1;
    const Value& wv = graph_.values[w];
    const bool one_d = wv.shape.size() == 3;
    if (!wv.is_constant() || wv.dtype != EDGERT_DTYPE_FLOAT32 || (wv.shape.size() != 4 && !one_d)) {
      keep(node, "weights are not a constant float32 3-D or 4-D tensor");
      return false;
    }
    if (b >= 0 && (!graph_.values[b].is_constant() || graph_.values[b].dtype != EDGERT_DTYPE_FLOAT32)) {
      keep(node, "bias is not a constant float32 tensor");
      return false;
    }
    const Attribute* group = node.attribute("group");
    if (options_.dense_convolutions_only && group && group->i != 1) {
      keep(node, "grouped convolution (the GPU's INT8 convolution is dense; it runs in float there)");
      return false;
    }
    const auto [y, activation] = int8_destination(nodes, node.outputs[0]);
    if (!usable_input(x) || y < 0) {
      keep(node, graph_output_.count(node.outputs[0]) ? "writes an engine output (kept float32)"
                                                      : "input or output not quantized");
      return false;
    }
    absorb(activation);
    if (one_d) return rewrite_conv_1d(node, x, b, y);
    Node conv = qlinear_conv(node.name, x, wv, b >= 0 ? &graph_.values[b] : nullptr, y);
    conv.attributes = node.attributes;
    conv.inputs[0] = need_uint8(x);
    conv.outputs = {int8_output(y)};
    record(conv, node, y);
    ++report_.convolutions;
    graph_.nodes.push_back(std::move(conv));
    return true;
  }

  // A 1-D convolution as the 2-D one over [N, C, 1, W] (kernel 1 x k, no padding along the
  // height), between Reshapes: the speech and signal front ends' convolutions.
  bool rewrite_conv_1d(const Node& node, int32_t x, int32_t b, int32_t y) {
    Value weights = graph_.values[node.inputs[1]];
    weights.shape.insert(weights.shape.begin() + 2, fixed_dim(1));
    Node conv = qlinear_conv(node.name, x, weights, b >= 0 ? &graph_.values[b] : nullptr, y);
    for (const Attribute& a : node.attributes) {
      Attribute two_d = a;
      if (a.name == "kernel_shape" || a.name == "strides" || a.name == "dilations") {
        two_d.ints.insert(two_d.ints.begin(), 1);
      } else if (a.name == "pads" && a.ints.size() == 2) {
        two_d.ints = {0, a.ints[0], 0, a.ints[1]};
      }
      conv.attributes.push_back(std::move(two_d));
    }
    between_reshapes(std::move(conv), node, x, y, {0, 0, 1, -1}, {0, 0, -1});
    return true;
  }

  // `conv` (an int8 convolution made for `node`, reading x, writing y) between a Reshape of x's
  // uint8 twin to `to_image` and one of its output to `back` (Reshape's shapes: 0 keeps a
  // dimension, -1 takes the rest) that writes y's twin.
  void between_reshapes(Node conv, const Node& node, int32_t x, int32_t y, const std::vector<int64_t>& to_image,
                        const std::vector<int64_t>& back) {
    const std::string& name = node.name;
    conv.inputs[0] = reshape(name + "::to_image", need_uint8(x),
                             add_constant(graph_, name + "::image_shape", EDGERT_DTYPE_INT64,
                                          {static_cast<int64_t>(to_image.size())}, to_image.data(),
                                          to_image.size() * sizeof(int64_t)));
    const int32_t image = reshape_target(name + "::image_output");
    conv.outputs = {image};
    record(conv, node, y);
    ++report_.convolutions;
    graph_.nodes.push_back(std::move(conv));
    Node out;
    out.name = name + "::from_image";
    out.op_type = "Reshape";
    out.opset = 14;
    out.inputs = {image, add_constant(graph_, name + "::output_shape", EDGERT_DTYPE_INT64,
                                      {static_cast<int64_t>(back.size())}, back.data(), back.size() * sizeof(int64_t))};
    out.outputs = {int8_output(y)};
    graph_.nodes.push_back(std::move(out));
  }

  // A new uint8 value named `name`::u8 that no float value has as its twin.
  int32_t reshape_target(const std::string& name) {
    Value out;
    out.name = name + "::u8";
    out.dtype = EDGERT_DTYPE_UINT8;
    const int32_t index = graph_.add_value(std::move(out));
    grow(index);
    return index;
  }

  // QLinearConv named `name` of float weights `wv` ([M, C, kh, kw]; per output channel
  // symmetric int8) and bias `bv` (int32 at x_scale * w_scale), from x's quantization to y's.
  // The caller sets the attributes, input 0 (x in uint8) and the output.
  Node qlinear_conv(const std::string& name, int32_t x, const Value& weights, const Value* bias_value, int32_t y) {
    // Copies (the data is shared): adding constants below may move graph_.values.
    const Value wv = weights;
    const std::optional<Value> bv = bias_value ? std::optional<Value>(*bias_value) : std::nullopt;
    const ActivationQuantization xq = quant_[x], yq = quant_[y];
    const float* w_data = reinterpret_cast<const float*>(wv.data->data());
    std::vector<int64_t> w_dims;
    for (const Dim& d : wv.shape) w_dims.push_back(d.value);
    const WeightQuantization qw =
        quantize_weights_per_channel(wv.name, std::vector<float>(w_data, w_data + wv.numel()), w_dims);
    const int64_t m = w_dims[0];
    Node conv;
    conv.name = name;
    conv.op_type = "QLinearConv";
    conv.opset = 10;
    const std::vector<int8_t> zeros(static_cast<size_t>(m), 0);
    conv.inputs = {-1,
                   scale_constant(xq.scale, graph_.values[x].name),
                   zero_point_constant(xq.zero_point, graph_.values[x].name),
                   add_constant(graph_, name + "::w_int8", EDGERT_DTYPE_INT8, w_dims, qw.values.data(), qw.values.size()),
                   add_constant(graph_, name + "::w_scale", EDGERT_DTYPE_FLOAT32, {m}, qw.scales.data(), m * sizeof(float)),
                   add_constant(graph_, name + "::w_zero_point", EDGERT_DTYPE_INT8, {m}, zeros.data(), zeros.size()),
                   scale_constant(yq.scale, graph_.values[y].name),
                   zero_point_constant(yq.zero_point, graph_.values[y].name)};
    if (bv) {
      const float* bias = reinterpret_cast<const float*>(bv->data->data());
      const std::vector<int32_t> qb =
          quantize_bias(bv->name, std::vector<float>(bias, bias + bv->numel()), xq.scale, qw.scales);
      conv.inputs.push_back(
          add_constant(graph_, name + "::bias_int32", EDGERT_DTYPE_INT32, {m}, qb.data(), qb.size() * sizeof(int32_t)));
    }
    return conv;
  }

  // Gemm(A [N, K], W constant, bias constant) as a 1x1 QLinearConv over [N, K, 1, 1] between two
  // Reshapes (the classifier's last layer: its weights read as int8, a quarter of the bytes).
  bool rewrite_gemm(const std::vector<Node>& nodes, int32_t index) {
    const Node& node = nodes[index];
    if (node.inputs.size() < 2 || node.outputs.size() != 1) return false;
    const int32_t a = node.inputs[0], w = node.inputs[1];
    const int32_t c = node.inputs.size() > 2 ? node.inputs[2] : -1;
    auto attr = [&](const char* name, double fallback) {
      const Attribute* at = node.attribute(name);
      return at ? (at->type == EDGERT_ATTR_FLOAT ? static_cast<double>(at->f) : static_cast<double>(at->i)) : fallback;
    };
    if (attr("alpha", 1) != 1 || attr("beta", 1) != 1 || attr("transA", 0) != 0) return false;
    const bool trans_b = attr("transB", 0) != 0;
    const Value& wv = graph_.values[w];
    if (!wv.is_constant() || wv.dtype != EDGERT_DTYPE_FLOAT32 || wv.shape.size() != 2) return false;
    // A is 2-D by Gemm's definition (its shape may be unknown here: a dynamic batch, no profile).
    if (twin_[a] < 0 || !usable_input(a)) return false;
    const int64_t m = wv.shape[trans_b ? 0 : 1].value, k = wv.shape[trans_b ? 1 : 0].value;
    if (c >= 0) {
      const Value& cv = graph_.values[c];
      if (!cv.is_constant() || cv.dtype != EDGERT_DTYPE_FLOAT32 || cv.numel() != m) return false;
    }
    const auto [y, activation] = int8_destination(nodes, node.outputs[0]);
    if (y < 0) return false;
    absorb(activation);
    // W as [M, K, 1, 1] (transposed from [K, M] without transB).
    const float* src = reinterpret_cast<const float*>(wv.data->data());
    std::vector<float> w4(static_cast<size_t>(m * k));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) w4[i * k + j] = trans_b ? src[i * k + j] : src[j * m + i];
    Value weights;
    weights.name = wv.name;
    weights.dtype = EDGERT_DTYPE_FLOAT32;
    weights.rank_known = true;
    weights.shape = {fixed_dim(m), fixed_dim(k), fixed_dim(1), fixed_dim(1)};
    weights.data = std::make_shared<std::vector<uint8_t>>(reinterpret_cast<const uint8_t*>(w4.data()),
                                                           reinterpret_cast<const uint8_t*>(w4.data() + w4.size()));
    between_reshapes(qlinear_conv(node.name, a, weights, c >= 0 ? &graph_.values[c] : nullptr, y), node, a, y,
                     {0, -1, 1, 1}, {0, -1});
    return true;
  }

  // Reshape(`data`, `shape`) named `name`, to a new uint8 value.
  int32_t reshape(const std::string& name, int32_t data, int32_t shape) {
    const int32_t index = reshape_target(name);
    Node n;
    n.name = name;
    n.op_type = "Reshape";
    n.opset = 14;
    n.inputs = {data, shape};
    n.outputs = {index};
    graph_.nodes.push_back(std::move(n));
    return index;
  }

  bool rewrite_add(const std::vector<Node>& nodes, int32_t index) {
    const Node& node = nodes[index];
    if (node.inputs.size() != 2 || node.outputs.size() != 1) return false;
    const int32_t a = node.inputs[0], b = node.inputs[1];
    const auto [c, activation] = int8_destination(nodes, node.outputs[0]);
    if (!usable_input(a) || !usable_input(b) || c < 0) return false;
    if (!graph_.values[a].same_shape_as(graph_.values[b])) {
      keep(node, "operands of different shapes");
      return false;
    }
    absorb(activation);
    binary(node, "QLinearAdd", a, b, c);
    ++report_.adds;
    return true;
  }

  // com.microsoft `op_type`(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
  // C_zero_point) in place of `node`, writing c's uint8 twin.
  void binary(const Node& node, const char* op_type, int32_t a, int32_t b, int32_t c) {
    Node made;
    made.name = node.name;
    made.domain = kMicrosoft;
    made.op_type = op_type;
    made.opset = 1;
    for (int32_t v : {a, b}) {
      const std::string vn = graph_.values[v].name;  // a copy: need_uint8 may move the values
      made.inputs.push_back(need_uint8(v));
      made.inputs.push_back(scale_constant(quant_[v].scale, vn));
      made.inputs.push_back(zero_point_constant(quant_[v].zero_point, vn));
    }
    made.inputs.push_back(scale_constant(quant_[c].scale, graph_.values[c].name));
    made.inputs.push_back(zero_point_constant(quant_[c].zero_point, graph_.values[c].name));
    made.outputs = {int8_output(c)};
    record(made, node, c);
    graph_.nodes.push_back(std::move(made));
  }

  // A product of two uint8 tensors, one of the output's shape and the other of it or
  // broadcast over it (squeeze-excitation's [N, C, 1, 1] channel scale).
  bool rewrite_mul(const Node& node) {
    if (node.inputs.size() != 2 || node.outputs.size() != 1) return false;
    const int32_t a = node.inputs[0], b = node.inputs[1], c = node.outputs[0];
    if (!usable_input(a) || !usable_input(b) || !usable_output(c)) return false;
    if (!graph_.values[a].same_shape_as(graph_.values[c]) && !graph_.values[b].same_shape_as(graph_.values[c]))
      return false;
    binary(node, "QLinearMul", a, b, c);
    ++report_.muls;
    return true;
  }

  bool rewrite_global_average(const Node& node) {
    if (node.inputs.size() != 1 || node.outputs.size() != 1) return false;
    const int32_t x = node.inputs[0], y = node.outputs[0];
    if (!usable_input(x) || !usable_output(y)) return false;
    Node pool;
    pool.name = node.name;
    pool.domain = kMicrosoft;
    pool.op_type = "QLinearGlobalAveragePool";
    pool.opset = 1;
    pool.attributes.push_back(int_attribute("channels_last", 0));
    pool.inputs = {need_uint8(x), scale_constant(quant_[x].scale, graph_.values[x].name),
                   zero_point_constant(quant_[x].zero_point, graph_.values[x].name),
                   scale_constant(quant_[y].scale, graph_.values[y].name),
                   zero_point_constant(quant_[y].zero_point, graph_.values[y].name)};
    pool.outputs = {int8_output(y)};
    record(pool, node);
    ++report_.pools;
    graph_.nodes.push_back(std::move(pool));
    return true;
  }

  // An elementwise activation of a uint8 tensor as a table: one op of kLookupOps, or SiLU
  // written as Sigmoid(v) -> s, Mul(v, s).
  bool rewrite_lookup(const std::vector<Node>& nodes, int32_t index) {
    const Node& node = nodes[index];
    if (options_.plugins.empty() || !node.domain.empty() || node.inputs.empty() || node.outputs.size() != 1) return false;
    const int32_t v = node.inputs[0];
    if (v < 0 || !usable_input(v) || twin_[v] < 0) return false;  // quantizing only for a table gains nothing
    std::vector<const Node*> chain = {&node};
    int32_t out = node.outputs[0];
    int32_t absorbed = -1;
    if (node.op_type == "Sigmoid" && uses_.reader_count(v) == 2) {
      const int32_t mul = uses_.sole_reader(out);
      if (mul < 0 || graph_output_.count(out)) return false;
      const Node& m = nodes[mul];
      if (!is_op(m, "Mul") || m.inputs.size() != 2 || m.outputs.size() != 1 ||
          !((m.inputs[0] == v && m.inputs[1] == out) || (m.inputs[0] == out && m.inputs[1] == v)))
        return false;
      chain.push_back(&m);
      out = m.outputs[0];
      absorbed = mul;
    } else {
      static const std::set<std::string> kLookupOps = {"HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "LeakyRelu",
                                                       "Elu", "Selu", "Softplus", "Softsign", "Gelu", "Relu", "Clip",
                                                       "Celu", "Mish"};
      if (!kLookupOps.count(node.op_type)) return false;
      for (size_t i = 1; i < node.inputs.size(); ++i)
        if (node.inputs[i] >= 0 && !graph_.values[node.inputs[i]].is_constant()) return false;
    }
    if (!usable_output(out) || !graph_.values[v].same_shape_as(graph_.values[out])) return false;
    std::vector<uint8_t> table;
    if (!lookup_table(chain, v, quant_[v], quant_[out], table)) return false;
    if (absorbed >= 0) absorbed_[absorbed] = true;
    Node lookup;
    lookup.name = chain.size() > 1 ? fused_name(node.name, chain.back()->name) : node.name;
    lookup.domain = "edgert";
    lookup.op_type = "QLookup";
    lookup.opset = 1;
    lookup.inputs = {twin_[v], add_constant(graph_, lookup.name + "::table", EDGERT_DTYPE_UINT8, {256}, table.data(), 256)};
    lookup.outputs = {int8_output(out)};
    record(lookup, node, out);
    ++report_.lookups;
    graph_.nodes.push_back(std::move(lookup));
    return true;
  }

  // table[q] = quantize(f(dequantize(q))) with the kernels of the chain's ops (QuantizeLinear's
  // and DequantizeLinear's float formulas).
  bool lookup_table(const std::vector<const Node*>& chain, int32_t v, const ActivationQuantization& in,
                    const ActivationQuantization& out, std::vector<uint8_t>& table) const {
    Graph scratch;
    std::vector<float> levels(256);
    for (int q = 0; q < 256; ++q) levels[q] = static_cast<float>(q - in.zero_point) * in.scale;
    std::map<int32_t, int32_t> local;  // value of graph_ -> value of scratch
    local[v] = add_constant(scratch, "levels", EDGERT_DTYPE_FLOAT32, {256}, levels.data(), levels.size() * sizeof(float));
    int32_t last = -1;
    for (const Node* n : chain) {
      Node copy = *n;
      for (int32_t& input : copy.inputs) {
        if (input < 0) continue;
        auto it = local.find(input);
        if (it == local.end()) {
          if (!graph_.values[input].is_constant()) return false;
          it = local.emplace(input, scratch.add_value(graph_.values[input])).first;
        }
        input = it->second;
      }
      Value result;
      result.name = graph_.values[n->outputs[0]].name;
      copy.outputs = {scratch.add_value(std::move(result))};
      local[n->outputs[0]] = copy.outputs[0];
      scratch.nodes.push_back(copy);
      if (!compute_node_outputs(scratch, scratch.nodes.back(), options_.plugins, 4096)) return false;
      last = copy.outputs[0];
    }
    const Value& y = scratch.values[last];
    if (y.dtype != EDGERT_DTYPE_FLOAT32 || !y.data || y.data->size() != 256 * sizeof(float)) return false;
    const float* f = reinterpret_cast<const float*>(y.data->data());
    table.resize(256);
    for (int q = 0; q < 256; ++q) {
      const double r = static_cast<double>(std::nearbyint(f[q] / out.scale)) + out.zero_point;
      table[q] = static_cast<uint8_t>(std::isnan(r) ? 0 : std::clamp(r, 0.0, 255.0));
    }
    return true;
  }

  // Ops that move or select bytes: on uint8 when their data input already is (a Concat when all
  // its inputs share its quantization), their outputs keeping that quantization.
  bool rewrite_move(const Node& node) {
    if (node.inputs.empty() || node.inputs[0] < 0) return false;
    const bool concat = is_op(node, "Concat");
    if (is_op(node, "MaxPool") && node.outputs.size() != 1) return false;  // Indices are float-position data
    const int32_t x = node.inputs[0];
    if (!usable_input(x)) return false;
    const ActivationQuantization q = quant_[x];
    if (concat) {
      for (int32_t v : node.inputs)
        if (!usable_input(v) || quant_[v].scale != q.scale || quant_[v].zero_point != q.zero_point) return false;
    } else if (twin_[x] < 0) {
      return false;  // quantizing only to move bytes gains nothing
    }
    Node moved = node;
    const size_t data_inputs = concat ? node.inputs.size() : 1;
    for (size_t i = 0; i < data_inputs; ++i) moved.inputs[i] = need_uint8(node.inputs[i]);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int32_t y = node.outputs[o];
      quant_[y] = q;
      has_quant_[y] = true;
      moved.outputs[o] = int8_output(y);
    }
    record(moved, node);
    ++report_.moves;
    graph_.nodes.push_back(std::move(moved));
    return true;
  }

  Graph& graph_;
  ValueUses uses_;  // of the graph as it was: readers of the original values
  const Int8RewriteOptions& options_;
  Int8RewriteReport& report_;
  std::vector<ActivationQuantization> quant_;
  std::vector<bool> has_quant_;
  std::vector<int32_t> twin_;
  std::vector<bool> float_pending_;
  std::vector<bool> absorbed_;
  std::map<std::string, std::string> kept_why_;  // node -> why the rewrite left it float
  std::set<int32_t> graph_output_;
  size_t original_values_ = 0;
  int made_ = 0;
};

}  // namespace

int rewrite_int8(Graph& graph, const QuantizationTable& quantization, const Int8RewriteOptions& options,
                 Int8RewriteReport* report) {
  Int8RewriteReport local;
  Int8Rewriter rewriter(graph, quantization, options, report ? *report : local);
  return rewriter.run();
}

std::vector<std::string> quantizable_activations(const Graph& graph) {
  std::vector<std::string> names;
  std::vector<bool> seen(graph.values.size(), false);
  auto take = [&](int32_t v) {
    if (v < 0 || seen[v] || !is_float32_activation(graph.values[v])) return;
    seen[v] = true;
    names.push_back(graph.values[v].name);
  };
  for (int32_t v : graph.inputs) take(v);
  for (const Node& node : graph.nodes)
    for (int32_t v : node.outputs) take(v);
  return names;
}

}  // namespace edgert::builder
