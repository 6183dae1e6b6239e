// x86 micro-kernels of the packed SGEMM. AVX2+FMA: 6 rows x 16 columns held in 12 ymm accumulators,
// two B vectors and one broadcast A value per step. Compiled for AVX2 through the target
// attribute only (the rest of the plugin stays baseline x86-64); sgemm.cpp calls it only when
// the CPU reports AVX2 and FMA.
#if defined(__x86_64__)
#include <immintrin.h>

#include "gemm/microkernels.h"
#include "gemm/sgemm.h"

namespace edgert::cpu::gemm {

__attribute__((target("avx2,fma"))) void ukernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                            int64_t ldc, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += 6;
    b += 16;
  }
  float* r0 = c;
  float* r1 = c + ldc;
  float* r2 = c + 2 * ldc;
  float* r3 = c + 3 * ldc;
  float* r4 = c + 4 * ldc;
  float* r5 = c + 5 * ldc;
  if (accumulate) {
    c00 = _mm256_add_ps(c00, _mm256_loadu_ps(r0));
    c01 = _mm256_add_ps(c01, _mm256_loadu_ps(r0 + 8));
    c10 = _mm256_add_ps(c10, _mm256_loadu_ps(r1));
    c11 = _mm256_add_ps(c11, _mm256_loadu_ps(r1 + 8));
    c20 = _mm256_add_ps(c20, _mm256_loadu_ps(r2));
    c21 = _mm256_add_ps(c21, _mm256_loadu_ps(r2 + 8));
    c30 = _mm256_add_ps(c30, _mm256_loadu_ps(r3));
    c31 = _mm256_add_ps(c31, _mm256_loadu_ps(r3 + 8));
    c40 = _mm256_add_ps(c40, _mm256_loadu_ps(r4));
    c41 = _mm256_add_ps(c41, _mm256_loadu_ps(r4 + 8));
    c50 = _mm256_add_ps(c50, _mm256_loadu_ps(r5));
    c51 = _mm256_add_ps(c51, _mm256_loadu_ps(r5 + 8));
  }
  _mm256_storeu_ps(r0, c00);
  _mm256_storeu_ps(r0 + 8, c01);
  _mm256_storeu_ps(r1, c10);
  _mm256_storeu_ps(r1 + 8, c11);
  _mm256_storeu_ps(r2, c20);
  _mm256_storeu_ps(r2 + 8, c21);
  _mm256_storeu_ps(r3, c30);
  _mm256_storeu_ps(r3 + 8, c31);
  _mm256_storeu_ps(r4, c40);
  _mm256_storeu_ps(r4 + 8, c41);
  _mm256_storeu_ps(r5, c50);
  _mm256_storeu_ps(r5 + 8, c51);
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")
// GCC 12's false positive on its own masked max/min intrinsics (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

#include "x86/activation_lanes_avx512.h"

// AVX-512F: 8 rows x 32 columns in 16 zmm accumulators; the A values come as embedded
// broadcasts. On cores with full-width 512-bit FMA units this doubles the AVX2 kernel's peak.
// With an epilogue, each sum is finished in registers before its one store: + bias of its row,
// + addend (read before the store: it may be C itself), activation — the order of
// sgemm.cpp's finish_tile and of the unfused graph.
template <bool kEpilogue>
__attribute__((always_inline)) inline void kernel_8x32(int64_t kc, const float* a, const float* b, float* c,
                                                       int64_t ldc, bool accumulate, const TileEpilogue* e) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
    a += 8;
    b += 32;
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_loadu_ps(row));
      acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_loadu_ps(row + 16));
    }
    if (kEpilogue) {
      if (e->bias_row) {
        const __m512 bias = _mm512_set1_ps(e->bias_row[r]);
        acc[r][0] = _mm512_add_ps(acc[r][0], bias);
        acc[r][1] = _mm512_add_ps(acc[r][1], bias);
      }
      if (e->addend) {
        const float* z = e->addend + r * e->addend_ld;
        acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_loadu_ps(z));
        acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_loadu_ps(z + 16));
      }
      acc[r][0] = activate_lanes(acc[r][0], e->kind, e->p0, e->p1);
      acc[r][1] = activate_lanes(acc[r][1], e->kind, e->p0, e->p1);
    }
    _mm512_storeu_ps(row, acc[r][0]);
    _mm512_storeu_ps(row + 16, acc[r][1]);
  }
}

}  // namespace

void ukernel_8x32_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  kernel_8x32<false>(kc, a, b, c, ldc, accumulate, nullptr);
}

void ukernel_8x32_avx512_epilogue(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,
                                  const TileEpilogue& epilogue) {
  kernel_8x32<true>(kc, a, b, c, ldc, accumulate, &epilogue);
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace edgert::cpu::gemm
#endif
