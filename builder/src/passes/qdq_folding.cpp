// Explicit quantization (Q/DQ models: ONNX Runtime's quantize_static output, PyTorch QAT
// exports, edgert quantize --export-qdq): each QuantizeLinear -> DequantizeLinear pair on an
// activation says how that tensor is quantized. The pair is taken out of the graph and its
// scale and zero point recorded (PassOptions::explicit_quantization); the precision pass then
// puts the tensor in uint8 exactly where an int8 kernel reads or writes it (int8_rewrite.h), as
// TensorRT folds Q/DQ into the layers around them. Weight DequantizeLinear nodes (int8 constants)
// are left to constant folding: the rewrite quantizes the folded weights per output channel
// again, which gives back the same int8 values for max-abs scaled weights.
//
// Per-tensor pairs only, uint8 or int8 (int8 becomes uint8 with the zero point moved by 128:
// the same real values), with equal parameters on both sides. Anything else stays as it is and
// runs on the reference kernels.
#include <cstring>

#include "graph_rewrite.h"
#include "pass_manager.h"

namespace edgert::builder {
namespace {

// A per-tensor scale and zero point from a QuantizeLinear or DequantizeLinear node.
bool scalar_parameters(const Graph& graph, const Node& node, float* scale, int32_t* zero_point, int32_t* dtype) {
  if (node.inputs.size() < 2 || node.inputs[1] < 0) return false;
  const std::vector<double> s = constant_as_doubles(graph.values[node.inputs[1]]);
  if (s.size() != 1 || graph.values[node.inputs[1]].dtype != EDGERT_DTYPE_FLOAT32 || !(s[0] > 0)) return false;
  *scale = static_cast<float>(s[0]);
  *zero_point = 0;
  *dtype = EDGERT_DTYPE_UINT8;
  if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
    const Value& z = graph.values[node.inputs[2]];
    const std::vector<double> zp = constant_as_doubles(z);
    if (zp.size() != 1 || (z.dtype != EDGERT_DTYPE_UINT8 && z.dtype != EDGERT_DTYPE_INT8)) return false;
    *zero_point = static_cast<int32_t>(zp[0]);
    *dtype = z.dtype;
  }
  if (const Attribute* block = node.attribute("block_size"))
    if (block->i != 0) return false;
  return true;
}

}  // namespace

int fold_qdq_pairs(PassContext& context) {
  if (!context.options.explicit_quantization) return 0;
  QuantizationTable& table = *context.options.explicit_quantization;
  Graph& graph = context.graph;
  ValueUses uses(graph);
  std::vector<bool> dead(graph.nodes.size(), false);
  int folded = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& dq = graph.nodes[n];
    if (!is_op(dq, "DequantizeLinear") || dq.inputs.empty() || dq.outputs.size() != 1) continue;
    const int32_t q_index = uses.producer[dq.inputs[0]];
    if (q_index < 0 || !is_op(graph.nodes[q_index], "QuantizeLinear")) continue;
    const Node& q = graph.nodes[q_index];
    const int32_t x = q.inputs[0];
    if (graph.values[x].is_constant() || graph.values[x].dtype != EDGERT_DTYPE_FLOAT32) continue;
    float q_scale = 0, dq_scale = 0;
    int32_t q_zero = 0, dq_zero = 0, q_dtype = 0, dq_dtype = 0;
    if (!scalar_parameters(graph, q, &q_scale, &q_zero, &q_dtype) ||
        !scalar_parameters(graph, dq, &dq_scale, &dq_zero, &dq_dtype))
      continue;
    if (q_scale != dq_scale || q_zero != dq_zero || q_dtype != dq_dtype) continue;
    const int32_t y = dq.outputs[0];
    if (graph.values[y].dtype != EDGERT_DTYPE_FLOAT32) continue;
    ActivationQuantization quantization;
    quantization.scale = q_scale;
    quantization.zero_point = static_cast<uint8_t>(q_dtype == EDGERT_DTYPE_INT8 ? q_zero + 128 : q_zero);
    if (!redirect_value(graph, y, x, context.pinned, uses)) continue;
    // redirect_value may have moved an output's name onto x: record under the name x has now.
    table.emplace(graph.values[x].name, quantization);
    uses.forget_node(graph, static_cast<int32_t>(n));
    dead[n] = true;
    ++folded;
    if (uses.reader_count(q.outputs[0]) == 0 && !context.pinned[q.outputs[0]]) {
      uses.forget_node(graph, q_index);
      dead[q_index] = true;
    }
  }
  if (folded) remove_nodes(graph, dead);
  return folded;
}

}  // namespace edgert::builder
