// The AVX2 INT8 elementwise rows of fast/qlinear_rows.h, 16 elements a step (two vectors of 8).
// AVX2 has no masked byte loads: a run's last partial step works on zero-padded copies on the
// stack, and only its first bytes are copied out. Every result goes through the same float
// operations as the scalar formula, in its order (this file compiles without FMA contraction),
// then the requantisation: clamp to whole-number bounds (a NaN becomes the lower one, as
// saturate_round's 0), round half to even with vcvtps2dq, add the zero point, pack with
// unsigned saturation.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "fast/qlinear_rows.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx2,fma")

namespace edgert::cpu::qrows {

namespace {

constexpr int64_t kStep = 16;

// The 16 bytes at p as two vectors of 8 int32, less the zero point.
struct Bytes16 {
  __m256i lo, hi;
  Bytes16(const uint8_t* p, __m256i zero_point) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    lo = _mm256_sub_epi32(_mm256_cvtepu8_epi32(b), zero_point);
    hi = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)), zero_point);
  }
};

struct Requantize {
  __m256 lo, hi;
  __m256i zero_point;
  explicit Requantize(int32_t zp)
      : lo(_mm256_set1_ps(static_cast<float>(-zp))), hi(_mm256_set1_ps(static_cast<float>(255 - zp))),
        zero_point(_mm256_set1_epi32(zp)) {}
  __m256i round(__m256 v) const {
    // vmaxps returns its second operand when either is NaN.
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), zero_point);
  }
  // Elements 0-7 in v0, 8-15 in v1, all within [0, 255] once rounded.
  void store16(__m256 v0, __m256 v1, uint8_t* y) const {
    // packus works within 128-bit lanes: words [0-3, 8-11 | 4-7, 12-15], put back in order.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(round(v0), round(v1)), _MM_SHUFFLE(3, 1, 2, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y),
                     _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
  }
};

// block(a + i, b + i * b_step, c + i) for every step of 16 in [0, n); the last partial step
// reads zero-padded copies and writes a copy of which n % 16 bytes are kept.
template <typename Block>
void byte_steps(const uint8_t* a, const uint8_t* b, int64_t b_step, int64_t n, uint8_t* c, Block block) {
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) block(a + i, b + i * b_step, c + i);
  if (i == n) return;
  const size_t left = static_cast<size_t>(n - i);
  uint8_t a_tail[kStep] = {}, b_tail[kStep] = {}, c_tail[kStep];
  std::memcpy(a_tail, a + i, left);
  if (b_step) std::memcpy(b_tail, b + i, left);
  block(a_tail, b_step ? b_tail : b, c_tail);
  std::memcpy(c + i, c_tail, left);
}

}  // namespace

void quantize_u8_avx2(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y) {
  const Requantize out(zero_point);
  const __m256 s = _mm256_set1_ps(scale);
  auto block = [&](const float* xi, uint8_t* yi) {
    out.store16(_mm256_div_ps(_mm256_loadu_ps(xi), s), _mm256_div_ps(_mm256_loadu_ps(xi + 8), s), yi);
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) block(x + i, y + i);
  if (i == n) return;
  const size_t left = static_cast<size_t>(n - i);
  float x_tail[kStep] = {};
  uint8_t y_tail[kStep];
  std::memcpy(x_tail, x + i, left * sizeof(float));
  block(x_tail, y_tail);
  std::memcpy(y + i, y_tail, left);
}

void dequantize_u8_avx2(const uint8_t* x, int64_t n, int32_t zero_point, float scale, float* y) {
  const __m256i zp = _mm256_set1_epi32(zero_point);
  const __m256 s = _mm256_set1_ps(scale);
  auto block = [&](const uint8_t* xi, float* yi) {
    const Bytes16 q(xi, zp);
    _mm256_storeu_ps(yi, _mm256_mul_ps(_mm256_cvtepi32_ps(q.lo), s));
    _mm256_storeu_ps(yi + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(q.hi), s));
  };
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) block(x + i, y + i);
  if (i == n) return;
  const size_t left = static_cast<size_t>(n - i);
  uint8_t x_tail[kStep] = {};
  float y_tail[kStep];
  std::memcpy(x_tail, x + i, left);
  block(x_tail, y_tail);
  std::memcpy(y + i, y_tail, left * sizeof(float));
}

void qlinear_add_u8_avx2(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int64_t b_step, int32_t zb,
                         float rb, int64_t n, int32_t zc, uint8_t* c) {
  const Requantize out(zc);
  const __m256i zpa = _mm256_set1_epi32(za), zpb = _mm256_set1_epi32(zb);
  const __m256 sa = _mm256_set1_ps(ra), sb = _mm256_set1_ps(rb);
  // One b for the run: its term is the same float every time.
  const __m256 b_term = _mm256_set1_ps(static_cast<float>(static_cast<int32_t>(b[0]) - zb) * rb);
  byte_steps(a, b, b_step, n, c, [&](const uint8_t* ai, const uint8_t* bi, uint8_t* ci) {
    const Bytes16 da(ai, zpa);
    __m256 tb_lo = b_term, tb_hi = b_term;
    if (b_step) {
      const Bytes16 db(bi, zpb);
      tb_lo = _mm256_mul_ps(_mm256_cvtepi32_ps(db.lo), sb);
      tb_hi = _mm256_mul_ps(_mm256_cvtepi32_ps(db.hi), sb);
    }
    out.store16(_mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(da.lo), sa), tb_lo),
                _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(da.hi), sa), tb_hi), ci);
  });
}

void qlinear_mul_u8_avx2(const uint8_t* a, int32_t za, const uint8_t* b, int64_t b_step, int32_t zb, float r,
                         int64_t n, int32_t zc, uint8_t* c) {
  const Requantize out(zc);
  const __m256i zpa = _mm256_set1_epi32(za), zpb = _mm256_set1_epi32(zb);
  const __m256 scale = _mm256_set1_ps(r);
  const __m256i b_one = _mm256_set1_epi32(static_cast<int32_t>(b[0]) - zb);  // one b for the run
  byte_steps(a, b, b_step, n, c, [&](const uint8_t* ai, const uint8_t* bi, uint8_t* ci) {
    const Bytes16 da(ai, zpa);
    __m256i db_lo = b_one, db_hi = b_one;
    if (b_step) {
      const Bytes16 db(bi, zpb);
      db_lo = db.lo, db_hi = db.hi;
    }
    out.store16(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(da.lo, db_lo)), scale),
                _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(da.hi, db_hi)), scale), ci);
  });
}

void plane_sums_u8_avx2(const uint8_t* x, int64_t planes, int64_t size, int64_t* sums) {
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t p = 0; p < planes; ++p, x += size) {
    // vpsadbw against zero: the sum of each 8 bytes in a 64-bit lane.
    __m256i s0 = zero, s1 = zero;
    int64_t i = 0;
    for (; i + 64 <= size; i += 64) {
      s0 = _mm256_add_epi64(s0, _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), zero));
      s1 = _mm256_add_epi64(s1,
                            _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 32)), zero));
    }
    if (i + 32 <= size) {
      s0 = _mm256_add_epi64(s0, _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), zero));
      i += 32;
    }
    const __m256i s = _mm256_add_epi64(s0, s1);
    const __m128i half = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    int64_t sum = _mm_cvtsi128_si64(half) + _mm_extract_epi64(half, 1);
    for (; i < size; ++i) sum += x[i];
    sums[p] = sum;
  }
}

}  // namespace edgert::cpu::qrows

EDGERT_ISA_REGION_END
#endif
