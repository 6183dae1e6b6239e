// Scaled dot-product attention as exporters write it, one edgert.FusedAttention node:
//
//   Q' = Q / c (or Q * c)                 optional, c a scalar constant
//   S  = MatMul(Q', Kt)                   Kt: the keys transposed, [..., D, S]; where Kt is
//                                         Transpose(K) of the last two axes (times a scalar
//                                         constant or not: torchvision's ViT scales Q and Kt
//                                         by 1/sqrt(sqrt(D)) each), the node reads K [..., S, D]
//                                         itself (keys_transposed 0) and the scale goes to the
//                                         scores: no transposed copy of the keys is made
//   S' = S * c2 (or S / c2)               optional
//   S" = S' + mask                        optional, an additive mask broadcasting over S
//   P  = Softmax(S", axis = last)
//   O  = MatMul(P, V)
//
// Around it, exports move the heads between [L, B*H, D] and [B*H, L, D] with Transposes (and
// PyTorch's scores read Kt = Transpose(K) of [L, B*H, D] with perm [1, 2, 0]). A Transpose that
// only the attention reads and that keeps its input's last axis last (Kt's: brings it to Kt's
// rows) is read through: the node reads the Transpose's input in place, its `q_perm`, `k_perm`
// or `v_perm` attribute the Transpose's perm (for keys, the perm that gives K [..., S, D]), and
// the same for the one Transpose reading the output (`y_perm`: the node writes that Transpose's
// output). The kernels take the operands by strides: four copies of each layer's heads go.
// Before that, a Gather of one constant index that only the attention reads (PyTorch 2 takes Q,
// K and V from its packed projection [L, B, 3, E] so; shuffle elimination moves the heads'
// split before it, to [L, B, 3, H, D]) is read through the same way: `q_select`, `k_select` or
// `v_select` [axis, index], and the node reads the packed projection at their offsets.
//
// ONNX's own Attention (opsets 23 and 24) becomes the same node where it is that computation:
// 4-D Q [B, H, L, D], K [B, H, S, D], V [B, H, S, Dv] with as many key heads as query heads, no
// past keys, no causal mask, no softcap, no extra outputs, and a float mask (if any) as long as
// the keys; the node reads K untransposed and its scale (default 1/sqrt(D)) goes to the scores.
// Other forms keep the Attention kernel.
//
// PyTorch's nn.MultiheadAttention (vision transformers, nn.TransformerEncoder, speech encoders)
// exports exactly this, heads folded into the batch. Fused, the CPU plugin computes each batch
// matrix's scores, mask, softmax and product while they are in cache instead of writing the
// [batch, L, S] scores to memory three times (fused_attention.cpp); the node keeps its parts'
// names, so `edgert inspect` shows what it replaced. Every value between the first and the last
// part must be read by the next part alone and be no engine output.
#include <cmath>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

// A Mul or Div of `value` by a float scalar constant, as the scale it applies; false otherwise.
// `other` receives the input that is not the constant.
bool scalar_scale(const Graph& graph, const Node& node, bool& divides, float& scale, int32_t& other) {
  const bool mul = is_op(node, "Mul"), div = is_op(node, "Div");
  if ((!mul && !div) || node.inputs.size() != 2 || node.outputs.size() != 1) return false;
  for (int side = 0; side < 2; ++side) {
    if (div && side == 0) continue;  // c / x is no scale
    const int32_t c = node.inputs[side];
    if (c < 0) return false;
    const std::vector<double> values = constant_as_doubles(graph.values[c]);
    if (values.size() != 1 || graph.values[c].dtype != EDGERT_DTYPE_FLOAT32) continue;
    divides = div;
    scale = static_cast<float>(values[0]);
    other = node.inputs[1 - side];
    return other >= 0;
  }
  return false;
}

bool is_float32(const Graph& graph, int32_t v) { return v >= 0 && graph.values[v].dtype == EDGERT_DTYPE_FLOAT32; }

// A Transpose that swaps the last two axes of its input and keeps the others in place.
bool swaps_last_two_axes(const Graph& graph, const Node& node) {
  if (!is_op(node, "Transpose") || node.inputs.size() != 1 || node.inputs[0] < 0) return false;
  const Value& x = graph.values[node.inputs[0]];
  const Attribute* perm = node.attribute("perm");
  if (!x.rank_known || x.shape.size() < 2) return false;
  const size_t rank = x.shape.size();
  if (!perm) return rank == 2;  // the default reverses the axes
  if (perm->ints.size() != rank) return false;
  for (size_t i = 0; i + 2 < rank; ++i)
    if (perm->ints[i] != static_cast<int64_t>(i)) return false;
  return perm->ints[rank - 2] == static_cast<int64_t>(rank - 1) && perm->ints[rank - 1] == static_cast<int64_t>(rank - 2);
}

