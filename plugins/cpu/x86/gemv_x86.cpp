// gemv.h's panel loop compiled for AVX2+FMA; the target pragma starts after every include.
// Called only when the CPU reports AVX2 and FMA.
#if defined(__x86_64__)
#include "gemm/gemv.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx2,fma")

namespace edgert::cpu::gemm {

#define EDGERT_GEMV_PANELS gemv_panels_avx2
#include "gemm/gemv_panels.inc"
#undef EDGERT_GEMV_PANELS

}  // namespace edgert::cpu::gemm

EDGERT_ISA_REGION_END
#endif
