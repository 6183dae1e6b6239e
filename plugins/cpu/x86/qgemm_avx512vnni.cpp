// The AVX-512 VNNI family of qgemm (NCHW form): activations packed 32 pixels x 4 k per pair of
// vectors, and a 12-row x 32-pixel tile in 24 zmm accumulators. Each k group loads two vectors of
// pixels and, for each of the 12 rows, broadcasts that row's 4 weight bytes straight from the
// packed panel (vpdpbusd's m32bcst operand, the signed one); vpdpbusd adds the 4 u8 x s8
// products to each int32 lane without saturating, so the sums are exact as the reference's
// (modulo 2^32). The requantisation runs on the accumulators in registers and vpmovusdb stores
// 16 bytes per vector. Compiled for AVX-512 VNNI through the target pragma only; qgemm calls it
// only when the CPU reports avx512vnni, bw and vl.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gemm/qgemm.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12 takes the masked intrinsics' undefined pass-through operand for an uninitialized read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::gemm {

namespace {

inline __mmask16 lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u);
}

// 4 rows of 32 bytes (row r at rows + r * stride; rows past `valid_rows` read as zero, pixels
// past `count` too) interleaved into [32][4]: 128 bytes at out.
inline void interleave_4_rows(const uint8_t* rows, int64_t stride, int64_t valid_rows, int64_t count, uint8_t* out) {
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    const __mmask16 mask = lanes16(count - 16 * v);
    __m512i lanes = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      if (r >= valid_rows) break;
      const __m128i bytes = _mm_maskz_loadu_epi8(mask, rows + r * stride + 16 * v);
      lanes = _mm512_or_si512(lanes, _mm512_slli_epi32(_mm512_cvtepu8_epi32(bytes), 8 * r));
    }
    _mm512_storeu_si512(out + 64 * v, lanes);
  }
}

// Up to 32 bytes: one masked load and store (memcpy and memset calls cost more than the copy).
inline __mmask32 bytes32(int64_t n) { return n >= 32 ? ~0u : ((1u << n) - 1u); }
inline void copy_bytes(uint8_t* dst, const uint8_t* src, int64_t n) {
  _mm256_mask_storeu_epi8(dst, bytes32(n), _mm256_maskz_loadu_epi8(bytes32(n), src));
}
inline void fill_bytes(uint8_t* dst, __m256i value, int64_t n) { _mm256_mask_storeu_epi8(dst, bytes32(n), value); }

// ceil(v / s) for s >= 1, without a division for strides 1 and 2.
inline int64_t ceil_div(int64_t v, int64_t s) {
  if (s == 1) return v;
  if (s == 2) return (v + 1) >> 1;  // arithmetic shift: floor, so ceil for negative v too
  return v >= 0 ? (v + s - 1) / s : -((-v) / s);
}

// B's im2col rows [0, k) for pixels [p0, p0 + count): row r at out + 32 r. The panel's pixels
// are cut once into runs along output rows; the rows then divide nothing (stride 1 and 2).
void im2col_rows(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* out) {
  struct Run {
    int64_t iy0, ix0, len, offset;  // the window corner of the run's first pixel
  };
  Run runs[kQgemmPanelPixels];
  int run_count = 0;
  for (int64_t done = 0; done < count;) {
    const int64_t p = p0 + done, oy = p / b.out_w, ox = p % b.out_w, len = std::min(b.out_w - ox, count - done);
    runs[run_count++] = {oy * b.stride_h - b.pad_top, ox * b.stride_w - b.pad_left, len, done};
    done += len;
  }
  const __m256i zero = _mm256_set1_epi8(static_cast<char>(b.zero_point));
  const int64_t s = b.stride_w, taps = b.kernel_h * b.kernel_w;
  int64_t r = 0;
  for (int64_t c = 0; r < k; ++c) {
    const uint8_t* plane = b.data + c * b.in_h * b.in_w;
    for (int64_t t = 0; t < taps; ++t, ++r) {
      const int64_t dy = (t / b.kernel_w) * b.dilation_h, dx = (t % b.kernel_w) * b.dilation_w;
      uint8_t* row_out = out + r * kQgemmPanelPixels;
      for (int i = 0; i < run_count; ++i) {
        const Run& run = runs[i];
        uint8_t* dst = row_out + run.offset;
        const int64_t iy = run.iy0 + dy, len = run.len;
        if (iy < 0 || iy >= b.in_h) {
          fill_bytes(dst, zero, len);
          continue;
        }
        const int64_t ix0 = run.ix0 + dx;
        // Pixels j in [j_lo, j_hi) read inside the row; the others are padding.
        const int64_t j_lo = std::min(len, std::max<int64_t>(0, ceil_div(-ix0, s)));
        const int64_t j_hi = std::min(len, std::max(j_lo, ceil_div(b.in_w - ix0, s)));
        fill_bytes(dst, zero, j_lo);
        fill_bytes(dst + j_hi, zero, len - j_hi);
        const int64_t n = j_hi - j_lo;
        const uint8_t* src = plane + iy * b.in_w + ix0 + j_lo * s;
        if (s == 1) {
          copy_bytes(dst + j_lo, src, n);
        } else if (s == 2 && n > 0) {
          // The even bytes of 2n - 1: the low bytes of n 16-bit lanes.
          const __mmask64 load = ~0ull >> (64 - (2 * n - 1));
          const __m256i even = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(load, src));
          _mm256_mask_storeu_epi8(dst + j_lo, n >= 32 ? ~0u : ((1u << n) - 1u), even);
        } else {
          for (int64_t j = 0; j < n; ++j) dst[j_lo + j] = src[j * s];
        }
      }
    }
  }
}

