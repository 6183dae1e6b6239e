// The mean of each plane for AVX-512 (tactic f32-global-avgpool-rows-avx512): four 16-lane
// partial sums, the plane's tail masked. The portable loop (fast/pool_rows.cpp), compiled for
// the baseline ISA, summed 4 floats an instruction; the squeeze-and-excitation blocks of
// efficientnet_b0 pool 2.2 million floats an inference through it (2% of its time).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "fast/pool_rows.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f")
// GCC 12 reports the _mm512_undefined_ps inside its own masked-load intrinsic as maybe
// uninitialized (see x86/pack_b_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu {

void plane_means_avx512(const float* x, float* y, int64_t planes, int64_t size) {
  const float scale = size > 0 ? 1.0f / static_cast<float>(size) : 0.0f;
  for (int64_t p = 0; p < planes; ++p, x += size) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= size; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
    }
    for (; i + 16 <= size; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    if (i < size) a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (size - i)) - 1u), x + i));
    // The sum times 1 / size, not divided by it: the reference divides a double sum, and both
    // are within a rounding of each other's float.
    y[p] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))) * scale;
  }
}

}  // namespace edgert::cpu

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
