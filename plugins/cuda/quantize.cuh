// Rounding a float to a uint8 quantization level as the CPU reference does (saturate_round in
// plugins/cpu/nn_common.h): round half to even, add the zero point, saturate to [0, 255] (NaN
// gives 0). Every INT8 kernel of this plugin ends here, so their bytes equal the CPU's.
#pragma once

#include <cstdint>

namespace edgert::cuda {

__device__ __forceinline__ uint8_t saturate_u8(float value, int32_t zero_point) {
  const float r = rintf(value) + static_cast<float>(zero_point);
  return static_cast<uint8_t>(fminf(fmaxf(r, 0.f), 255.f));
}

}  // namespace edgert::cuda
