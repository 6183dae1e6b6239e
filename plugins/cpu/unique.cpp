// TODO(owner): kernels of the unique family.
#include "kernel.h"

namespace edgert::cpu {

void register_unique_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
