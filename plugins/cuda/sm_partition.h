// Streams confined to a share of the GPU's multiprocessors (CUDA green contexts): a spatial
// partition, so a heavy pipeline's kernels leave the other SMs free for the pipelines beside it.
// Stream priorities alone only reorder waiting blocks: a long kernel that fills every SM still
// makes each of a small model's fifty kernels wait for blocks to drain.
#pragma once

#include "edgert/plugin.h"

namespace edgert::cuda {

// CUDA's stream priority for an edgert priority (edgert's grow with urgency, CUDA's shrink),
// clamped to the device's range.
edgert_status cuda_stream_priority(int32_t priority, int* cuda_priority, edgert_error* error);

// A non-blocking stream at `priority` whose kernels run on about `sm_percent` of the device's
// SMs (rounded up to the partition granularity the device allows; 100: every SM, an ordinary
// stream). One green context per partition size, kept for the process's life. Fails with
// EDGERT_ERR_UNSUPPORTED where the driver has no green contexts (before CUDA 12.4).
edgert_status stream_create_partitioned(int32_t priority, int32_t sm_percent, void** stream, edgert_error* error);

}  // namespace edgert::cuda
