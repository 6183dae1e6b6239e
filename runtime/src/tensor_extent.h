// Size and shape text of a tensor: shared by the loader, the executor and the control-flow ops,
// kept apart from the executor so the loader (and its fuzzer) link without it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "edgert/plugin.h"

namespace edgert {

// Bytes the tensor's dims hold; false for an unknown dim or a size that overflows 64 bits.
bool tensor_bytes(const edgert_tensor& t, size_t* bytes);
// "[1x3x?x224]": dims as messages print them, -1 as '?'.
std::string shape_text(const int64_t* dims, int32_t rank);

}  // namespace edgert
