// TODO(owner): kernels of the topk family.
#include "kernel.h"

namespace edgert::cpu {

void register_topk_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
