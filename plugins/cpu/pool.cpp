// TODO(owner): kernels of the pool family.
#include "kernel.h"

namespace edgert::cpu {

void register_pool_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
