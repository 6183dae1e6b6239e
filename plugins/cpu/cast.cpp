// TODO(owner): kernels of the cast family.
#include "kernel.h"

namespace edgert::cpu {

void register_cast_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
