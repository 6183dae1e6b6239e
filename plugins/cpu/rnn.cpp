// TODO(owner): kernels of the rnn family.
#include "kernel.h"

namespace edgert::cpu {

void register_rnn_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace edgert::cpu
