// depthwise.h's channel function compiled for AVX2+FMA: the portable loops of
// fast/depthwise_rows.inc under a target pragma that starts after every include, so only this
// file's own code gets AVX2 instructions. Called only when the CPU reports AVX2 and FMA.
#if defined(__x86_64__)
#include "fast/depthwise.h"
#include "gemm/sgemm.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx2,fma")

namespace edgert::cpu::depthwise {

#define EDGERT_DEPTHWISE_CHANNEL channel_avx2
#define EDGERT_DEPTHWISE_ACTIVATE gemm::apply_activation
#include "fast/depthwise_rows.inc"
#undef EDGERT_DEPTHWISE_CHANNEL
#undef EDGERT_DEPTHWISE_ACTIVATE

}  // namespace edgert::cpu::depthwise

EDGERT_ISA_REGION_END
#endif
