// Conv / Gemm / MatMul + bias + residual Add + activation -> one node of domain "edgert"
// (FusedConv, FusedGemm, FusedMatMul) whose kernel applies the epilogue while the output is
// still in cache. The fused kernels round to float32 after each step exactly where the
// unfused graph did, so results are bit-identical to running the ops one by one.
//
// Patterns, starting from the producer P (float32 output y):
//   Conv:   y -> Add(y, z) [z: same shape, the residual of ResNet blocks]   -> activation
//   MatMul: y -> Add(y, b) [b: constant of shape [N], the bias] -> Add(., r) -> activation
//   Gemm:                                                      -> Add(., r) -> activation
// r: the residual of a transformer block, of the product's element count, taken as input 3 of
// FusedMatMul / FusedGemm and read as the product's shape; a Reshape may sit between the
// product and that Add ([L*B, E] products beside the [L, B, E] residual stream), and stays after
// the fused node, writing what the Add wrote. Where the bias is a vector (or absent) the GPU
// adds r as cuBLASLt's C; fused there only (Gemm: C a vector of N or absent, beta 1).
// where activation is one of Relu, Clip (constant bounds), Sigmoid, Tanh, HardSwish,
// HardSigmoid, LeakyRelu, Gelu, or SiLU written as Mul(x, Sigmoid(x)). Every absorbed
// intermediate must have no other reader and not be an engine output. The fused node takes
// the place of the last absorbed node, where all its inputs are available.
#include <cmath>
#include <limits>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

struct ActivationMatch {
  std::string name;
  std::vector<float> params;
  std::vector<int32_t> nodes;  // absorbed, in order
  int32_t output = -1;
};

bool is_float32(const Graph& graph, int32_t v) { return v >= 0 && graph.values[v].dtype == EDGERT_DTYPE_FLOAT32; }

// Reads the activation applied to `v` by its readers, if it is one we fuse.
bool match_activation(const Graph& graph, const ValueUses& uses, int32_t v, ActivationMatch& m) {
  const auto& readers = uses.readers[v];
  if (readers.size() == 2) {
    // SiLU: Sigmoid(v) -> s; Mul(v, s) or Mul(s, v).
    int32_t sig = -1, mul = -1;
    for (const auto& [n, slot] : readers) {
      const Node& r = graph.nodes[n];
      if (is_op(r, "Sigmoid")) sig = n;
      else if (is_op(r, "Mul")) mul = n;
    }
    if (sig < 0 || mul < 0) return false;
    int32_t s = graph.nodes[sig].outputs[0];
    const Node& mn = graph.nodes[mul];
    if (uses.sole_reader(s) != mul || mn.inputs.size() != 2) return false;
    if (!((mn.inputs[0] == v && mn.inputs[1] == s) || (mn.inputs[0] == s && mn.inputs[1] == v))) return false;
    m.name = "SiLU";
    m.nodes = {sig, mul};
    m.output = mn.outputs[0];
    return sig < mul;
  }
  if (readers.size() != 1) return false;
  int32_t n = readers[0].first;
  const Node& a = graph.nodes[n];
  if (!a.domain.empty() || a.inputs.empty() || a.inputs[0] != v || a.outputs.size() != 1) return false;
  m.nodes = {n};
  m.output = a.outputs[0];
  auto attr_f = [&](const char* name, float fallback) {
    const Attribute* at = a.attribute(name);
    return at ? at->f : fallback;
  };
  const std::string& op = a.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish") {
    m.name = op;
  } else if (op == "LeakyRelu") {
    m.name = op;
    m.params = {attr_f("alpha", 0.01f)};
  } else if (op == "HardSigmoid") {
    m.name = op;
    m.params = {attr_f("alpha", 0.2f), attr_f("beta", 0.5f)};
  } else if (op == "Gelu") {
    const Attribute* approx = a.attribute("approximate");
    if (approx && approx->s != "none" && approx->s != "tanh") return false;
    m.name = op;
    m.params = {approx && approx->s == "tanh" ? 1.0f : 0.0f};
  } else if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (a.opset < 11) {
      lo = attr_f("min", lo);
      hi = attr_f("max", hi);
    } else {
      for (size_t i = 1; i < a.inputs.size() && i < 3; ++i) {
        if (a.inputs[i] < 0) continue;
        const Value& bound = graph.values[a.inputs[i]];
        std::vector<double> b = constant_as_doubles(bound);
        if (b.size() != 1 || bound.dtype != EDGERT_DTYPE_FLOAT32) return false;
        (i == 1 ? lo : hi) = static_cast<float>(b[0]);
      }
    }
    m.name = op;
    m.params = {lo, hi};
  } else {
    return false;
  }
  return true;
}

