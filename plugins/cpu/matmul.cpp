// TODO(owner): kernels of the matmul family.
#include "kernel.h"

namespace edgert::cpu {

void register_matmul_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
