// Activations of 16 lanes for AVX-512, shared by the activation rows
// (x86/activation_rows_avx512.cpp) and the fused epilogues of the GEMM micro-kernel
// (x86/sgemm_x86.cpp) and the direct convolution (x86/conv_direct_avx512.cpp), so a fused
// epilogue and the unfused graph (the activation node after the convolution) give the same bits. 1 / (1 + e^-x) is a reciprocal estimate refined by one
// Newton step (relative error about 2^-27); the exponential is activation_rows.inc's Cephes
// polynomial evaluated with FMAs. Include only inside `#pragma GCC target("avx512f,...,fma")`,
// in an unnamed namespace (after <type_traits>).
#pragma once

// exp_portable of activation_rows.inc (Cephes' polynomial, clamped to [-80, 80]), with FMAs.
inline __m512 exp_lanes(__m512 x) {
  // Operands in this order keep a NaN (vmaxps returns its second operand when either is NaN).
  x = _mm512_min_ps(_mm512_set1_ps(80.0f), _mm512_max_ps(_mm512_set1_ps(-80.0f), x));
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  // e * 2^n in one instruction (n is integral and |n| <= 116: the same exact product as
  // multiplying by the float built from n's bits, three instructions fewer).
  return _mm512_scalef_ps(e, n);
}

// 1 / (1 + e^-x).
inline __m512 sigmoid_lanes(__m512 x) {
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_lanes(_mm512_sub_ps(_mm512_setzero_ps(), x)));
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
    case ActivationKind::Relu: return _mm512_max_ps(v, _mm512_setzero_ps());
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