// The perm of a Transpose whose perm is explicit, of 2 or more axes (its input's rank where that
// is known; the kernels check it at run time where it is not); null otherwise.
const std::vector<int64_t>* explicit_perm(const Graph& graph, const Node& node) {
  if (!is_op(node, "Transpose") || node.inputs.size() != 1 || node.inputs[0] < 0 || node.outputs.size() != 1) return nullptr;
  const Attribute* perm = node.attribute("perm");
  const Value& x = graph.values[node.inputs[0]];
  if (!perm || perm->ints.size() < 2 || (x.rank_known && perm->ints.size() != x.shape.size())) return nullptr;
  return &perm->ints;
}

// The view `perm` of a Transpose read through (see the header) when it keeps the last axis last:
// for keys given as Kt, the perm of K = Kt with its last two axes swapped. Empty otherwise.
std::vector<int64_t> operand_view(const std::vector<int64_t>& perm, bool transposed_keys) {
  std::vector<int64_t> view = perm;
  const size_t rank = view.size();
  if (transposed_keys) std::swap(view[rank - 2], view[rank - 1]);
  return view[rank - 1] == static_cast<int64_t>(rank - 1) ? view : std::vector<int64_t>{};
}

// A fixed dim (the same at every shape the engine accepts) of a value of known rank; -1 otherwise.
int64_t fixed_dim(const Value& v, size_t axis) {
  if (!v.rank_known || axis >= v.shape.size() || v.shape[axis].value < 0 || v.shape[axis].varies()) return -1;
  return v.shape[axis].value;
}

bool fuse_onnx_attention(PassContext& context, int32_t n, NodeEdits& edits) {
  Graph& graph = context.graph;
  const Node& node = graph.nodes[n];
  if (!is_op(node, "Attention") || node.inputs.size() < 3 || node.outputs.empty()) return false;
  for (size_t i = 4; i < node.inputs.size(); ++i)
    if (node.inputs[i] >= 0) return false;  // past keys and values, nonpad_kv_seqlen
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (node.outputs[i] >= 0) return false;  // present keys and values, the QK output
  const int32_t q = node.inputs[0], k = node.inputs[1], v = node.inputs[2];
  const int32_t mask = node.inputs.size() > 3 ? node.inputs[3] : -1;
  if (!is_float32(graph, q) || !is_float32(graph, k) || !is_float32(graph, v)) return false;
  for (int32_t t : {q, k, v})
    if (!graph.values[t].rank_known || graph.values[t].shape.size() != 4) return false;
  const int64_t q_heads = fixed_dim(graph.values[q], 1), k_heads = fixed_dim(graph.values[k], 1);
  const int64_t v_heads = fixed_dim(graph.values[v], 1), d = fixed_dim(graph.values[q], 3);
  if (q_heads <= 0 || q_heads != k_heads || q_heads != v_heads || d <= 0) return false;
  for (const char* off : {"is_causal", "qk_matmul_output_mode"}) {
    const Attribute* a = node.attribute(off);
    if (a && a->i != 0) return false;
  }
  const Attribute* softcap = node.attribute("softcap");
  if (softcap && softcap->f != 0.0f) return false;
  if (mask >= 0) {
    const Value& m = graph.values[mask];
    const int64_t keys = fixed_dim(graph.values[k], 2);
    if (!is_float32(graph, mask) || !m.rank_known || m.shape.empty() || keys <= 0 ||
        fixed_dim(m, m.shape.size() - 1) != keys)
      return false;  // a boolean mask, or one shorter than the keys (padded with -inf)
  }
  const Attribute* scale = node.attribute("scale");
  Node fused;
  fused.domain = kFusedDomain;
  fused.op_type = "FusedAttention";
  fused.opset = 1;
  fused.name = node.name;
  fused.inputs = {q, k, v};
  if (mask >= 0) fused.inputs.push_back(mask);
  fused.outputs = {node.outputs[0]};
  fused.set_attribute(float_attribute("score_scale", scale ? scale->f : 1.0f / std::sqrt(static_cast<float>(d))));
  fused.set_attribute(int_attribute("keys_transposed", 0));
  edits.replace(n, std::move(fused));
  return true;
}

