// TODO(owner): kernels of the resize family.
#include "kernel.h"

namespace edgert::cpu {

void register_resize_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
