// Whether this CPU runs the plugin's byte kernels (INT8 depthwise, QuantizeLinear,
// QLinearAdd, ...): AVX-512 F with BW and VL, for masked byte loads and stores.
#pragma once

namespace edgert::cpu {

inline bool avx512_bw_available() {
#if defined(__x86_64__)
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl");
  return available;
#else
  return false;
#endif
}

}  // namespace edgert::cpu
