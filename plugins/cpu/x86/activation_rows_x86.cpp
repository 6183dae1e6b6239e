// gemm::apply_activation's loops compiled for AVX2+FMA (see gemm/activation_rows.inc); the
// target pragma starts after every include. Called only when the CPU reports AVX2 and FMA.
#if defined(__x86_64__)
#include "gemm/sgemm.h"
#include "x86/isa_region.h"

namespace edgert::cpu::gemm {
void activation_rows_scalar(float* y, int64_t n, const Activation& act);
}

EDGERT_ISA_REGION_BEGIN("avx2,fma")

namespace edgert::cpu::gemm {

#define EDGERT_ACTIVATION_ROWS activation_rows_avx2
#define EDGERT_EXP_ROWS exp_rows_avx2
#include "gemm/activation_rows.inc"
#undef EDGERT_EXP_ROWS
#undef EDGERT_ACTIVATION_ROWS

}  // namespace edgert::cpu::gemm

EDGERT_ISA_REGION_END
#endif
