// TODO(owner): kernels of the reduce family.
#include "kernel.h"

namespace edgert::cpu {

void register_reduce_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
