// The SGEMM's float16 tile (Isa::NeonFp16) for Armv8.2 cores with half-precision arithmetic
// (Cortex-A76, A78AE of the Orin): 8 rows x 16 columns in 16 registers of 8 halves, one FMLA by
// lane per 8 products, twice the products of the float32 tile per instruction. Sums stay in
// float16 for at most kChunk k, then go into C in float32: a float16 sum of the whole K (4608
// for a 3x3 over 512 channels) would lose about log2(K) of its 11 bits. Compiled for
// armv8.2-a+fp16 through the target pragma only; sgemm.cpp calls it only where the CPU reports
// FPHP and ASIMDHP and the convolution was allowed float16.
#if defined(__aarch64__)
#include <arm_neon.h>

#include "gemm/microkernels.h"

namespace edgert::cpu::gemm {

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+fp16")

namespace {

constexpr int64_t kChunk = 128;

}  // namespace

void ukernel_8x16_neonfp16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  const float16_t* ap = reinterpret_cast<const float16_t*>(a);
  const float16_t* bp = reinterpret_cast<const float16_t*>(b);
  for (int64_t k0 = 0; k0 < kc || k0 == 0; k0 += kChunk) {
    const int64_t steps = kc - k0 < kChunk ? kc - k0 : kChunk;
    float16x8_t acc[8][2];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) acc[r][0] = acc[r][1] = vdupq_n_f16(0);
    for (int64_t p = 0; p < steps; ++p) {
      const float16x8_t b0 = vld1q_f16(bp), b1 = vld1q_f16(bp + 8), av = vld1q_f16(ap);
#define EDGERT_FP16_ROW(r)                               \
  acc[r][0] = vfmaq_laneq_f16(acc[r][0], b0, av, r); \
  acc[r][1] = vfmaq_laneq_f16(acc[r][1], b1, av, r);
      EDGERT_FP16_ROW(0)
      EDGERT_FP16_ROW(1)
      EDGERT_FP16_ROW(2)
      EDGERT_FP16_ROW(3)
      EDGERT_FP16_ROW(4)
      EDGERT_FP16_ROW(5)
      EDGERT_FP16_ROW(6)
      EDGERT_FP16_ROW(7)
#undef EDGERT_FP16_ROW
      ap += 8;
      bp += 16;
    }
    // The first chunk stores or adds as asked; later ones add to what the first stored.
    const bool add = accumulate || k0 > 0;
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      float* row = c + r * ldc;
      float32x4_t v[4] = {vcvt_f32_f16(vget_low_f16(acc[r][0])), vcvt_high_f32_f16(acc[r][0]),
                          vcvt_f32_f16(vget_low_f16(acc[r][1])), vcvt_high_f32_f16(acc[r][1])};
      for (int q = 0; q < 4; ++q) {
        if (add) v[q] = vaddq_f32(v[q], vld1q_f32(row + 4 * q));
        vst1q_f32(row + 4 * q, v[q]);
      }
    }
    if (kc == 0) break;
  }
}

void fp16_in_place_neon(float* panel, int64_t kc) {
  float16_t* out = reinterpret_cast<float16_t*>(panel);
  for (int64_t p = 0; p < kc; ++p) {
    const float* row = panel + 16 * p;
    const float32x4_t r0 = vld1q_f32(row), r1 = vld1q_f32(row + 4), r2 = vld1q_f32(row + 8), r3 = vld1q_f32(row + 12);
    // Every float of row p is in registers before halfwords [16 p, 16 p + 16) are written.
    vst1q_f16(out + 16 * p, vcombine_f16(vcvt_f16_f32(r0), vcvt_f16_f32(r1)));
    vst1q_f16(out + 16 * p + 8, vcombine_f16(vcvt_f16_f32(r2), vcvt_f16_f32(r3)));
  }
}

#pragma GCC pop_options

}  // namespace edgert::cpu::gemm
#endif
