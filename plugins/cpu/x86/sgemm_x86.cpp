// x86 micro-kernels of the packed SGEMM. AVX2+FMA: 6 rows x 16 columns held in 12 ymm accumulators,
// two B vectors and one broadcast A value per step. Compiled for AVX2 through the target
// attribute only (the rest of the plugin stays baseline x86-64); sgemm.cpp calls it only when
// the CPU reports AVX2 and FMA.
#if defined(__x86_64__)
#include <immintrin.h>

#include <type_traits>

#include "gemm/microkernels.h"
#include "gemm/sgemm.h"
#include "x86/isa_region.h"

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

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl,fma")
// GCC 12's false positive on its own masked max/min intrinsics (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// ... and the _mm512_undefined_ps/pd inside its lane-shuffle intrinsics as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

#include "x86/activation_lanes_avx512.h"

// AVX-512F: 8 rows x 32 columns in 16 zmm accumulators; the A values come as embedded
// broadcasts. On cores with full-width 512-bit FMA units this doubles the AVX2 kernel's peak.
// With an epilogue, each sum is finished in registers before its one store: + bias of its row,
// + addend (read before the store: it may be C itself), activation — the order of
// sgemm.cpp's finish_tile and of the unfused graph.
// ldb: floats from one k row of the B panel to the next (32 packed; a strided B read in place:
// its row stride).
// kPrefetchNext: see ukernel_8x32_avx512_in_place.
template <bool kEpilogue, bool kPrefetchNext = false>
__attribute__((always_inline)) inline void kernel_8x32(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                       float* c, int64_t ldc, bool accumulate,
                                                       const TileEpilogue* e) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
    if (kPrefetchNext) {
      _mm_prefetch(reinterpret_cast<const char*>(b + 32), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + 48), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
    a += 8;
    b += ldb;
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

// Rows become columns: v[r][j] = v[j][r] for an 8 x 8 block of floats.
inline void transpose_8x8(__m256* v) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// The stores of a 48 x N tile (kernel_48xn below): epilogue, transpose, one store per row.
template <int N, bool kEpilogue, ActivationKind A, int kV>
inline void store_48xn(__m512 (&acc)[N][kV], float* c, int64_t ldc, bool accumulate, const TileEpilogue* e) {
  // Without an addend or earlier partial sums, bias and activation go on the accumulators, 16
  // rows of a column a vector, before the transpose: after it a row holds 7 or 8 values, and the
  // activation (SiLU's exp, a polynomial) ran on half-empty vectors, 48 of them a tile instead of
  // 21. The same operations in the same order: the same bits.
  const bool early = kEpilogue && !accumulate && !e->addend;
  if (early) {
#pragma GCC unroll 3
    for (int h = 0; h < kV; ++h) {
      const __m512 bias = e->bias_row ? _mm512_loadu_ps(e->bias_row + 16 * h) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        if (e->bias_row) acc[j][h] = _mm512_add_ps(acc[j][h], bias);
        acc[j][h] = activate_lanes(acc[j][h], A, e->p0, e->p1);
      }
    }
  }
  const __mmask8 columns = N == 8 ? 0xFF : 0x7F;
#pragma GCC unroll 6
  for (int q = 0; q < 2 * kV; ++q) {
    __m256 v[8];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      const __m512 whole = acc[j][q / 2];
      v[j] = _mm512_castps512_ps256(q % 2 ? _mm512_shuffle_f32x4(whole, whole, 0xEE) : whole);
    }
    if (N == 7) v[7] = _mm256_setzero_ps();
    transpose_8x8(v);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      float* row = c + (8 * q + r) * ldc;
      if (accumulate) v[r] = _mm256_add_ps(v[r], _mm256_maskz_loadu_ps(columns, row));
      if (kEpilogue && !early) {
        if (e->bias_row) v[r] = _mm256_add_ps(v[r], _mm256_set1_ps(e->bias_row[8 * q + r]));
        if (e->addend) v[r] = _mm256_add_ps(v[r], _mm256_maskz_loadu_ps(columns, e->addend + (8 * q + r) * e->addend_ld));
        v[r] = _mm512_castps512_ps256(activate_lanes(_mm512_zextps256_ps512(v[r]), A, e->p0, e->p1));
      }
      if (N == 8) {  // whole rows: a plain store (masked stores are slow on some cores)
        _mm256_storeu_ps(row, v[r]);
      } else {
        _mm256_mask_storeu_ps(row, columns, v[r]);
      }
    }
  }
}

