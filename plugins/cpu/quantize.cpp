// TODO(owner): kernels of the quantize family.
#include "kernel.h"

namespace edgert::cpu {

void register_quantize_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
