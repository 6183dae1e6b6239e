// TODO(owner): kernels of the loss family.
#include "kernel.h"

namespace edgert::cpu {

void register_loss_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
