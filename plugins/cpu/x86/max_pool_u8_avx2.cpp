// uint8 MaxPool over NCHW planes for AVX2 (tactic u8-max-pool-direct-avx2), the design of
// x86/max_pool_u8_avx512vbmi.cpp on 32 outputs a step: the plane is copied into a scratch plane
// padded with zeros (the lowest uint8, which never wins: a window always holds one input element,
// and the reference starts from the lowest value too); then every tap is one unaligned load
// (stride 1) or the even bytes of two loads (stride 2: masked to 16-bit lanes, packed with
// unsigned saturation, the 64-bit quarters put back in order), folded with vpmaxub.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "fast/pool_rows.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx2")

namespace edgert::cpu {

void max_pool_plane_u8_avx2(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch) {
  const int64_t rows = u8_pool_padded_rows(g), cols = u8_pool_padded_cols(g);
  std::memset(scratch, 0, static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < g.in_h; ++r)
    std::memcpy(scratch + (r + g.pad_top) * cols + g.pad_left, x + r * g.in_w, static_cast<size_t>(g.in_w));
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
  for (int64_t oy = 0; oy < g.out_h; ++oy) {
    const uint8_t* top = scratch + oy * g.stride * cols;
    for (int64_t j = 0; j < g.out_w; j += 32) {
      __m256i acc = _mm256_setzero_si256();
      for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
        const uint8_t* row = top + ky * cols;
        for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
          __m256i v;
          if (g.stride == 1) {
            v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j + kx));
          } else {
            const uint8_t* p = row + 2 * j + kx;
            const __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), low_bytes);
            const __m256i b = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)), low_bytes);
            v = _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), _MM_SHUFFLE(3, 1, 2, 0));
          }
          acc = _mm256_max_epu8(acc, v);
        }
      }
      uint8_t* out = y + oy * g.out_w + j;
      if (g.out_w - j >= 32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), acc);
      } else {
        alignas(32) uint8_t tail[32];
        _mm256_store_si256(reinterpret_cast<__m256i*>(tail), acc);
        std::memcpy(out, tail, static_cast<size_t>(g.out_w - j));
      }
    }
  }
}

}  // namespace edgert::cpu

EDGERT_ISA_REGION_END
#endif
