// TODO(owner): kernels of the normalization family.
#include "kernel.h"

namespace edgert::cpu {

void register_normalization_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