// Whether `a` and `b` have the same dims at every shape the engine accepts: fixed and equal, or
// varying alike under the same name (an Add of the two then broadcasts nothing).
bool same_dims(const Value& a, const Value& b) {
  if (!a.rank_known || !b.rank_known || a.shape.size() != b.shape.size()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    const Dim &x = a.shape[i], &y = b.shape[i];
    if (x.value != y.value || x.low != y.low || x.high != y.high) return false;
    if (x.value < 0 && (x.name.empty() || x.name != y.name)) return false;
  }
  return true;
}

// Whether a residual may join MatMul / Gemm `producer`: where its bias or C is a vector of N or
// absent (the GPU then adds the residual as cuBLASLt's C). An activation comes after it.
bool residual_fusable(const Graph& graph, const Node& producer) {
  if (is_op(producer, "MatMul")) return true;
  if (!is_op(producer, "Gemm")) return false;
  const Attribute* beta = producer.attribute("beta");
  if (producer.inputs.size() < 3 || producer.inputs[2] < 0) return true;
  if (beta && beta->f != 1.0f) return false;
  const Value& c = graph.values[producer.inputs[2]];
  const Value* b = producer.inputs[1] >= 0 ? &graph.values[producer.inputs[1]] : nullptr;
  if (!c.rank_known || !b || !b->rank_known || b->shape.size() != 2) return false;
  const Attribute* trans_b = producer.attribute("transB");
  const int64_t n = b->shape[trans_b && trans_b->i ? 0 : 1].value;
  const bool vector = (c.shape.size() == 1 && c.shape[0].value == n) ||
                      (c.shape.size() == 2 && c.shape[0].value == 1 && c.shape[1].value == n);
  return n > 0 && vector;
}

