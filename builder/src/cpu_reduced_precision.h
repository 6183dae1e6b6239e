// Reduced float precision on the CPU: --bf16 (AVX512_BF16) and --fp16 (ARMv8.2 half-precision
// arithmetic) let float32 convolutions the CPU runs multiply in bfloat16 or float16 with float32
// sums, as TensorRT's --bf16/--fp16 do: a permission, not an order. The tensors between layers
// stay float32; each allowed layer lists its reduced-precision tactics beside its float32 ones
// and the tuner keeps whichever is faster, so a layer only ever gets faster.
#pragma once

#include <string>

#include "ir.h"

namespace edgert::builder {

// Node attributes the CPU plugin reads: its convolutions list bfloat16 / float16 tactics only
// when these are 1.
inline constexpr const char* kAllowBf16Attribute = "allow_bf16";
inline constexpr const char* kAllowFp16Attribute = "allow_fp16";

// Marks every float convolution placed on the CPU (Conv, FusedConv) of the main graph with the
// allowed precisions, but the first `float32_prefix` of them, which the accuracy check keeps in
// float32 (fp16_accuracy.h). Returns how many there are, those kept included.
int allow_cpu_reduced_precision(Model& model, bool bf16, bool fp16, int32_t float32_prefix);

// After kernel selection: the precision note (inspect) of each marked layer, from the tactic the
// tuner kept: "bfloat16 (--bf16, timed faster than float32)" and the like. `timed`: the tuner
// timed on this machine (else it took timing cache records or the first-listed tactic).
void note_cpu_reduced_precision(Model& model, bool timed);

}  // namespace edgert::builder
