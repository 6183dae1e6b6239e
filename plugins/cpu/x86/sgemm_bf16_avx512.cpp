// The SGEMM's bfloat16 tile (Isa::Avx512Bf16): 8 rows x 32 columns in 16 zmm float32 sums, each
// k step two k values at once (vdpbf16ps: twice the products of an FMA per instruction), A's
// pair for a row broadcast from memory, B's 32 pairs in two vectors; and the conversion of a
// packed float B panel into pairs. Compiled for AVX512_BF16 through the target attribute only;
// sgemm.cpp calls it only when the CPU reports it and the convolution was allowed bfloat16.
#if defined(__x86_64__)
#include <immintrin.h>

#include "gemm/bf16_pairs.h"
#include "gemm/microkernels.h"
#include "x86/isa_region.h"

namespace edgert::cpu::gemm {

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512bf16")

void ukernel_8x32_avx512bf16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  // Fully unrolled, so the 16 sums stay in registers (GCC keeps a rolled loop's array in memory).
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t pairs = (kc + 1) / 2;
  const int32_t* ap = reinterpret_cast<const int32_t*>(a);
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)(_mm512_loadu_si512(b));
    const __m512bh b1 = (__m512bh)(_mm512_loadu_si512(b + 16));
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m512bh ar = (__m512bh)(_mm512_set1_epi32(ap[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
    ap += 8;
    b += 32;
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_loadu_ps(row));
      acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_loadu_ps(row + 16));
    }
    _mm512_storeu_ps(row, acc[r][0]);
    _mm512_storeu_ps(row + 16, acc[r][1]);
  }
}

void bf16_pairs_in_place_avx512bf16(float* panel, int64_t kc) {
  // cvtne2ps gives the 16 bfloat16 of `low` in halfwords 0-15 and those of `high` in 16-31;
  // the permutation interleaves them into (low j, high j) pairs.
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const float* low = panel + 2 * q * 32;
    const bool has_high = 2 * q + 1 < kc;
    __m512i out[2];
    for (int h = 0; h < 2; ++h) {
      const __m512 lo = _mm512_loadu_ps(low + 16 * h);
      const __m512 hi = has_high ? _mm512_loadu_ps(low + 32 + 16 * h) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      out[h] = _mm512_permutexvar_epi16(interleave, both);
    }
    _mm512_storeu_si512(panel + q * 32, out[0]);
    _mm512_storeu_si512(panel + q * 32 + 16, out[1]);
  }
}

EDGERT_ISA_REGION_END

}  // namespace edgert::cpu::gemm
#endif
