// The AVX-512 VNNI GEMV of gemm/qgemv.h: per panel of 16 output channels, 4 independent
// accumulators over the k groups (one 64-byte weight load and one vpdpbusd with x's 4 bytes
// broadcast each), summed, requantised as qgemm's tile does. Compiled for AVX-512 VNNI through
// the target pragma only; callers check qgemv_available().
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gemm/qgemv.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace edgert::cpu::gemm {

bool qgemv_available() {
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return available;
}

void qgemv_avx512vnni(const PackedQColumns& w, int64_t panel_begin, int64_t panel_end, const uint8_t* x,
                      int64_t x_stride, int32_t x_zero_point, const int32_t* row_bias, const float* multiplier,
                      int32_t y_zero_point, uint8_t* y, int64_t y_stride, uint8_t* x4) {
  const int64_t groups = w.groups();
  for (int64_t p = 0; p < 4 * groups; ++p) x4[p] = p < w.k ? x[p * x_stride] : static_cast<uint8_t>(x_zero_point);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(-y_zero_point));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(255 - y_zero_point));
  const __m512i zp = _mm512_set1_epi32(y_zero_point);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t r0 = panel * kQgemvPanelRows;
    const __mmask16 rows = static_cast<__mmask16>(w.m - r0 >= 16 ? 0xFFFF : (1u << (w.m - r0)) - 1u);
    const int8_t* wp = w.values() + panel * w.panel_bytes();
    __m512i acc[4] = {_mm512_maskz_loadu_epi32(rows, row_bias + r0), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512()};
    int64_t g = 0;
    for (; g + 4 <= groups; g += 4)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        int32_t four;
        std::memcpy(&four, x4 + 4 * (g + i), sizeof four);
        acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(four), _mm512_loadu_si512(wp + 64 * (g + i)));
      }
    for (; g < groups; ++g) {
      int32_t four;
      std::memcpy(&four, x4 + 4 * g, sizeof four);
      acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_set1_epi32(four), _mm512_loadu_si512(wp + 64 * g));
    }
    const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
    const __m512 scale = _mm512_maskz_loadu_ps(rows, multiplier + r0);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), scale);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    const __m128i bytes = _mm512_cvtusepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zp));
    alignas(16) uint8_t out[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), bytes);
    for (int64_t r = 0; r < 16 && r0 + r < w.m; ++r) y[(r0 + r) * y_stride] = out[r];
  }
}

}  // namespace edgert::cpu::gemm

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
