// The AVX2 family of qgemm (NCHW form), for x86-64-v3 CPUs without AVX-512 VNNI. vpmaddubsw
// would multiply the u8 activations by the s8 weights directly, but it saturates the sum of two
// products to int16 (255 * 127 * 2 > 32767), so the results would not be the reference's.
// Instead both sides are 16-bit: activations packed as int16, 4 k per pixel (8 bytes), and the
// weights read from the stored 12-row panels and widened in registers (vpmovsxbw: one vector
// holds 4 rows x 4 k). vpmaddwd adds two exact products (at most 2 * 255 * 128) into each int32
// lane: lane 2i + h of the accumulator of a row block holds row i's sum over the k pairs h of
// every group, one pixel broadcast (vpbroadcastq) per accumulator. A 12-row x 3-pixel tile takes
// 9 accumulators, 3 weight vectors, a broadcast and a product of the 16 ymm (a fourth pixel
// leaves too few registers); the pairs of lanes are added (vphaddd) and transposed to rows of
// pixels only at the end, where the requantisation runs as the VNNI tile's. Compiled for AVX2
// and FMA through the target pragma only; qgemm calls it only when the CPU reports both.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gemm/qgemm.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx2,fma")

namespace edgert::cpu::gemm {

namespace {

// Pixels per tile: 3 x 3 accumulators, 3 weight vectors, a broadcast and a product fit the 16
// ymm (a fourth pixel would need 17, and GCC then keeps accumulators in memory).
constexpr int64_t kTilePixels = 3;
// int16 values per group of 4 k in the packed panel: 32 pixels x 4 k.
constexpr int64_t kGroupValues = 4 * kQgemmPanelPixels;

// 32 bytes of B's row `row` for the panel: zero past `count` pixels and for rows past k (a
// partial last group), read through a copy where a full-width load would leave the row.
inline __m256i load_row(const QPixelRows& rows, int64_t row, int64_t k, int64_t count) {
  if (row >= k) return _mm256_setzero_si256();
  const uint8_t* src = rows.data + row * rows.stride;
  if (count == kQgemmPanelPixels) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  alignas(32) uint8_t tail[kQgemmPanelPixels] = {};
  std::memcpy(tail, src, static_cast<size_t>(count));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
}

// 16 pixels of 4 rows (bytes) widened and interleaved to [16][4] int16 at out.
inline void interleave_16_pixels(__m128i r0, __m128i r1, __m128i r2, __m128i r3, int16_t* out) {
  const __m256i w0 = _mm256_cvtepu8_epi16(r0), w1 = _mm256_cvtepu8_epi16(r1);
  const __m256i w2 = _mm256_cvtepu8_epi16(r2), w3 = _mm256_cvtepu8_epi16(r3);
  // Within each 128-bit lane (pixels 0-7 | 8-15): pairs of rows per pixel, then the 4 rows.
  const __m256i lo01 = _mm256_unpacklo_epi16(w0, w1), hi01 = _mm256_unpackhi_epi16(w0, w1);
  const __m256i lo23 = _mm256_unpacklo_epi16(w2, w3), hi23 = _mm256_unpackhi_epi16(w2, w3);
  const __m256i p0189 = _mm256_unpacklo_epi32(lo01, lo23), p23_1011 = _mm256_unpackhi_epi32(lo01, lo23);
  const __m256i p45_1213 = _mm256_unpacklo_epi32(hi01, hi23), p67_1415 = _mm256_unpackhi_epi32(hi01, hi23);
  __m256i* dst = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(dst + 0, _mm256_permute2x128_si256(p0189, p23_1011, 0x20));
  _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(p45_1213, p67_1415, 0x20));
  _mm256_storeu_si256(dst + 2, _mm256_permute2x128_si256(p0189, p23_1011, 0x31));
  _mm256_storeu_si256(dst + 3, _mm256_permute2x128_si256(p45_1213, p67_1415, 0x31));
}

// The requantised values of 8 lanes (two rows, 4 pixels each), as the reference rounds: clamp to
// whole-number bounds (a NaN product becomes the lower bound, as saturate_round's 0), round half
// to even (vcvtps2dq in the default MXCSR mode), add the zero point.
inline __m256i requantize_8(__m256i acc, __m256 scale, __m256 lo, __m256 hi, __m256i zp) {
  __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), scale);
  f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
  return _mm256_add_epi32(_mm256_cvtps_epi32(f), zp);
}

// One value per row for rows i and i + 2 of a block: [a x 4 | b x 4].
inline __m256i rows_pair_epi32(int32_t a, int32_t b) { return _mm256_setr_epi32(a, a, a, a, b, b, b, b); }
inline __m256 rows_pair_ps(float a, float b) { return _mm256_setr_ps(a, a, a, a, b, b, b, b); }

