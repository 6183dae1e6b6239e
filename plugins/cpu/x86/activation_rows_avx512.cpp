// gemm::apply_activation's loops compiled for AVX-512 (see gemm/activation_rows.inc); the
// target pragma starts after every include. Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include "gemm/sgemm.h"

namespace edgert::cpu::gemm {
void activation_rows_scalar(float* y, int64_t n, const Activation& act);
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")

namespace edgert::cpu::gemm {

#define EDGERT_ACTIVATION_ROWS activation_rows_avx512
#include "gemm/activation_rows.inc"
#undef EDGERT_ACTIVATION_ROWS

}  // namespace edgert::cpu::gemm

#pragma GCC pop_options
#endif
