// bfloat16 pairs for the SGEMM's Avx512Bf16 family (sgemm.h): vdpbf16ps multiplies two bfloat16
// of one 32-bit lane by the two of the other's same lane and adds both products to a float32
// sum, so A and B are packed with two consecutive k of one row (A) or column (B) in each 32-bit
// slot, the lower k in the low half. A k block of odd length pairs its last k with a zero.
#pragma once

#include <cstdint>
#include <cstring>

#include "dtype.h"

namespace edgert::cpu::gemm {

// One packed slot: (low, high) as bfloat16, stored where a float of the packing would be.
inline float bfloat16_pair(float low, float high) {
  // Rounded to nearest even as vcvtneps2bf16 rounds B (dtype.h), so A and B round alike.
  const uint32_t slot = static_cast<uint32_t>(bfloat16::from_float(low)) |
                        static_cast<uint32_t>(bfloat16::from_float(high)) << 16;
  float out;
  std::memcpy(&out, &slot, sizeof out);
  return out;
}

#if defined(__x86_64__)
// A packed B panel of kc rows x 32 columns of floats (sgemm's pack_b) turned, where it lies,
// into ceil(kc / 2) rows of 32 bfloat16 pairs: pair q of column j at slot q * 32 + j. Every
// pair is read before anything at or past its slots is written, so no copy is needed.
void bf16_pairs_in_place_avx512bf16(float* panel, int64_t kc);
#endif

}  // namespace edgert::cpu::gemm
