#include "fast/depthwise.h"

#include "gemm/sgemm.h"

namespace edgert::cpu::depthwise {

#define EDGERT_DEPTHWISE_CHANNEL channel_portable
#define EDGERT_DEPTHWISE_ACTIVATE gemm::apply_activation
#include "fast/depthwise_rows.inc"
#undef EDGERT_DEPTHWISE_CHANNEL
#undef EDGERT_DEPTHWISE_ACTIVATE

}  // namespace edgert::cpu::depthwise
