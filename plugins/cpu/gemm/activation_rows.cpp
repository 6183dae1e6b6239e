#include "gemm/sgemm.h"

namespace edgert::cpu::gemm {

// Activations without a vectorized form (Tanh, Gelu, LeakyRelu), through activation.h; out of
// line so that the AVX2 copy of the loops never instantiates activation.h's inline functions.
void activation_rows_scalar(float* y, int64_t n, const Activation& act) {
  for (int64_t i = 0; i < n; ++i) y[i] = act.apply(y[i]);
}

#if defined(__x86_64__)
void exp_rows_avx2(float* y, int64_t n);
void activation_rows_avx2(float* y, int64_t n, const Activation& act);
void activation_rows_avx512(float* y, int64_t n, const Activation& act);
#endif

namespace {
#define EDGERT_ACTIVATION_ROWS activation_rows_portable
#define EDGERT_EXP_ROWS exp_rows_portable
#include "gemm/activation_rows.inc"
#undef EDGERT_EXP_ROWS
#undef EDGERT_ACTIVATION_ROWS
}  // namespace

void apply_activation(float* y, int64_t n, const Activation& act) {
  if (act.kind == ActivationKind::None) return;
#if defined(__x86_64__)
  // The same operations in the same order on every ISA (no FMA contraction): the same bits.
  static const bool avx512 = isa_available(Isa::Avx512), avx2 = isa_available(Isa::Avx2Fma);
  if (avx512) return activation_rows_avx512(y, n, act);
  if (avx2) return activation_rows_avx2(y, n, act);
#endif
  activation_rows_portable(y, n, act);
}

void exp_rows(float* y, int64_t n) {
#if defined(__x86_64__)
  static const bool avx2 = isa_available(Isa::Avx2Fma);
  if (avx2) return exp_rows_avx2(y, n);
#endif
  exp_rows_portable(y, n);
}

}  // namespace edgert::cpu::gemm
