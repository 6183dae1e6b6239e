// The AVX-512 INT8 elementwise rows of fast/qlinear_rows.h, 16 elements a vector (the tail
// masked). Every result goes through the same float operations as the scalar formula, in its
// order, then the requantisation of x86/qgemm_avx512vnni.cpp: clamp to whole-number bounds
// (a NaN becomes the lower one, as saturate_round's 0), round half to even with vcvtps2dq,
// add the zero point, store with vpmovusdb.
#if defined(__x86_64__)
#include <immintrin.h>

#include "fast/qlinear_rows.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::qrows {

namespace {

inline __mmask16 lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

inline __m512 minus_zero_point(const uint8_t* x, __mmask16 m, __m512i zero_point) {
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x)), zero_point));
}

struct Requantize {
  __m512 lo, hi;
  __m512i zero_point;
  explicit Requantize(int32_t zp)
      : lo(_mm512_set1_ps(static_cast<float>(-zp))), hi(_mm512_set1_ps(static_cast<float>(255 - zp))),
        zero_point(_mm512_set1_epi32(zp)) {}
  void store(__m512 v, uint8_t* y, __mmask16 m) const {
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm512_mask_cvtusepi32_storeu_epi8(y, m, _mm512_add_epi32(_mm512_cvtps_epi32(v), zero_point));
  }
};

}  // namespace

void quantize_u8_avx512(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y) {
  const Requantize out(zero_point);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes16(n - i);
    out.store(_mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), s), y + i, m);
  }
}

void dequantize_u8_avx512(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y) {
  const __m512i zp = _mm512_set1_epi32(zero_point);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(minus_zero_point(x + i, m, zp), s));
  }
}

void qlinear_add_u8_avx512(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                           float rb, int64_t n, int32_t zc, uint8_t* c) {
  const Requantize out(zc);
  const __m512i zpa = _mm512_set1_epi32(za), zpb = _mm512_set1_epi32(zb);
  const __m512 sa = _mm512_set1_ps(ra), sb = _mm512_set1_ps(rb);
  // One b for the run: its term is the same float every time.
  const __m512 b_term = _mm512_set1_ps(static_cast<float>(static_cast<int32_t>(b[0]) - zb) * rb);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes16(n - i);
    const __m512 ta = _mm512_mul_ps(minus_zero_point(a + i, m, zpa), sa);
    const __m512 tb = b_step ? _mm512_mul_ps(minus_zero_point(b + i, m, zpb), sb) : b_term;
    out.store(_mm512_add_ps(ta, tb), c + i, m);
  }
}

void qlinear_mul_u8_avx512(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                           int64_t n, int32_t zc, uint8_t* c) {
  const Requantize out(zc);
  const __m512i zpa = _mm512_set1_epi32(za), zpb = _mm512_set1_epi32(zb);
  const __m512 scale = _mm512_set1_ps(r);
  const __m512i b_one = _mm512_set1_epi32(static_cast<int32_t>(b[0]) - zb);  // one b for the run
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes16(n - i);
    const __m512i da = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a + i)), zpa);
    const __m512i db = b_step ? _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, b + i)), zpb) : b_one;
    out.store(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(da, db)), scale), c + i, m);
  }
}

void plane_sums_u8_avx512(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t p = 0; p < planes; ++p, x += size) {
    // vpsadbw against zero: the sum of each 8 bytes in a 64-bit lane.
    __m512i s0 = zero, s1 = zero;
    int64_t i = 0;
    for (; i + 128 <= size; i += 128) {
      s0 = _mm512_add_epi64(s0, _mm512_sad_epu8(_mm512_loadu_si512(x + i), zero));
      s1 = _mm512_add_epi64(s1, _mm512_sad_epu8(_mm512_loadu_si512(x + i + 64), zero));
    }
    for (; i < size; i += 64) {
      const int64_t left = size - i;
      const __mmask64 m = left >= 64 ? ~0ull : ((1ull << left) - 1ull);
      s0 = _mm512_add_epi64(s0, _mm512_sad_epu8(_mm512_maskz_loadu_epi8(m, x + i), zero));
    }
    sums[p] = _mm512_reduce_add_epi64(_mm512_add_epi64(s0, s1));
  }
}

}  // namespace edgert::cpu::qrows

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
