// gemm::apply_activation for AVX-512: the loops of gemm/activation_rows.inc compiled for it
// (the target pragma starts after every include), except Sigmoid and SiLU. Those spent most of
// their time waiting for vdivps; here 1 / (1 + e^-x) is a reciprocal estimate refined by one
// Newton step (relative error about 2^-27, within the tolerance every fast tactic is tested
// to) and the exponential evaluates the same polynomial with FMAs. Fused epilogues and the
// standalone Sigmoid tactic both come here, so a fused SiLU still equals Sigmoid then Mul on
// this ISA. Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include "gemm/sgemm.h"

namespace edgert::cpu::gemm {
void activation_rows_scalar(float* y, int64_t n, const Activation& act);
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")
// GCC 12's false positive on its own masked max/min intrinsics (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::gemm {

namespace {

#define EDGERT_ACTIVATION_ROWS activation_rows_vectorized
#include "gemm/activation_rows.inc"
#undef EDGERT_ACTIVATION_ROWS

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
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
}

// 1 / (1 + e^-x).
inline __m512 sigmoid_lanes(__m512 x) {
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_lanes(_mm512_sub_ps(_mm512_setzero_ps(), x)));
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

template <bool kSiLU>
void sigmoid_rows(float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(y + i);
    const __m512 s = sigmoid_lanes(x);
    _mm512_storeu_ps(y + i, kSiLU ? _mm512_mul_ps(x, s) : s);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, y + i);
    const __m512 s = sigmoid_lanes(x);
    _mm512_mask_storeu_ps(y + i, m, kSiLU ? _mm512_mul_ps(x, s) : s);
  }
}

}  // namespace

void activation_rows_avx512(float* y, int64_t n, const Activation& act) {
  if (act.kind == ActivationKind::Sigmoid) return sigmoid_rows<false>(y, n);
  if (act.kind == ActivationKind::SiLU) return sigmoid_rows<true>(y, n);
  activation_rows_vectorized(y, n, act);
}

}  // namespace edgert::cpu::gemm

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
