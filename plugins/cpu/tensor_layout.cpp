// TODO(owner): kernels of the tensor_layout family.
#include "kernel.h"

namespace edgert::cpu {

void register_tensor_layout_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