// Tries to fuse the epilogue of node `p`; returns true when the graph changed.
bool fuse_from(PassContext& context, const ValueUses& uses, int32_t p, NodeEdits& edits) {
  Graph& graph = context.graph;
  const Node& producer = graph.nodes[p];
  const bool conv = is_op(producer, "Conv"), gemm = is_op(producer, "Gemm"), matmul = is_op(producer, "MatMul");
  if (!(conv || gemm || matmul) || producer.outputs.size() != 1) return false;
  int32_t y = producer.outputs[0];
  if (!is_float32(graph, y) || context.pinned[y]) return false;

  std::vector<int32_t> absorbed;
  std::vector<std::string> names = {producer.name};
  int32_t current = y;
  int32_t residual = -1, bias = -1;
  // The residual Add of a Conv, or the bias Add of a MatMul.
  if ((conv || matmul) && uses.reader_count(current) == 1) {
    const Node& add = graph.nodes[uses.readers[current][0].first];
    if (is_op(add, "Add") && add.inputs.size() == 2 && add.inputs[0] != add.inputs[1]) {
      int32_t other = add.inputs[0] == current ? add.inputs[1] : add.inputs[0];
      const Value& ov = graph.values[other];
      const Value& yv = graph.values[current];
      if (conv && ov.dtype == yv.dtype && ov.same_shape_as(yv)) residual = other;
      if (matmul && ov.is_constant() && ov.dtype == yv.dtype && ov.rank_known && ov.shape.size() == 1 &&
          yv.rank_known && !yv.shape.empty() && ov.shape[0].value == yv.shape.back().value && yv.shape.size() >= 2)
        bias = other;
      if (residual >= 0 || bias >= 0) {
        absorbed.push_back(uses.readers[current][0].first);
        names.push_back(add.name);
        current = add.outputs[0];
      }
    }
  }
  // The residual Add of a MatMul or Gemm, straight after it or after a Reshape.
  int32_t reshape = -1, sum = -1;
  if (!conv && residual_fusable(graph, producer)) {
    int32_t at = current, via = -1;
    if (uses.reader_count(at) == 1 && !context.pinned[at]) {
      const int32_t reader = uses.readers[at][0].first;
      const Node& r = graph.nodes[reader];
      if (is_op(r, "Reshape") && r.outputs.size() == 1 && r.inputs[0] == at && !context.pinned[r.outputs[0]] &&
          uses.reader_count(r.outputs[0]) == 1) {
        via = reader;
        at = r.outputs[0];
      }
    }
    const int32_t add_node = uses.reader_count(at) == 1 ? uses.readers[at][0].first : -1;
    if (add_node >= 0 && !context.pinned[at] && is_op(graph.nodes[add_node], "Add")) {
      const Node& add = graph.nodes[add_node];
      const int32_t other = add.inputs.size() == 2 && add.inputs[0] != add.inputs[1]
                                ? (add.inputs[0] == at ? add.inputs[1] : add.inputs[0]) : -1;
      // The fused node sits where the product's last absorbed part was (before the Reshape):
      // the residual must be computed by then.
      const int32_t position = absorbed.empty() ? p : absorbed.back();
      const int32_t made = other >= 0 ? uses.producer[other] : -1;
      if (other >= 0 && is_float32(graph, other) && same_dims(graph.values[other], graph.values[at]) &&
          same_dims(graph.values[add.outputs[0]], graph.values[at]) && (via < 0 || made < position)) {
        residual = other;
        reshape = via;
        sum = add_node;
        names.push_back(add.name);
        if (via < 0) {
          absorbed.push_back(add_node);
          current = add.outputs[0];
        }
      }
    }
  }
  ActivationMatch act;
  bool has_act = false;
  if (reshape < 0 && !context.pinned[current] && match_activation(graph, uses, current, act)) {
    bool ok = true;
    for (size_t i = 0; i + 1 < act.nodes.size(); ++i)
      for (int32_t o : graph.nodes[act.nodes[i]].outputs) ok = ok && !context.pinned[o];
    if (ok && is_float32(graph, act.output)) {
      has_act = true;
      for (int32_t n : act.nodes) {
        absorbed.push_back(n);
        names.push_back(graph.nodes[n].name);
      }
      current = act.output;
    }
  }
  if (absorbed.empty() && sum < 0) return false;
  for (int32_t n : absorbed)
    if (edits.dead(n)) return false;
  if (sum >= 0 && edits.dead(sum)) return false;

  Node fused = producer;  // copied before the producer is emptied below
  fused.domain = kFusedDomain;
  fused.op_type = conv ? "FusedConv" : gemm ? "FusedGemm" : "FusedMatMul";
  std::string name = names[0];
  for (size_t i = 1; i < names.size(); ++i) name = fused_name(name, names[i]);
  fused.name = name;
  fused.outputs = {current};
  if (conv) {
    fused.inputs.resize(4, -1);
    fused.inputs[3] = residual;
    if (residual < 0) fused.inputs.resize(3);
  }
  if (matmul && bias >= 0) fused.inputs.push_back(bias);
  if (!conv && residual >= 0) {
    fused.inputs.resize(3, -1);  // input 2: the bias or C, absent or not
    fused.inputs.push_back(residual);
  }
  Attribute activation;
  activation.name = "activation";
  activation.type = EDGERT_ATTR_STRING;
  activation.s = has_act ? act.name : "";
  fused.set_attribute(activation);
  Attribute params;
  params.name = "activation_params";
  params.type = EDGERT_ATTR_FLOATS;
  params.floats = has_act ? act.params : std::vector<float>{};
  fused.set_attribute(params);
  int32_t last = absorbed.empty() ? p : absorbed.back();
  for (int32_t n : absorbed) last = std::max(last, n);
  // Dead nodes stay in place until the pass ends; emptied, they no longer count as readers.
  for (int32_t n : absorbed) edits.absorb(n);
  if (reshape >= 0) {  // the Reshape now writes what the residual Add wrote
    Node moved = graph.nodes[reshape];
    moved.outputs = graph.nodes[sum].outputs;
    edits.absorb(sum);
    edits.replace(reshape, std::move(moved));
  }
  if (last != p) edits.absorb(p);
  edits.replace(last, std::move(fused));
  return true;
}

}  // namespace

int fuse_activations(PassContext& context) {
  return rewrite_nodes(context, [&](const ValueUses& uses, int32_t n, NodeEdits& edits) {
    return fuse_from(context, uses, n, edits);
  });
}

}  // namespace edgert::builder
