// INT8 graph rewrite: the float graph plus one quantization (scale, zero point) per activation
// tensor becomes a graph whose convolutions, residual adds and pools run on uint8 tensors with
// int8 weights, in the standard ops ONNX Runtime also runs:
//   Conv [+ Relu | Clip]          -> QLinearConv (weights per output channel, symmetric int8;
//                                    bias int32 at x_scale * w_scale); a 1-D Conv as the 2-D one
//                                    over [N, C, 1, W] between Reshapes
//   Gemm [+ Relu]                 -> Reshape to [N, K, 1, 1], a 1x1 QLinearConv, Reshape back
//                                    (constant weights and bias, alpha = beta = 1, no transA)
//   Add [+ Relu]                  -> com.microsoft QLinearAdd (operands of one shape)
//   Mul                           -> com.microsoft QLinearMul (one operand of the output's shape,
//                                    the other the same or broadcast: a channel scale)
//   GlobalAveragePool             -> com.microsoft QLinearGlobalAveragePool
//   MaxPool, Concat, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice, Split
//                                 -> the same op on uint8 (the values keep their quantization:
//                                    a max and a move of bytes commute with it)
//   an elementwise activation (HardSwish, Sigmoid, SiLU as x * Sigmoid(x), Tanh, ...) between
//   two quantized tensors          -> edgert.QLookup: a 256-entry table computed once with the
//                                    float kernels (each uint8 level dequantized, the op, then
//                                    quantized), so the result equals DequantizeLinear -> op ->
//                                    QuantizeLinear exactly
// Everything else stays float: a DequantizeLinear goes before its first float reader, a
// QuantizeLinear after a float producer whose value an int8 node reads. Tensors stay NCHW, so
// every op that moves bytes runs on uint8 unchanged.
//
// A Relu or Clip after a convolution or an add is absorbed where the quantization of its output
// already saturates at the clip (zero point 0 for a ReLU): clamp(round(y / s) + z) equals the
// quantized clip of y there. Concat's inputs take the Concat output's quantization when they
// have no other reader, so the Concat only moves bytes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir.h"
#include "plugin_loader.h"
#include "quantization_params.h"

namespace edgert::builder {

// The uint8 quantization of activation tensors, by name.
using QuantizationTable = std::map<std::string, ActivationQuantization>;

struct Int8RewriteOptions {
  // Nodes (by name) that stay in float whatever their quantization: --layer-precisions
  // NAME:fp32 and the accuracy guard's fall-backs.
  std::set<std::string> keep_float;
  // Also write every uint8 tensor's float value as an engine output (a DequantizeLinear beside
  // the int8 path, which is unchanged): the accuracy guard compares them with float32's.
  bool expose_uint8_tensors = false;
  // The kernels that compute the activations' lookup tables (none: activations stay float).
  std::vector<const LoadedPlugin*> plugins;
  // Of keep_float: the accuracy guard's fall-backs (the others were asked for), for the notes.
  std::set<std::string> fell_back;
  // Grouped (depthwise) convolutions stay float: the GPU's INT8 convolution is dense, and one
  // on the CPU between GPU layers would cost two copies.
  bool dense_convolutions_only = false;
};

struct Int8RewriteReport {
  int convolutions = 0, adds = 0, muls = 0, pools = 0, moves = 0, lookups = 0;  // int8 nodes made, by kind
  int absorbed_activations = 0;
  int quantize = 0, dequantize = 0;  // boundary nodes inserted
  // Int8 candidates left in float: "node: why".
  std::vector<std::string> kept_float;
  // Why nothing was rewritten although int8 was asked for (empty otherwise).
  std::string not_applied;
  // The float tensors held in uint8, with the quantization they were given (a Concat's inputs
  // and a byte move's outputs take another tensor's).
  std::map<std::string, ActivationQuantization> uint8_tensors;
  // Each int8 layer: the node it replaced, and the float tensors it reads and writes.
  struct Layer {
    std::string name;
    std::vector<std::string> inputs, outputs;
  };
  std::vector<Layer> layers;
  // Each int8 node's name and the name of the node it replaced.
  std::vector<std::pair<std::string, std::string>> replaced;
};

// Rewrites the main graph `graph` (shapes inferred, passes up to pattern recognition done).
// Returns how many int8 nodes it made.
int rewrite_int8(Graph& graph, const QuantizationTable& quantization, const Int8RewriteOptions& options,
                 Int8RewriteReport* report);

// The tensors whose quantization rewrite_int8 can use: every float32 activation (graph inputs
// and node outputs, not constants) of `graph`, by name.
std::vector<std::string> quantizable_activations(const Graph& graph);

}  // namespace edgert::builder
