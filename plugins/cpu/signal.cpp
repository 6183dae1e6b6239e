// TODO(owner): kernels of the signal family.
#include "kernel.h"

namespace edgert::cpu {

void register_signal_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