// The epilogue's stores in a function of their own, the accumulators handed over in memory: in
// one function with the k loop, GCC gave the epilogue's constants (SiLU's polynomial) registers
// for the whole tile and kept 10 of the 21 accumulators on the stack through the loop, a load
// and a store per FMA; a 1x1 convolution 320 -> 1280 on 7x7 with SiLU took 0.44 ms against 0.21
// without. 21 stores and loads a tile instead.
template <int N, bool kEpilogue, ActivationKind A, int kV>
__attribute__((noinline)) void store_48xn_apart(__m512 (&acc)[N][kV], float* c, int64_t ldc, bool accumulate,
                                                const TileEpilogue* e) {
  store_48xn<N, kEpilogue, A, kV>(acc, c, ldc, accumulate, e);
}

// AVX-512F, tall tiles: 48 rows x N (7 or 8) columns, the 48 rows of A in the lanes of three
// vectors and each B value broadcast: 21 or 24 accumulators, 3 + N loads per 3 N FMAs (32
// rows took 9 per 14 and ran 10-20% slower). Made for B with few columns (a 7x7 image has 49):
// the 8x32 tile computes 64 columns there to keep 49, the 48x7 tile exactly 49; 48x8 takes the
// 16 tiles of Winograd on a 7x7 image. C's rows are A's rows, so the tile leaves the registers
// transposed: 8 x 8 blocks (N columns, then zeros), N lanes of each row stored.
// With an epilogue (kEpilogue; A the activation, a constant), each row is finished as it leaves
// the transpose, in finish_tile's order: + bias of its row, + addend (read before the store: it
// may be C itself), activation.
// kV < 3: 16 kV rows of a 48-row panel only, a from the first of them (a panel's last rows
// when A has no more, or a thread's share of A's rows that starts or ends inside the panel).
// kLive < N: only the panel's first kLive columns are B's (the last panel of a B whose width
// is not a multiple of N): the others are not multiplied and leave the tile as zeros.
// ldb: floats from one k row of B to the next (N packed; B read in place: its row stride).
template <int N, bool kEpilogue = false, ActivationKind A = ActivationKind::None, int kV = 3, int kLive = N>
inline void kernel_48xn(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                        const TileEpilogue* e = nullptr) {
  static_assert(N == 7 || N == 8, "7 or 8 columns");
  static_assert(kV >= 1 && kV <= 3, "1 to 3 vectors of A rows");
  static_assert(kLive >= 1 && kLive <= N, "1 to N live columns");
  constexpr int kPanelRows = 48;
  __m512 acc[N][kV];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j)
#pragma GCC unroll 3
    for (int h = 0; h < kV; ++h) acc[j][h] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m512 av[kV];
#pragma GCC unroll 3
    for (int h = 0; h < kV; ++h) av[h] = _mm512_loadu_ps(a + 16 * h);
#pragma GCC unroll 8
    for (int j = 0; j < kLive; ++j) {
      const __m512 bv = _mm512_set1_ps(b[j]);
#pragma GCC unroll 3
      for (int h = 0; h < kV; ++h) acc[j][h] = _mm512_fmadd_ps(av[h], bv, acc[j][h]);
    }
    a += kPanelRows;
    b += ldb;
  }
  if (kEpilogue) return store_48xn_apart<N, kEpilogue, A, kV>(acc, c, ldc, accumulate, e);
  store_48xn<N, kEpilogue, A, kV>(acc, c, ldc, accumulate, e);
}

}  // namespace

void ukernel_48x7_avx512_tall(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  kernel_48xn<7>(kc, a, b, 7, c, ldc, accumulate);
}

void ukernel_48x8_avx512_tall(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  kernel_48xn<8>(kc, a, b, 8, c, ldc, accumulate);
}

void ukernel_tall_rows_avx512(int vectors, int nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                              bool accumulate) {
  if (nr == 8) {
    if (vectors == 1) return kernel_48xn<8, false, ActivationKind::None, 1>(kc, a, b, 8, c, ldc, accumulate);
    if (vectors == 2) return kernel_48xn<8, false, ActivationKind::None, 2>(kc, a, b, 8, c, ldc, accumulate);
    return kernel_48xn<8>(kc, a, b, 8, c, ldc, accumulate);
  }
  if (vectors == 1) return kernel_48xn<7, false, ActivationKind::None, 1>(kc, a, b, 7, c, ldc, accumulate);
  if (vectors == 2) return kernel_48xn<7, false, ActivationKind::None, 2>(kc, a, b, 7, c, ldc, accumulate);
  kernel_48xn<7>(kc, a, b, 7, c, ldc, accumulate);
}

