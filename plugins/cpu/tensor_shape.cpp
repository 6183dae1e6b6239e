// TODO(owner): kernels of the tensor_shape family.
#include "kernel.h"

namespace edgert::cpu {

void register_tensor_shape_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
