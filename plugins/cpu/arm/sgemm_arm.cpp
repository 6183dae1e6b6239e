// NEON micro-kernel of the packed SGEMM: 6 rows x 16 columns in 24 q-register accumulators,
// four B vectors and the six A values (one q and one d register) per step, FMA by lane.
#if defined(__aarch64__)
#include <arm_neon.h>

#include "gemm/microkernels.h"

namespace edgert::cpu::gemm {

void ukernel_6x16_neon(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  float32x4_t acc[6][4];
  for (int r = 0; r < 6; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = vdupq_n_f32(0.0f);
  for (int64_t p = 0; p < kc; ++p) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
    const float32x4_t a03 = vld1q_f32(a);
    const float32x2_t a45 = vld1_f32(a + 4);
#define EDGERT_NEON_ROW(r, vec, lane)                          \
  acc[r][0] = vfmaq_lane##vec##_f32(acc[r][0], b0, src, lane); \
  acc[r][1] = vfmaq_lane##vec##_f32(acc[r][1], b1, src, lane); \
  acc[r][2] = vfmaq_lane##vec##_f32(acc[r][2], b2, src, lane); \
  acc[r][3] = vfmaq_lane##vec##_f32(acc[r][3], b3, src, lane);
    {
      const float32x4_t src = a03;
      EDGERT_NEON_ROW(0, q, 0)
      EDGERT_NEON_ROW(1, q, 1)
      EDGERT_NEON_ROW(2, q, 2)
      EDGERT_NEON_ROW(3, q, 3)
    }
    {
      const float32x2_t src = a45;
      EDGERT_NEON_ROW(4, , 0)
      EDGERT_NEON_ROW(5, , 1)
    }
#undef EDGERT_NEON_ROW
    a += 6;
    b += 16;
  }
  for (int r = 0; r < 6; ++r) {
    float* row = c + r * ldc;
    for (int q = 0; q < 4; ++q) {
      float32x4_t v = acc[r][q];
      if (accumulate) v = vaddq_f32(v, vld1q_f32(row + 4 * q));
      vst1q_f32(row + 4 * q, v);
    }
  }
}

}  // namespace edgert::cpu::gemm
#endif
