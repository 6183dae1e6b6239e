// Activations shared by the element-wise kernels (Relu, Sigmoid, ...) and the fused epilogues
// of FusedConv / FusedGemm / FusedMatMul / PointwiseChain (domain "edgert", made by the
// builder's fusion passes). One definition of each formula keeps fused results bit-identical
// to the unfused graph.
//
// Fused-op attributes:
//   activation         STRING  "", Relu, Clip, Sigmoid, Tanh, HardSwish, HardSigmoid, LeakyRelu,
//                              Gelu, SiLU
//   activation_params  FLOATS  Clip: min, max; LeakyRelu: alpha; HardSigmoid: alpha, beta;
//                              Gelu: 1 for the tanh approximation, else 0
// FusedConv also takes (see conv.cpp, FusedConvOp):
//   pool_kernel_shape, pool_strides, pool_pads  INTS, pool_ceil_mode INT: a trailing 2-D
//                              MaxPool (the pool-fusion pass); no residual then
//   input 4, S [N, C, 1, 1]    a channel scale applied to X first (channel-scale-fusion)
//   inputs 5, 6: W_pre [E, C, 1, 1], B_pre [E]; pre_activation, pre_activation_params: a 1x1
//                              convolution and its activation applied to X first, the node's
//                              convolution depthwise over the E channels (expand-depthwise-fusion)
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernel.h"

namespace edgert::cpu {

// Transcendentals run in double and round once, like the unary kernels.
template <typename C>
C sigmoid_of(C c) {
  double x = static_cast<double>(c);
  return static_cast<C>(x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)));
}
template <typename C>
C tanh_of(C c) {
  return static_cast<C>(std::tanh(static_cast<double>(c)));
}
// NaN stays NaN, as in PyTorch and NumPy (`x > 0 ? x : 0` alone made it 0). Not fmax: that
// returns the number when one operand is NaN.
template <typename C>
C relu_of(C x) {
  return x > C(0) || x != x ? x : C(0);
}
template <typename C>
C leaky_relu_of(C x, float alpha) {
  return x >= C(0) ? x : static_cast<C>(static_cast<C>(alpha) * x);
}
template <typename C>
C hard_sigmoid_of(C x, float alpha, float beta) {
  C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
  return std::max(C(0), std::min(C(1), v));
}
// x * HardSigmoid(x) with alpha = 1/6, beta = 0.5: the function body ONNX defines.
template <typename C>
C hard_swish_of(C x) {
  C v = static_cast<C>(1.0f / 6.0f) * x + static_cast<C>(0.5f);
  return x * std::max(C(0), std::min(C(1), v));
}
template <typename C>
C gelu_of(C c, bool tanh_approximation) {
  double x = static_cast<double>(c);
  if (tanh_approximation) {
    const double k = 0.7978845608028654;  // sqrt(2 / pi)
    return static_cast<C>(0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))));
  }
  return static_cast<C>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
}
// Clip as the Clip kernel writes it, so NaN passes through.
template <typename C>
C clip_of(C v, C lo, C hi) {
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return v;
}

enum class ActivationKind { None, Relu, Clip, Sigmoid, Tanh, HardSwish, HardSigmoid, LeakyRelu, Gelu, SiLU };

struct Activation {
  ActivationKind kind = ActivationKind::None;
  float p0 = 0, p1 = 0;

  // Parses a name and up to two parameters; fails naming the unknown activation.
  static Activation parse(const std::string& name, const float* params, size_t count);
  // Reads the `activation` / `activation_params` attributes of a fused node.
  static Activation from_node(const edgert_node& node);

  // The activation of a float32 value (the only dtype the builder fuses), rounded to float
  // after each op of the unfused graph.
  float apply(float x) const {
    switch (kind) {
      case ActivationKind::None: return x;
      case ActivationKind::Relu: return relu_of(x);
      case ActivationKind::Clip: return clip_of(x, p0, p1);
      case ActivationKind::Sigmoid: return sigmoid_of(x);
      case ActivationKind::Tanh: return tanh_of(x);
      case ActivationKind::HardSwish: return hard_swish_of(x);
      case ActivationKind::HardSigmoid: return hard_sigmoid_of(x, p0, p1);
      case ActivationKind::LeakyRelu: return leaky_relu_of(x, p0);
      case ActivationKind::Gelu: return gelu_of(x, p0 != 0);
      case ActivationKind::SiLU: return x * sigmoid_of(x);  // Mul(x, Sigmoid(x)) in float
    }
    return x;
  }
};

inline Activation Activation::parse(const std::string& name, const float* params, size_t count) {
  Activation a;
  static const std::pair<const char*, ActivationKind> kinds[] = {
      {"", ActivationKind::None},           {"Relu", ActivationKind::Relu},
      {"Clip", ActivationKind::Clip},       {"Sigmoid", ActivationKind::Sigmoid},
      {"Tanh", ActivationKind::Tanh},       {"HardSwish", ActivationKind::HardSwish},
      {"HardSigmoid", ActivationKind::HardSigmoid}, {"LeakyRelu", ActivationKind::LeakyRelu},
      {"Gelu", ActivationKind::Gelu},       {"SiLU", ActivationKind::SiLU}};
  bool found = false;
  for (const auto& [n, k] : kinds)
    if (name == n) {
      a.kind = k;
      found = true;
    }
  if (!found) fail(EDGERT_ERR_INVALID_ARGUMENT, "unknown fused activation '%s'", name.c_str());
  const size_t needed = a.kind == ActivationKind::Clip || a.kind == ActivationKind::HardSigmoid ? 2
                        : a.kind == ActivationKind::LeakyRelu || a.kind == ActivationKind::Gelu ? 1 : 0;
  if (count < needed)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "activation '%s' needs %zu parameters, got %zu", name.c_str(), needed, count);
  if (count > 0) a.p0 = params[0];
  if (count > 1) a.p1 = params[1];
  return a;
}

inline Activation Activation::from_node(const edgert_node& node) {
  Attributes attrs(&node);
  std::vector<float> params = attrs.get_floats("activation_params");
  return parse(attrs.get_string("activation", ""), params.data(), params.size());
}

}  // namespace edgert::cpu
