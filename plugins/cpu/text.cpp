// TODO(owner): kernels of the text family.
#include "kernel.h"

namespace edgert::cpu {

void register_text_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
