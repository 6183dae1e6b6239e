// TODO(owner): kernels of the conv family.
#include "kernel.h"

namespace edgert::cpu {

void register_conv_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
