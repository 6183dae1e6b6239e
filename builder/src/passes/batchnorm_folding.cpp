// BatchNormalization after Conv or Gemm, in inference mode and with constant parameters, is a
// per-channel affine map y = s * x + t with s = scale / sqrt(var + eps), t = bias - mean * s.
// It folds into the producer's weights (W' = W * s per output channel) and bias
// (B' = (B - mean) * s + bias), computed in double and stored as float32. The BN node goes
// away and the producer is renamed "conv + bn".
#include <cmath>
#include <cstring>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

struct Affine {
  std::vector<double> s, t;
};

// s and t of a BN node over `channels` channels, or empty when it cannot be folded.
Affine batchnorm_affine(const Graph& graph, const Node& bn, int64_t channels) {
  Affine a;
  if (bn.inputs.size() < 5) return a;
  const Attribute* training = bn.attribute("training_mode");
  if (training && training->i != 0) return a;
  if (bn.opset < 7) return a;  // older BN had is_test/spatial semantics; left to the kernel
  std::vector<double> p[4];
  for (int i = 0; i < 4; ++i) {
    int32_t t = bn.inputs[1 + i];
    if (t < 0 || graph.values[t].dtype != EDGERT_DTYPE_FLOAT32) return a;
    p[i] = constant_as_doubles(graph.values[t]);
    if (static_cast<int64_t>(p[i].size()) != channels) return a;
  }
  const Attribute* eps_attr = bn.attribute("epsilon");
  // The kernel adds epsilon as a float, as ONNX Runtime does.
  double eps = eps_attr ? static_cast<double>(eps_attr->f) : static_cast<double>(1e-5f);
  a.s.resize(channels);
  a.t.resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    a.s[c] = p[0][c] / std::sqrt(p[3][c] + eps);
    a.t[c] = p[1][c] - p[2][c] * a.s[c];
  }
  return a;
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

std::vector<int64_t> dims_of(const Value& v) {
  std::vector<int64_t> d;
  for (const Dim& x : v.shape) d.push_back(x.value);
  return d;
}

bool fold_into_conv(Graph& graph, Node& conv, const Node& bn) {
  if (conv.inputs.size() < 2) return false;
  const Value& w = graph.values[conv.inputs[1]];
  if (!w.is_constant() || w.dtype != EDGERT_DTYPE_FLOAT32 || !w.shape_is_static() || w.shape.size() < 3) return false;
  const int64_t m = w.shape[0].value;
  Affine a = batchnorm_affine(graph, bn, m);
  if (a.s.empty()) return false;
  std::vector<double> bias(m, 0.0);
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) {
    bias = constant_as_doubles(graph.values[conv.inputs[2]]);
    if (static_cast<int64_t>(bias.size()) != m || graph.values[conv.inputs[2]].dtype != EDGERT_DTYPE_FLOAT32) return false;
  }
  std::vector<double> weights = constant_as_doubles(w);
  const size_t per_channel = weights.size() / static_cast<size_t>(m);
  for (int64_t c = 0; c < m; ++c) {
    for (size_t i = 0; i < per_channel; ++i) weights[c * per_channel + i] *= a.s[c];
    bias[c] = bias[c] * a.s[c] + a.t[c];
  }
  std::string base = w.name;
  int32_t new_w = add_float_constant(graph, base + "_bn", dims_of(graph.values[conv.inputs[1]]), to_float(weights));
  int32_t new_b = add_float_constant(graph, base + "_bn_bias", {m}, to_float(bias));
  conv.inputs.resize(3);
  conv.inputs[1] = new_w;
  conv.inputs[2] = new_b;
  return true;
}

bool fold_into_gemm(Graph& graph, Node& gemm, const Node& bn) {
  if (gemm.inputs.size() < 2) return false;
  const Value& b = graph.values[gemm.inputs[1]];
  if (!b.is_constant() || b.dtype != EDGERT_DTYPE_FLOAT32 || !b.shape_is_static() || b.shape.size() != 2) return false;
  const Attribute* tb = gemm.attribute("transB");
  const bool trans_b = tb && tb->i != 0;
  const int64_t n = trans_b ? b.shape[0].value : b.shape[1].value;
  const int64_t k = trans_b ? b.shape[1].value : b.shape[0].value;
  Affine a = batchnorm_affine(graph, bn, n);
  if (a.s.empty()) return false;
  const Attribute* beta_attr = gemm.attribute("beta");
  const double beta = beta_attr ? beta_attr->f : 1.0;
  std::vector<double> c(n, 0.0);
  if (gemm.inputs.size() > 2 && gemm.inputs[2] >= 0) {
    const Value& cv = graph.values[gemm.inputs[2]];
    std::vector<double> given = constant_as_doubles(cv);
    if (cv.dtype != EDGERT_DTYPE_FLOAT32 || given.empty()) return false;
    // C must not vary by row: a scalar, [N] or [1, N].
    if (cv.shape.size() == 2 && cv.shape[0].value != 1) return false;
    if (given.size() == 1) c.assign(n, given[0] * beta);
    else if (static_cast<int64_t>(given.size()) == n)
      for (int64_t j = 0; j < n; ++j) c[j] = given[j] * beta;
    else return false;
  }
  std::vector<double> weights = constant_as_doubles(b);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j) weights[trans_b ? j * k + kk : kk * n + j] *= a.s[j];
  for (int64_t j = 0; j < n; ++j) c[j] = c[j] * a.s[j] + a.t[j];
  std::string base = b.name;
  int32_t new_b = add_float_constant(graph, base + "_bn", dims_of(b), to_float(weights));
  int32_t new_c = add_float_constant(graph, base + "_bn_bias", {n}, to_float(c));
  gemm.inputs.resize(3);
  gemm.inputs[1] = new_b;
  gemm.inputs[2] = new_c;
  Attribute beta_one;
  beta_one.name = "beta";
  beta_one.type = EDGERT_ATTR_FLOAT;
  beta_one.f = 1.0f;
  gemm.set_attribute(beta_one);
  return true;
}

}  // namespace

int fold_batchnorm(PassContext& context) {
  Graph& graph = context.graph;
  ValueUses uses(graph);
  std::vector<bool> dead(graph.nodes.size(), false);
  int folded = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& bn = graph.nodes[n];
    if (!is_op(bn, "BatchNormalization") || bn.inputs.empty() || bn.inputs[0] < 0) continue;
    for (size_t o = 1; o < bn.outputs.size(); ++o)
      if (uses.reader_count(bn.outputs[o]) || context.pinned[bn.outputs[o]]) goto next;
    {
      int32_t x = bn.inputs[0];
      int32_t p = uses.producer[x];
      if (p < 0 || context.pinned[x] || uses.reader_count(x) != 1 || dead[p]) continue;
      Node& producer = graph.nodes[p];
      bool ok = false;
      if (is_op(producer, "Conv")) ok = fold_into_conv(graph, producer, bn);
      else if (is_op(producer, "Gemm")) ok = fold_into_gemm(graph, producer, bn);
      if (!ok) continue;
      producer.outputs[0] = bn.outputs[0];
      producer.name = fused_name(producer.name, bn.name);
      dead[n] = true;
      ++folded;
    }
  next:;
  }
  if (folded) remove_nodes(graph, dead);
  return folded;
}

}  // namespace edgert::builder