bool fuse_at(PassContext& context, const ValueUses& uses, int32_t out_matmul, NodeEdits& edits) {
  Graph& graph = context.graph;
  if (is_op(graph.nodes[out_matmul], "Attention")) return fuse_onnx_attention(context, out_matmul, edits);
  const Node& pv = graph.nodes[out_matmul];
  if (!is_op(pv, "MatMul") || pv.inputs.size() != 2 || pv.outputs.size() != 1) return false;
  // Walks back from P one producer at a time; each step's value must be read by the next part alone.
  std::vector<int32_t> parts = {out_matmul};
  auto step_back = [&](int32_t value) -> int32_t {
    if (value < 0 || context.pinned[value] || uses.reader_count(value) != 1) return -1;
    const int32_t producer = uses.producer[value];
    if (producer < 0 || edits.dead(producer) || graph.nodes[producer].outputs.size() != 1) return -1;
    return producer;
  };
  const int32_t softmax = step_back(pv.inputs[0]);
  if (softmax < 0) return false;
  const Node& sm = graph.nodes[softmax];
  const Attribute* axis = sm.attribute("axis");
  const Value& p = graph.values[sm.outputs[0]];
  const bool last_axis = !axis || axis->i == -1 || (p.rank_known && axis->i == static_cast<int64_t>(p.shape.size()) - 1);
  if (!is_op(sm, "Softmax") || sm.opset < 13 || !last_axis || sm.inputs.size() != 1) return false;
  parts.push_back(softmax);

  int32_t value = sm.inputs[0], mask = -1;
  float score_scale = 1.0f, score_divisor = 1.0f, q_scale = 1.0f, q_divisor = 1.0f;
  int32_t node = step_back(value);
  // The mask: an Add whose other input is not the chain.
  if (node >= 0 && is_op(graph.nodes[node], "Add") && graph.nodes[node].inputs.size() == 2) {
    const Node& add = graph.nodes[node];
    const int32_t a = add.inputs[0], b = add.inputs[1];
    if (a < 0 || b < 0) return false;
    const int32_t pa = uses.producer[a];
    // The chain side is the one a MatMul or a scale produced; the mask is the other.
    auto chain_like = [&](int32_t producer) {
      if (producer < 0) return false;
      const Node& n = graph.nodes[producer];
      return is_op(n, "MatMul") || is_op(n, "Mul") || is_op(n, "Div");
    };
    const bool a_chain = chain_like(pa) && uses.reader_count(a) == 1;
    const int32_t chain = a_chain ? a : b, other = a_chain ? b : a;
    if (!is_float32(graph, other) || !chain_like(uses.producer[chain])) return false;
    mask = other;
    parts.push_back(node);
    value = chain;
    node = step_back(value);
  }
  // A scale by a constant: taken into `multiplier` or `divisor`, its other input into `value`.
  auto take_scale = [&](int32_t scale_node, float& multiplier, float& divisor, int32_t& value_in) {
    bool divides = false;
    float scale = 1.0f;
    int32_t other = -1;
    if (scale_node < 0 || !scalar_scale(graph, graph.nodes[scale_node], divides, scale, other)) return false;
    (divides ? divisor : multiplier) = scale;
    parts.push_back(scale_node);
    value_in = other;
    return true;
  };
  if (take_scale(node, score_scale, score_divisor, value)) node = step_back(value);
  if (node < 0 || !is_op(graph.nodes[node], "MatMul") || graph.nodes[node].inputs.size() != 2) return false;
  const int32_t qk = node;
  parts.push_back(qk);
  int32_t q = graph.nodes[qk].inputs[0];
  int32_t kt = graph.nodes[qk].inputs[1];
  take_scale(step_back(q), q_scale, q_divisor, q);
  std::vector<int64_t> q_perm, k_perm, v_perm, y_perm;  // operands read through Transposes
  // The keys: Kt as it is, or K before a Transpose of its last two axes, with a scale on Kt
  // moved to the scores (S = Q (c Kt) = c (Q Kt)).
  bool keys_transposed = true;
  {
    int32_t k = kt, node_k = step_back(kt);
    float k_scale = 1.0f, k_divisor = 1.0f;
    bool divides = false;
    float scale = 1.0f;
    int32_t other = -1;
    std::vector<int32_t> k_parts;
    if (node_k >= 0 && scalar_scale(graph, graph.nodes[node_k], divides, scale, other)) {
      (divides ? k_divisor : k_scale) = scale;
      k_parts.push_back(node_k);
      k = other;
      node_k = step_back(k);
    }
    // Kt as a Transpose of K's last two axes, or of any tensor whose last axis becomes Kt's
    // rows (PyTorch's Transpose(K [L, B*H, D], [1, 2, 0]); after shuffle elimination, a split
    // [L, B, H, D] with [1, 2, 3, 0]): K read through, the perm that gives K kept as k_perm.
    const std::vector<int64_t>* perm = node_k < 0 ? nullptr : explicit_perm(graph, graph.nodes[node_k]);
    std::vector<int64_t> view = perm ? operand_view(*perm, true) : std::vector<int64_t>{};
    const bool swaps = node_k >= 0 && swaps_last_two_axes(graph, graph.nodes[node_k]);
    if ((swaps || !view.empty()) && is_float32(graph, graph.nodes[node_k].inputs[0])) {
      k_parts.push_back(node_k);
      kt = graph.nodes[node_k].inputs[0];
      keys_transposed = false;
      score_scale *= k_scale;
      score_divisor *= k_divisor;
      parts.insert(parts.end(), k_parts.begin(), k_parts.end());
      bool identity = true;
      for (size_t i = 0; i < view.size(); ++i) identity = identity && view[i] == static_cast<int64_t>(i);
      if (!identity) k_perm = view;
    }
  }
  int32_t v = pv.inputs[1];
  // The head transposes around the attention, read through.
  auto read_through = [&](int32_t& operand, std::vector<int64_t>& view, bool transposed_keys) {
    const int32_t t = step_back(operand);
    const std::vector<int64_t>* perm = t < 0 ? nullptr : explicit_perm(graph, graph.nodes[t]);
    if (!perm || !is_float32(graph, graph.nodes[t].inputs[0])) return false;
    view = operand_view(*perm, transposed_keys);
    if (view.empty()) return false;
    operand = graph.nodes[t].inputs[0];
    parts.push_back(t);
    return true;
  };
  read_through(q, q_perm, false);
  if (k_perm.empty() && read_through(kt, k_perm, keys_transposed)) keys_transposed = false;
  read_through(v, v_perm, false);
  // Q, K and V as one index of a packed projection's axis (before the last: rows stay
  // contiguous), read in place at their offsets.
  std::vector<int64_t> q_select, k_select, v_select;
  auto pick_through = [&](int32_t& operand, std::vector<int64_t>& select) {
    const int32_t g = step_back(operand);
    int64_t axis = 0, index = 0;
    if (g < 0 || !constant_pick(graph, graph.nodes[g], axis, index)) return;
    const int32_t packed = graph.nodes[g].inputs[0];
    if (axis + 1 >= static_cast<int64_t>(graph.values[packed].shape.size()) || !is_float32(graph, packed)) return;
    select = {axis, index};
    operand = packed;
    parts.push_back(g);
  };
  pick_through(q, q_select);
  pick_through(kt, k_select);
  pick_through(v, v_select);
  std::vector<int32_t> outputs = pv.outputs;
  int32_t output_transpose = -1;
  if (!context.pinned[pv.outputs[0]]) {
    const int32_t reader = uses.sole_reader(pv.outputs[0]);
    const std::vector<int64_t>* perm = reader < 0 || edits.dead(reader) ? nullptr : explicit_perm(graph, graph.nodes[reader]);
    if (perm && !operand_view(*perm, false).empty()) {
      y_perm = *perm;
      outputs = graph.nodes[reader].outputs;
      output_transpose = reader;
    }
  }
  if (!is_float32(graph, q) || !is_float32(graph, kt) || !is_float32(graph, v)) return false;

  Node fused;
  fused.domain = kFusedDomain;
  fused.op_type = "FusedAttention";
  fused.opset = 1;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it)
    fused.name = fused.name.empty() ? graph.nodes[*it].name : fused_name(fused.name, graph.nodes[*it].name);
  if (output_transpose >= 0) fused.name = fused_name(fused.name, graph.nodes[output_transpose].name);
  fused.inputs = {q, kt, v};
  if (mask >= 0) fused.inputs.push_back(mask);
  fused.outputs = outputs;
  fused.set_attribute(float_attribute("q_scale", q_scale));
  fused.set_attribute(float_attribute("q_divisor", q_divisor));
  fused.set_attribute(float_attribute("score_scale", score_scale));
  fused.set_attribute(float_attribute("score_divisor", score_divisor));
  if (!keys_transposed) fused.set_attribute(int_attribute("keys_transposed", 0));
  const std::pair<const char*, const std::vector<int64_t>*> views[] = {
      {"q_perm", &q_perm},     {"k_perm", &k_perm},     {"v_perm", &v_perm},    {"y_perm", &y_perm},
      {"q_select", &q_select}, {"k_select", &k_select}, {"v_select", &v_select}};
  for (const auto& [name, perm] : views)
    if (!perm->empty()) fused.set_attribute(ints_attribute(name, *perm));
  for (size_t i = 1; i < parts.size(); ++i) edits.absorb(parts[i]);
  if (output_transpose >= 0) edits.absorb(output_transpose);
  edits.replace(out_matmul, std::move(fused));
  return true;
}

}  // namespace

int fuse_attention(PassContext& context) {
  return rewrite_nodes(context, [&](const ValueUses& uses, int32_t n, NodeEdits& edits) {
    return fuse_at(context, uses, n, edits);
  });
}

}  // namespace edgert::builder
