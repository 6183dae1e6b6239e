// TODO(owner): kernels of the detection family.
#include "kernel.h"

namespace edgert::cpu {

void register_detection_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
