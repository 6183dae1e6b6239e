// Optimized float32 Sigmoid / HardSigmoid / HardSwish / Gelu, tactic f32-activation-rows-portable
// (id 90): the vectorized activations of the fused epilogues (gemm::apply_activation), over
// chunks spread on the thread pool. Same formulas as the epilogues, so a Conv followed by one
// of these ops gives the bits of the FusedConv that replaces them. (The loops dispatch to their
// AVX2 copy at run time; both round identically, hence one ISA-neutral tactic.)
#pragma once

#include <vector>

#include "activation.h"
#include "kernel.h"

namespace edgert::cpu {

constexpr int64_t kActivationRowsTactic = 90;

std::vector<TacticSpec> activation_tactics(const edgert_node* node, const edgert_tensor* inputs);
void activation_rows(const float* x, float* y, int64_t n, const Activation& activation);

}  // namespace edgert::cpu
