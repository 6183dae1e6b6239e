// The table lookup of edgert.QLookup (qlookup.cpp) on AVX-512 VBMI: 64 bytes a step, the 256
// entries held in four registers, two vpermi2b (entries 0-127 and 128-255 by the low seven
// bits) and a blend on each byte's high bit.
#pragma once

#include <cstdint>

namespace edgert::cpu::qlookup {

inline bool avx512_vbmi_available() {
#if defined(__x86_64__)
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vbmi");
  return available;
#else
  return false;
#endif
}

#if defined(__x86_64__)
// y[i] = table[x[i]] for i < n (the caller checks avx512_vbmi_available()).
void lookup_u8_avx512vbmi(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
#endif

}  // namespace edgert::cpu::qlookup
