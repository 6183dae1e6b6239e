// gemm::apply_activation for AVX-512: the loops of gemm/activation_rows.inc compiled for it
// (the target pragma starts after every include), except Sigmoid and SiLU. Those spent most of
// their time waiting for vdivps; x86/activation_lanes_avx512.h replaces the division by a refined
// reciprocal estimate (within the tolerance every fast tactic is tested to). Fused epilogues
// and the standalone Sigmoid tactic both come here (or to the same lanes in the GEMM
// micro-kernel), so a fused SiLU still equals Sigmoid then Mul on this ISA. Called only when the
// CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include <type_traits>

#include "gemm/sgemm.h"
#include "x86/isa_region.h"

namespace edgert::cpu::gemm {
void activation_rows_scalar(float* y, int64_t n, const Activation& act);
}

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl,fma")
// GCC 12's false positive on its own masked max/min intrinsics (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::gemm {

namespace {

#define EDGERT_ACTIVATION_ROWS activation_rows_vectorized
#include "gemm/activation_rows.inc"
#undef EDGERT_ACTIVATION_ROWS

#include "x86/activation_lanes_avx512.h"

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
EDGERT_ISA_REGION_END
#endif
