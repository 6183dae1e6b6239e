// TODO(owner): kernels of the einsum family.
#include "kernel.h"

namespace edgert::cpu {

void register_einsum_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