// The 12 rows of one weight panel (rows < `rows` stored) over V vectors of packed pixels.
template <int V>
void tile(const int8_t* weights, int64_t groups, const uint8_t* packed, int64_t rows, const int32_t* bias,
          const float* multiplier, const __mmask16* mask, uint8_t* out, int64_t row_stride, int32_t zero_point) {
  __m512i acc[kQgemmPanelRows][V];
#pragma GCC unroll 12
  for (int r = 0; r < kQgemmPanelRows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_set1_epi32(r < rows ? bias[r] : 0);
  for (int64_t g = 0; g < groups; ++g) {
    __m512i b[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512(packed + g * 4 * kQgemmPanelPixels + 64 * v);
    const int8_t* wg = weights + g * 4 * kQgemmPanelRows;
#pragma GCC unroll 12
    for (int r = 0; r < kQgemmPanelRows; ++r) {
      int32_t four;
      std::memcpy(&four, wg + 4 * r, sizeof four);
      const __m512i wv = _mm512_set1_epi32(four);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], b[v], wv);
    }
  }
  // As the reference: clamp to whole-number bounds (the same result as clamping after rounding,
  // and a NaN product becomes the lower bound, as saturate_round's 0), round half to even (the
  // default MXCSR mode of vcvtps2dq), add the zero point; the saturating store changes nothing.
  const __m512 lo = _mm512_set1_ps(static_cast<float>(-zero_point));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(255 - zero_point));
  const __m512i zp = _mm512_set1_epi32(zero_point);
#pragma GCC unroll 12
  for (int r = 0; r < kQgemmPanelRows; ++r) {
    if (r >= rows) break;
    const __m512 scale = _mm512_set1_ps(multiplier[r]);
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), scale);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
      _mm512_mask_cvtusepi32_storeu_epi8(out + r * row_stride + 16 * v, mask[v], q);
    }
  }
}

}  // namespace

void qgemm_pack_pixels_avx512(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                              uint8_t* packed) {
  const uint8_t* rows = nullptr;
  int64_t stride = 0;
  if (b.kind == QPixels::Kind::Rows) {
    rows = b.data + p0;
    stride = b.row_stride;
  } else {
    im2col_rows(b, k, p0, count, scratch);
    rows = scratch;
    stride = kQgemmPanelPixels;
  }
  for (int64_t g = 0; g < (k + 3) / 4; ++g)
    interleave_4_rows(rows + 4 * g * stride, stride, std::min<int64_t>(4, k - 4 * g), count,
                      packed + g * 4 * kQgemmPanelPixels);
}

void qgemm_panel_12x32_avx512vnni(const PackedQRows& w, int64_t panel_begin, int64_t panel_end,
                                  const uint8_t* packed, int64_t p0, int64_t count, const int32_t* row_bias,
                                  const QRequant& y) {
  const __mmask16 mask[2] = {lanes16(count), lanes16(count - 16)};
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t r0 = panel * kQgemmPanelRows, rows = std::min(kQgemmPanelRows, w.m - r0);
    uint8_t* out = y.data + r0 * y.row_stride + p0;
    if (count > 16)
      tile<2>(w.panel(panel), w.groups(), packed, rows, row_bias + r0, y.multiplier + r0, mask, out, y.row_stride,
              y.zero_point);
    else
      tile<1>(w.panel(panel), w.groups(), packed, rows, row_bias + r0, y.multiplier + r0, mask, out, y.row_stride,
              y.zero_point);
  }
}

}  // namespace edgert::cpu::gemm

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
