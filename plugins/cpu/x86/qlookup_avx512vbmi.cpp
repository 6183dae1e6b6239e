#if defined(__x86_64__)
#include <immintrin.h>

#include "fast/qlookup.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vbmi")

namespace edgert::cpu::qlookup {

void lookup_u8_avx512vbmi(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 m = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i index = _mm512_maskz_loadu_epi8(m, x + i);
    const __m512i low = _mm512_permutex2var_epi8(t0, index, t1);   // entries index & 127 of 0-127
    const __m512i high = _mm512_permutex2var_epi8(t2, index, t3);  // the same of 128-255
    _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high));
  }
}

}  // namespace edgert::cpu::qlookup

EDGERT_ISA_REGION_END
#endif
