// gemv.h's panel loop compiled for AVX-512 (a panel row is one zmm); the target pragma starts
// after every include. Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include "gemm/gemv.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,fma")

namespace edgert::cpu::gemm {

#define EDGERT_GEMV_PANELS gemv_panels_avx512
#include "gemm/gemv_panels.inc"
#undef EDGERT_GEMV_PANELS

}  // namespace edgert::cpu::gemm

EDGERT_ISA_REGION_END
#endif
