// Activations on the GPU: the formulas of plugins/cpu/activation.h, computed in float (a float16
// tensor is widened, activated and rounded once). Used by the fused epilogues (FusedConv,
// FusedGemm, FusedMatMul, PointwiseChain) and the plain activation ops.
#pragma once

#include <cuda_fp16.h>

#include <string>
#include <vector>

#include "cuda_op.h"

namespace edgert::cuda {

enum class ActivationKind : int { None, Relu, Clip, Sigmoid, Tanh, HardSwish, HardSigmoid, LeakyRelu, Gelu, SiLU };

struct Activation {
  ActivationKind kind = ActivationKind::None;
  float p0 = 0, p1 = 0;

  // The name as FusedConv's `activation` attribute spells it ("" = none) and up to two
  // parameters; fails naming an unknown one.
  static Activation parse(const std::string& name, const float* params, size_t count);
  // The `activation` / `activation_params` attributes of a fused node.
  static Activation from_node(const edgert_node& node);
};

#ifdef __CUDACC__
__device__ __forceinline__ float apply(const Activation& a, float x) {
  switch (a.kind) {
    case ActivationKind::None: return x;
    // NaN stays NaN, as the CPU plugin's relu_of (fmaxf would give 0).
    case ActivationKind::Relu: return x > 0.f || x != x ? x : 0.f;
    case ActivationKind::Clip: {  // as the Clip kernel: bounds applied in turn, NaN passes through
      float v = x < a.p0 ? a.p0 : x;
      return v > a.p1 ? a.p1 : v;
    }
    case ActivationKind::Sigmoid: return 1.f / (1.f + __expf(-x));
    case ActivationKind::Tanh: return tanhf(x);
    case ActivationKind::HardSwish: return x * fminf(1.f, fmaxf(0.f, x * (1.f / 6.f) + 0.5f));
    case ActivationKind::HardSigmoid: return fminf(1.f, fmaxf(0.f, a.p0 * x + a.p1));
    case ActivationKind::LeakyRelu: return x >= 0.f ? x : a.p0 * x;
    case ActivationKind::Gelu:
      if (a.p0 != 0.f) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    case ActivationKind::SiLU: return x / (1.f + __expf(-x));
  }
  return x;
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(uint8_t x) { return static_cast<float>(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
// Only for values that came from uint8 (MaxPool's maximum); -FLT_MAX (an empty window) is 0.
template <>
__device__ __forceinline__ uint8_t from_float<uint8_t>(float x) { return static_cast<uint8_t>(fminf(fmaxf(x, 0.f), 255.f)); }
#endif  // __CUDACC__

}  // namespace edgert::cuda
