// Activations of 16 lanes for AVX-512, shared by the activation rows
// (x86/activation_rows_avx512.cpp) and the fused epilogues of the GEMM micro-kernel
// (x86/sgemm_x86.cpp) and the direct convolution (x86/conv_direct_avx512.cpp), so a fused
// epilogue and the unfused graph (the activation node after the convolution) give the same bits.
// 1 / (1 + e^-x) is a reciprocal estimate refined by one Newton step (relative error about
// 2^-27) of e^-x from a fitted polynomial (exp_neg_lanes). Include only inside
// `#pragma GCC target("avx512f,...,fma")`, in an unnamed namespace (after <type_traits>).
#pragma once

// e^-x for the sigmoids: -x = n ln2 + rho with n = round(-x log2 e), so e^-x = 2^n e^rho with
// |rho| <= ln2 / 2, and e^rho = q(r) for r = x + n ln2 = -rho. q is a degree-5 polynomial fitted
// for relative error on that interval (7.5e-8; a sigmoid within 1e-7 of the exact one); one FMA
// reduces the argument (the float ln2 is off by 2e-9, at most 2e-7 of e^-x for |x| <= 80). 15
// instructions with the division: the Cephes exponential before it took 20, and SiLU's share of
// efficientnet's convolutions (their epilogues) was a third of their time.
inline __m512 exp_neg_lanes(__m512 x) {
  // Operands in this order keep a NaN (vmaxps returns its second operand when either is NaN);
  // the clamp keeps n inside the shifter's range and 1 + e^-x finite.
  x = _mm512_min_ps(_mm512_set1_ps(80.0f), _mm512_max_ps(_mm512_set1_ps(-80.0f), x));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(-1.44269504088896341f), shifter), shifter);
  const __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(0.693147180559945f), x);
  // q(r) = e^-r: the fitted coefficients of e^rho with the odd ones negated.
  __m512 q = _mm512_set1_ps(-0.008297649212181568f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.04191538318991661f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(-0.16667574644088745f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.49998894333839417f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(-0.9999997019767761f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0000001192092896f));
  // q * 2^n in one instruction (n is integral and |n| <= 116).
  return _mm512_scalef_ps(q, n);
}

// 1 / (1 + e^-x).
inline __m512 sigmoid_lanes(__m512 x) {
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_neg_lanes(x));
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

// The activations held in registers: the rounding of activation_rows.inc and
// x86/activation_rows_avx512.cpp. max/min operand orders keep NaN and signed zeros as the
// comparisons of activation.h do; HardSwish multiplies and adds separately (no contraction).
inline bool activation_in_lanes(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::None: case ActivationKind::Relu: case ActivationKind::Clip: case ActivationKind::HardSwish:
    case ActivationKind::Sigmoid: case ActivationKind::SiLU:
      return true;
    default: return false;
  }
}

// Calls run(kind as a std::integral_constant) for the activations activation_in_lanes takes,
// None for the others: kernels templated on the activation pick their instance here.
template <typename Run>
inline void with_lane_activation(ActivationKind kind, Run&& run) {
  using K = ActivationKind;
  switch (kind) {
    case K::Relu: return run(std::integral_constant<K, K::Relu>{});
    case K::Clip: return run(std::integral_constant<K, K::Clip>{});
    case K::HardSwish: return run(std::integral_constant<K, K::HardSwish>{});
    case K::Sigmoid: return run(std::integral_constant<K, K::Sigmoid>{});
    case K::SiLU: return run(std::integral_constant<K, K::SiLU>{});
    default: return run(std::integral_constant<K, K::None>{});
  }
}

inline __m512 activate_lanes(__m512 v, ActivationKind kind, float p0, float p1) {
  switch (kind) {
    // maxps returns its second operand when either is NaN: v second keeps NaN, as relu_of does.
    case ActivationKind::Relu: return _mm512_max_ps(_mm512_setzero_ps(), v);
    case ActivationKind::Clip: return _mm512_min_ps(_mm512_set1_ps(p1), _mm512_max_ps(_mm512_set1_ps(p0), v));
    case ActivationKind::HardSwish: {
      __m512 h = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(1.0f / 6.0f), v), _mm512_set1_ps(0.5f));
      h = _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(), h));
      return _mm512_mul_ps(v, h);
    }
    case ActivationKind::Sigmoid: return sigmoid_lanes(v);
    case ActivationKind::SiLU: return _mm512_mul_ps(v, sigmoid_lanes(v));
    default: return v;
  }
}
