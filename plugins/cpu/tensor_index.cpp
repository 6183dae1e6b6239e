// TODO(owner): kernels of the tensor_index family.
#include "kernel.h"

namespace edgert::cpu {

void register_tensor_index_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
