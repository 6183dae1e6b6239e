// uint8 MaxPool over NCHW planes for AVX-512 VBMI (tactic u8-max-pool-direct-avx512vbmi): any
// window, stride 1 or 2 on both axes, no dilation. The plane is first copied into a scratch
// plane padded with zeros (the lowest uint8, so a padded tap never wins: a window always holds
// one input element, and the reference starts from the lowest value too); then each output row
// takes 64 outputs a step, every tap one unaligned load (stride 1) or the even bytes of two loads
// picked by vpermt2b (stride 2), folded with vpmaxub.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "fast/pool_rows.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vbmi")

namespace edgert::cpu {

void max_pool_plane_u8_avx512vbmi(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch) {
  const int64_t rows = u8_pool_padded_rows(g), cols = u8_pool_padded_cols(g);
  std::memset(scratch, 0, static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < g.in_h; ++r)
    std::memcpy(scratch + (r + g.pad_top) * cols + g.pad_left, x + r * g.in_w, static_cast<size_t>(g.in_w));
  alignas(64) uint8_t even[64];
  for (int i = 0; i < 64; ++i) even[i] = static_cast<uint8_t>(2 * i);
  const __m512i even_index = _mm512_load_si512(even);
  for (int64_t oy = 0; oy < g.out_h; ++oy) {
    const uint8_t* top = scratch + oy * g.stride * cols;
    for (int64_t j = 0; j < g.out_w; j += 64) {
      __m512i acc = _mm512_setzero_si512();
      for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
        const uint8_t* row = top + ky * cols;
        for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
          __m512i v;
          if (g.stride == 1) {
            v = _mm512_loadu_si512(row + j + kx);
          } else {
            const uint8_t* p = row + 2 * j + kx;
            v = _mm512_permutex2var_epi8(_mm512_loadu_si512(p), even_index, _mm512_loadu_si512(p + 64));
          }
          acc = _mm512_max_epu8(acc, v);
        }
      }
      const int64_t left = g.out_w - j;
      const __mmask64 m = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
      _mm512_mask_storeu_epi8(y + oy * g.out_w + j, m, acc);
    }
  }
}

}  // namespace edgert::cpu

EDGERT_ISA_REGION_END
#endif
