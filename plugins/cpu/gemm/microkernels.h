// The MR x NR micro-kernels of sgemm.cpp, one per ISA, all with one contract:
//   C[r][j] = (accumulate ? C[r][j] : 0) + sum_p a[p * MR + r] * b[p * NR + j]
// for r < MR, j < NR, p < kc; C rows are ldc floats apart. b is a packed panel starting on a
// 64-byte boundary; a a packed panel (any float alignment).
#pragma once

#include <cstdint>

#include "activation.h"

namespace edgert::cpu::gemm {

using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);

// The epilogue one full tile can finish in registers (see sgemm.cpp, fused_epilogue_applies):
// bias of the tile's rows, an addend with the tile's layout (may be C itself), then one of the
// activations the kernel has (None, Relu, Clip, HardSwish, Sigmoid, SiLU).
struct TileEpilogue {
  const float* bias_row = nullptr;  // the tile's first row's bias, or null
  const float* addend = nullptr;    // the tile's first element, or null
  int64_t addend_ld = 0;
  ActivationKind kind = ActivationKind::None;
  float p0 = 0, p1 = 0;
};

void ukernel_6x16_portable(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
#if defined(__x86_64__)
void ukernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
void ukernel_8x32_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
// Isa::Avx512Bf16: the same contract with a and b packed as bfloat16 pairs (bf16_pairs.h), kc
// still counting k values (an odd kc's last pair holds a zero).
void ukernel_8x32_avx512bf16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
// The first 16 of an 8x32 tile's columns (b: a 32-wide panel, ldb floats from one k row to the
// next): a panel with at most 16 columns left of B's (a 14x14 image has 196 = 6 x 32 + 4), in half
// the work of the whole tile. C's other 16 columns are not written.
void ukernel_8x16_of_32_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                               bool accumulate);
// MR 48, NR 7 (Isa::Avx512Tall) and NR 8 (Isa::Avx512Tall8): b need not be aligned (its values
// are broadcast).
void ukernel_48x7_avx512_tall(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
void ukernel_48x8_avx512_tall(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
// 16 x `vectors` rows of a tall tile only (vectors 1 to 3), nr 7 or 8, a pointing at the first
// of them inside its 48-row panel: the last panel of an A whose rows end early in it (the panel
// keeps the 48-row layout, zeros past A's rows), or a thread's share of rows that starts or ends
// inside a panel. A 960 -> 160 projection on a 7x7 image computed 192 rows to keep 160 with the
// full tile.
void ukernel_tall_rows_avx512(int vectors, int nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                              bool accumulate);
// The last panel of a B whose width leaves `live` (1 to 3) of its nr columns: those only are
// multiplied (a 13x13 image's 169 columns leave 1 of 7, and the whole tile cost 1/25 of the
// layer for 1/169 of its columns); the tile's other columns are zeros. Rows as above.
void ukernel_tall_narrow_avx512(int vectors, int nr, int live, int64_t kc, const float* a, const float* b, float* c,
                                int64_t ldc, bool accumulate);

// The tiles finishing a TileEpilogue in registers: 8x32, the same on B read in place, the tall ones.
void ukernel_8x32_avx512_epilogue(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate,
                                  const TileEpilogue& epilogue);
// The 8x32 tile on B read where it lies: rows of the panel ldb floats apart (a strided B with
// unit column stride, BSource::in_place), no alignment needed. prefetch_next: each k step also
// prefetches the same row of the next panel (32 floats on).
void ukernel_8x32_avx512_in_place(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                                  bool accumulate, bool prefetch_next);
void ukernel_8x32_avx512_in_place_epilogue(int64_t kc, const float* a, const float* b, int64_t ldb, float* c,
                                           int64_t ldc, bool accumulate, const TileEpilogue& epilogue,
                                           bool prefetch_next);
// The same for the tall tiles, 16 x `vectors` (1 to 3) rows x nr (nr 7 or 8): a whole 48-row
// tile, or a strip of 16 or 32 of its rows (a reads from the strip's first row).
void ukernel_48xn_avx512_tall_epilogue(int vectors, int nr, int64_t kc, const float* a, const float* b, int64_t ldb,
                                       float* c, int64_t ldc, bool accumulate, const TileEpilogue& epilogue);
// A 48x7 tile (16 x `vectors` rows) reading B where it lies, its k rows ldb floats apart
// (f32-conv-1x1-gemm-48x7-inplace-avx512): the 7 values of a row are the broadcasts, so B needs
// no packing (a whole panel of columns inside B; the last, narrower one is packed).
void ukernel_tall_in_place_avx512(int vectors, int64_t kc, const float* a, const float* b, int64_t ldb, float* c,
                                  int64_t ldc, bool accumulate);
#endif
#if defined(__aarch64__)
void ukernel_6x16_neon(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
// Isa::NeonFp16, 8x16: a and b packed as float16 (8 rows and 16 columns of one k in a row of
// halves), the products and their sums in float16 for up to 128 k at a time, each such sum
// then added into C in float32.
void ukernel_8x16_neonfp16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
// A packed B panel of kc rows x 16 columns of floats turned, where it lies, into kc rows of 16
// float16 (row p at halfword 16 p): each row is read before anything at or past it is written.
void fp16_in_place_neon(float* panel, int64_t kc);
#endif

}  // namespace edgert::cpu::gemm
