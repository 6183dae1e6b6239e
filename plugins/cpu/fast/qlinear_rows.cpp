#include "fast/qlinear_rows.h"

#include <utility>

#include "fast/avx512_bw.h"

namespace edgert::cpu::qrows {

#if defined(__x86_64__)
namespace {

// The AVX2 family asks for what the builder's "-avx2" suffix asks of a board (AVX2 with FMA,
// x86-64-v3), though these rows never fuse a multiply and an add.
bool avx2_available() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

}  // namespace
#endif

const RowKernels* row_kernels(int64_t tactic) {
  switch (static_cast<RowIsa>(tactic)) {
#if defined(__x86_64__)
    case RowIsa::Avx512: {
      static const RowKernels avx512{quantize_u8_avx512, dequantize_u8_avx512, qlinear_add_u8_avx512,
                                     qlinear_mul_u8_avx512, plane_sums_u8_avx512};
      return avx512_bw_available() ? &avx512 : nullptr;
    }
    case RowIsa::Avx2: {
      static const RowKernels avx2{quantize_u8_avx2, dequantize_u8_avx2, qlinear_add_u8_avx2, qlinear_mul_u8_avx2,
                                   plane_sums_u8_avx2};
      return avx2_available() ? &avx2 : nullptr;
    }
#endif
#if defined(__aarch64__)
    case RowIsa::Neon: {
      // Advanced SIMD is part of every ARMv8-A Linux target.
      static const RowKernels neon{quantize_u8_neon, dequantize_u8_neon, qlinear_add_u8_neon, qlinear_mul_u8_neon,
                                   plane_sums_u8_neon};
      return &neon;
    }
#endif
    default: return nullptr;
  }
}

std::vector<TacticSpec> row_tactics(const RowTacticNames& names) {
  std::vector<TacticSpec> out;
  for (const auto& [isa, name] : {std::pair{RowIsa::Avx512, names.avx512}, std::pair{RowIsa::Avx2, names.avx2},
                                  std::pair{RowIsa::Neon, names.neon}})
    if (row_kernels(tactic_id(isa))) out.push_back({tactic_id(isa), name});
  return out;
}

}  // namespace edgert::cpu::qrows