namespace {

template <int N, int kLive>
void tall_live_rows(int vectors, int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  if (vectors == 1) return kernel_48xn<N, false, ActivationKind::None, 1, kLive>(kc, a, b, N, c, ldc, accumulate);
  if (vectors == 2) return kernel_48xn<N, false, ActivationKind::None, 2, kLive>(kc, a, b, N, c, ldc, accumulate);
  kernel_48xn<N, false, ActivationKind::None, 3, kLive>(kc, a, b, N, c, ldc, accumulate);
}

template <int N>
void tall_narrow(int vectors, int live, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                 bool accumulate) {
  if (live == 1) return tall_live_rows<N, 1>(vectors, kc, a, b, c, ldc, accumulate);
  if (live == 2) return tall_live_rows<N, 2>(vectors, kc, a, b, c, ldc, accumulate);
  tall_live_rows<N, 3>(vectors, kc, a, b, c, ldc, accumulate);
}

}  // namespace

void ukernel_tall_narrow_avx512(int vectors, int nr, int live, int64_t kc, const float* a, const float* b, float* c,
                                int64_t ldc, bool accumulate) {
  if (nr == 8) return tall_narrow<8>(vectors, live, kc, a, b, c, ldc, accumulate);
  tall_narrow<7>(vectors, live, kc, a, b, c, ldc, accumulate);
}

namespace {

template <int N, int kV>
void tall_epilogue(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate,
                   const TileEpilogue* e) {
  with_lane_activation(e->kind, [&](auto kind) {
    kernel_48xn<N, true, decltype(kind)::value, kV>(kc, a, b, ldb, c, ldc, accumulate, e);
  });
}

template <int N>
void tall_epilogue_rows(int vectors, int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                        bool accumulate, const TileEpilogue* e) {
  if (vectors == 1) return tall_epilogue<N, 1>(kc, a, b, ldb, c, ldc, accumulate, e);
  if (vectors == 2) return tall_epilogue<N, 2>(kc, a, b, ldb, c, ldc, accumulate, e);
  tall_epilogue<N, 3>(kc, a, b, ldb, c, ldc, accumulate, e);
}

}  // namespace

void ukernel_48xn_avx512_tall_epilogue(int vectors, int nr, int64_t kc, const float* a, const float* b, int64_t ldb,
                                       float* c, int64_t ldc, bool accumulate, const TileEpilogue& epilogue) {
  if (nr == 8) return tall_epilogue_rows<8>(vectors, kc, a, b, ldb, c, ldc, accumulate, &epilogue);
  tall_epilogue_rows<7>(vectors, kc, a, b, ldb, c, ldc, accumulate, &epilogue);
}

void ukernel_tall_in_place_avx512(int vectors, int64_t kc, const float* a, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, bool accumulate) {
  if (vectors == 1) return kernel_48xn<7, false, ActivationKind::None, 1>(kc, a, b, ldb, c, ldc, accumulate);
  if (vectors == 2) return kernel_48xn<7, false, ActivationKind::None, 2>(kc, a, b, ldb, c, ldc, accumulate);
  kernel_48xn<7>(kc, a, b, ldb, c, ldc, accumulate);
}

void ukernel_8x16_of_32_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                               bool accumulate) {
  // Eight independent sums: as many FMAs in flight as the 8x32 tile's loop keeps busy per row
  // pair, enough for the FMA latency.
  __m512 acc[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), b0, acc[r]);
    a += 8;
    b += ldb;
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    float* row = c + r * ldc;
    _mm512_storeu_ps(row, accumulate ? _mm512_add_ps(acc[r], _mm512_loadu_ps(row)) : acc[r]);
  }
}

void ukernel_8x32_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  kernel_8x32<false>(kc, a, b, 32, c, ldc, accumulate, nullptr);
}

void ukernel_8x32_avx512_epilogue(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,
                                  const TileEpilogue& epilogue) {
  kernel_8x32<true>(kc, a, b, 32, c, ldc, accumulate, &epilogue);
}

void ukernel_8x32_avx512_in_place(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                                  bool accumulate, bool prefetch_next) {
  if (prefetch_next) return kernel_8x32<false, true>(kc, a, b, ldb, c, ldc, accumulate, nullptr);
  kernel_8x32<false>(kc, a, b, ldb, c, ldc, accumulate, nullptr);
}

void ukernel_8x32_avx512_in_place_epilogue(int64_t kc, const float* a, const float* b, int64_t ldb, float* c,
                                           int64_t ldc, bool accumulate, const TileEpilogue& epilogue,
                                           bool prefetch_next) {
  if (prefetch_next) return kernel_8x32<true, true>(kc, a, b, ldb, c, ldc, accumulate, &epilogue);
  kernel_8x32<true>(kc, a, b, ldb, c, ldc, accumulate, &epilogue);
}

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END

}  // namespace edgert::cpu::gemm
#endif