// Rows [r0, r0 + 4) of the tile (those below `rows`) from the accumulators of 4 pixels (lane
// 2i + h: row r0 + i, k pairs h), requantised into Y: `pixels` (<= 4) bytes of each row.
inline void store_block(__m256i acc0, __m256i acc1, __m256i acc2, __m256i acc3, int64_t r0, int64_t rows, const int32_t* bias,
                        const float* multiplier, int64_t pixels, uint8_t* out, int64_t row_stride,
                        int32_t zero_point) {
  const __m256 lo = _mm256_set1_ps(static_cast<float>(-zero_point));
  const __m256 hi = _mm256_set1_ps(static_cast<float>(255 - zero_point));
  const __m256i zp = _mm256_set1_epi32(zero_point);
  // Lanes [p0 r0, p0 r1, p1 r0, p1 r1 | p0 r2, p0 r3, p1 r2, p1 r3], then pixels 2 and 3.
  const __m256i h01 = _mm256_hadd_epi32(acc0, acc1);
  const __m256i h23 = _mm256_hadd_epi32(acc2, acc3);
  const __m256i u = _mm256_unpacklo_epi32(h01, h23), v = _mm256_unpackhi_epi32(h01, h23);
  // Rows r0 | r0 + 2 and r0 + 1 | r0 + 3, pixels in order.
  __m256i even = _mm256_unpacklo_epi32(u, v), odd = _mm256_unpackhi_epi32(u, v);
  auto bias_of = [&](int64_t r) { return r < rows ? bias[r] : 0; };
  auto scale_of = [&](int64_t r) { return r < rows ? multiplier[r] : 0.0f; };
  even = _mm256_add_epi32(even, rows_pair_epi32(bias_of(r0), bias_of(r0 + 2)));
  odd = _mm256_add_epi32(odd, rows_pair_epi32(bias_of(r0 + 1), bias_of(r0 + 3)));
  const __m256i q_even = requantize_8(even, rows_pair_ps(scale_of(r0), scale_of(r0 + 2)), lo, hi, zp);
  const __m256i q_odd = requantize_8(odd, rows_pair_ps(scale_of(r0 + 1), scale_of(r0 + 3)), lo, hi, zp);
  // Values 0..255 already: the saturating packs only narrow. 32-bit lanes 0, 1 | 4, 5: rows
  // r0, r0 + 1 | r0 + 2, r0 + 3, 4 bytes each.
  const __m256i words = _mm256_packs_epi32(q_even, q_odd);
  const __m256i bytes = _mm256_packus_epi16(words, words);
  alignas(32) int32_t quads[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(quads), bytes);
  const int lane_of_row[4] = {0, 1, 4, 5};
  for (int i = 0; i < 4 && r0 + i < rows; ++i) {
    uint8_t* dst = out + (r0 + i) * row_stride;
    if (pixels == kTilePixels)
      std::memcpy(dst, &quads[lane_of_row[i]], kTilePixels);
    else
      std::memcpy(dst, &quads[lane_of_row[i]], static_cast<size_t>(pixels));
  }
}

// The 12 rows of one weight panel (rows < `rows` stored) over `pixels` (<= 3) packed pixels.
void tile_12x3(const int8_t* weights, int64_t groups, const int16_t* packed, int64_t rows, const int32_t* bias,
               const float* multiplier, int64_t pixels, uint8_t* out, int64_t row_stride, int32_t zero_point) {
  __m256i acc[3][kTilePixels];
#pragma GCC unroll 3
  for (int j = 0; j < 3; ++j)
#pragma GCC unroll 4
    for (int p = 0; p < kTilePixels; ++p) acc[j][p] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; ++g) {
    const int8_t* wg = weights + g * 4 * kQgemmPanelRows;
    __m256i wv[3];
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j)
      wv[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wg + 16 * j)));
    const int16_t* pg = packed + g * kGroupValues;
#pragma GCC unroll 4
    for (int p = 0; p < kTilePixels; ++p) {
      const __m256i bp = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pg + 4 * p)));
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) acc[j][p] = _mm256_add_epi32(acc[j][p], _mm256_madd_epi16(wv[j], bp));
    }
  }
  // Indexed by constants only (a loop over the blocks would keep the accumulators in memory).
  const __m256i zero = _mm256_setzero_si256();  // the pixel 3 the tile does not have
  store_block(acc[0][0], acc[0][1], acc[0][2], zero, 0, rows, bias, multiplier, pixels, out, row_stride, zero_point);
  if (rows > 4)
    store_block(acc[1][0], acc[1][1], acc[1][2], zero, 4, rows, bias, multiplier, pixels, out, row_stride,
                zero_point);
  if (rows > 8)
    store_block(acc[2][0], acc[2][1], acc[2][2], zero, 8, rows, bias, multiplier, pixels, out, row_stride,
                zero_point);
}

}  // namespace

void qgemm_pack_pixels_avx2(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                            uint8_t* packed) {
  const QPixelRows rows = qgemm_pixel_rows(b, k, p0, count, scratch);
  int16_t* out = reinterpret_cast<int16_t*>(packed);
  for (int64_t g = 0; g < (k + 3) / 4; ++g) {
    const __m256i r0 = load_row(rows, 4 * g, k, count), r1 = load_row(rows, 4 * g + 1, k, count);
    const __m256i r2 = load_row(rows, 4 * g + 2, k, count), r3 = load_row(rows, 4 * g + 3, k, count);
    int16_t* dst = out + g * kGroupValues;
    interleave_16_pixels(_mm256_castsi256_si128(r0), _mm256_castsi256_si128(r1), _mm256_castsi256_si128(r2),
                         _mm256_castsi256_si128(r3), dst);
    interleave_16_pixels(_mm256_extracti128_si256(r0, 1), _mm256_extracti128_si256(r1, 1),
                         _mm256_extracti128_si256(r2, 1), _mm256_extracti128_si256(r3, 1), dst + 64);
  }
}

void qgemm_panel_12x3_avx2(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed,
                           int64_t p0, int64_t count, const int32_t* row_bias, const QRequant& y) {
  const int16_t* pixels = reinterpret_cast<const int16_t*>(packed);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t r0 = panel * kQgemmPanelRows, rows = std::min(kQgemmPanelRows, w.m - r0);
    for (int64_t t = 0; t < count; t += kTilePixels)
      tile_12x3(w.panel(panel), w.groups(), pixels + 4 * t, rows, row_bias + r0, y.multiplier + r0,
                std::min(kTilePixels, count - t), y.data + r0 * y.row_stride + p0 + t, y.row_stride, y.zero_point);
  }
}

}  // namespace edgert::cpu::gemm

EDGERT_ISA_REGION_END
#endif
