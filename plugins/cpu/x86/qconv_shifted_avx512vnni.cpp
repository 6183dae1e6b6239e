// The AVX-512 VNNI shifted GEMM (fast/qconv_shifted.h): the 12-row x 32-pixel tile of
// x86/qgemm_avx512vnni.cpp, reading its two activation vectors per channel group straight from
// the packed padded image at the tap's offset (unaligned loads) instead of from a packed panel.
// The output pixels of a panel lie over the padded width: they are stored as runs along output
// rows, one masked byte store per run and row. Compiled for AVX-512 VNNI through the target
// pragma only; the tactic runs it only when the CPU reports avx512vnni, bw and vl.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "fast/qconv_shifted.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu::qshifted {

namespace {

using gemm::kQgemmPanelPixels;
using gemm::kQgemmPanelRows;

inline __mmask16 lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u);
}

inline void fill_pixels(uint32_t* dst, __m512i value, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_epi32(dst + i, lanes16(n - i), value);
}

// A run of valid output pixels in a panel: lanes [lane, lane + len) go to output pixel `out`.
struct Run {
  int64_t out;
  __mmask32 mask;  // the run's lanes
  int64_t lane;
};

// R (4, 8 or 12) of the panel's rows: a last panel of 4 or 8 rows (64 output channels leave 4)
// multiplies no padding rows.
template <int R, int V>
void tile(const Plan& plan, const int8_t* weights, const uint8_t* image, int64_t q0, int64_t rows,
          const int32_t* bias, const float* multiplier, const Run* runs, int run_count, uint8_t* out,
          int64_t row_stride, int32_t zero_point) {
  __m512i acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_set1_epi32(r < rows ? bias[r] : 0);
  const int64_t groups = plan.channel_groups, group_bytes = plan.group_pixels * 4;
  const int64_t taps = static_cast<int64_t>(plan.tap_offsets.size());
  const int8_t* wg = weights;
  for (int64_t t = 0; t < taps; ++t) {
    const uint8_t* src = image + (q0 + plan.tap_offsets[static_cast<size_t>(t)]) * 4;
    for (int64_t g = 0; g < groups; ++g, src += group_bytes, wg += 4 * kQgemmPanelRows) {
      __m512i b[V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512(src + 64 * v);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, wg + 4 * r, sizeof four);
        const __m512i wv = _mm512_set1_epi32(four);
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], b[v], wv);
      }
    }
  }
  // The requantisation of qgemm's tile (see there), then the runs stored from the 32 bytes.
  const __m512 lo = _mm512_set1_ps(static_cast<float>(-zero_point));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(255 - zero_point));
  const __m512i zp = _mm512_set1_epi32(zero_point);
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    const __m512 scale = _mm512_set1_ps(multiplier[r]);
    __m128i bytes[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), scale);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      bytes[v] = _mm512_cvtusepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zp));
    }
    const __m256i row = _mm256_inserti128_si256(_mm256_castsi128_si256(bytes[0]), bytes[1], 1);
    uint8_t* dst = out + r * row_stride;
    // Lane `lane` lands on output pixel `out`: the masked-off bytes before it are not touched.
    for (int i = 0; i < run_count; ++i)
      _mm256_mask_storeu_epi8(dst + (runs[i].out - runs[i].lane), runs[i].mask, row);
  }
}

}  // namespace

namespace {

// Bytes [lo, hi) of 32, clamped.
inline __mmask32 byte_range32(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 32);
  if (hi <= lo) return 0;
  const uint64_t bits = ((hi >= 64 ? ~0ull : (1ull << hi) - 1)) & ~((1ull << lo) - 1);
  return static_cast<__mmask32>(bits);
}

// Stride 2: phase (a, b) pixel (i, j) is input (2 i + a - pad_top, 2 j + b - pad_left); 16
// pixels take 32 bytes of each channel's row (the masked load fills the padding with the zero
// point) and keep the even ones.
void pack_phases_avx512(const Plan& plan, const uint8_t* x, int32_t x_zero_point, int64_t group_begin,
                        int64_t group_end, uint8_t* image) {
  const Geometry& g = plan.g;
  const int64_t wp = plan.padded_w, plane = g.in_h * g.in_w, phase_pixels = plan.channel_groups * plan.group_pixels;
  const __m512i zp4 = _mm512_set1_epi32(static_cast<int32_t>(0x01010101u * static_cast<uint32_t>(x_zero_point)));
  const __m256i zp32 = _mm256_set1_epi8(static_cast<char>(x_zero_point));
  const __m512i low_byte = _mm512_set1_epi32(0xFF);
  for (int64_t cg = group_begin; cg < group_end; ++cg) {
    const int64_t valid = std::min<int64_t>(4, g.channels - 4 * cg);
    const uint8_t* src = x + 4 * cg * plane;
    for (int64_t phase = 0; phase < 4; ++phase) {
      const int64_t a = phase / 2, b = phase % 2;
      uint32_t* dst = reinterpret_cast<uint32_t*>(image) + phase * phase_pixels + cg * plan.group_pixels;
      for (int64_t i = 0; i < plan.padded_h; ++i, dst += wp) {
        const int64_t iy = 2 * i + a - g.pad_top;
        if (iy < 0 || iy >= g.in_h) {
          fill_pixels(dst, zp4, wp);
          continue;
        }
        const uint8_t* row = src + iy * g.in_w;
        for (int64_t j = 0; j < wp; j += 16) {
          const int64_t ix = 2 * j + b - g.pad_left;
          const __mmask32 mask = byte_range32(-ix, g.in_w - ix);
          __m512i lanes = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) {
            const __m256i pairs = r < valid ? _mm256_mask_loadu_epi8(zp32, mask, row + r * plane + ix) : zp32;
            lanes = _mm512_or_si512(lanes,
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_cvtepu16_epi32(pairs), low_byte), 8 * r));
          }
          _mm512_mask_storeu_epi32(dst + j, lanes16(wp - j), lanes);
        }
      }
      fill_pixels(dst, zp4, plan.group_pixels - plan.padded_h * wp);
    }
  }
}

}  // namespace

void pack_image_avx512(const Plan& plan, const uint8_t* x, int32_t x_zero_point, int64_t group_begin,
                       int64_t group_end, uint8_t* image) {
  if (plan.g.stride == 2) return pack_phases_avx512(plan, x, x_zero_point, group_begin, group_end, image);
  const Geometry& g = plan.g;
  const int64_t wp = plan.padded_w, plane = g.in_h * g.in_w;
  const __m512i zp4 = _mm512_set1_epi32(static_cast<int32_t>(0x01010101u * static_cast<uint32_t>(x_zero_point)));
  const __m128i zp1 = _mm_set1_epi8(static_cast<char>(x_zero_point));
  const int64_t right = wp - g.pad_left - g.in_w;
  for (int64_t cg = group_begin; cg < group_end; ++cg) {
    uint32_t* dst = reinterpret_cast<uint32_t*>(image) + cg * plan.group_pixels;
    const int64_t valid = std::min<int64_t>(4, g.channels - 4 * cg);
    const uint8_t* src = x + 4 * cg * plane;
    for (int64_t yp = 0; yp < plan.padded_h; ++yp, dst += wp) {
      const int64_t iy = yp - g.pad_top;
      if (iy < 0 || iy >= g.in_h) {
        fill_pixels(dst, zp4, wp);
        continue;
      }
      fill_pixels(dst, zp4, g.pad_left);
      fill_pixels(dst + g.pad_left + g.in_w, zp4, right);
      const uint8_t* row = src + iy * g.in_w;
      for (int64_t ix = 0; ix < g.in_w; ix += 16) {
        const __mmask16 mask = lanes16(g.in_w - ix);
        __m512i lanes = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m128i bytes = r < valid ? _mm_maskz_loadu_epi8(mask, row + r * plane + ix) : zp1;
          lanes = _mm512_or_si512(lanes, _mm512_slli_epi32(_mm512_cvtepu8_epi32(bytes), 8 * r));
        }
        _mm512_mask_storeu_epi32(dst + g.pad_left + ix, mask, lanes);
      }
    }
    fill_pixels(dst, zp4, plan.group_pixels - plan.padded_h * wp);
  }
}

void panel_12x32_avx512vnni(const Plan& plan, const gemm::PackedQRows& w, int64_t panel_begin, int64_t panel_end,
                            const uint8_t* image, int64_t q0, int64_t count, const int32_t* row_bias,
                            const gemm::QRequant& y) {
  const Geometry& g = plan.g;
  const int64_t wp = plan.padded_w;
  Run runs[kQgemmPanelPixels];
  int run_count = 0;
  for (int64_t j = 0; j < count;) {
    const int64_t q = q0 + j, oy = q / wp, ox = q % wp;
    if (ox >= g.out_w) {
      j += wp - ox;
      continue;
    }
    const int64_t len = std::min(g.out_w - ox, count - j);
    const uint32_t bits = len >= 32 ? ~0u : ((1u << len) - 1u);
    runs[run_count++] = {oy * g.out_w + ox, static_cast<__mmask32>(bits << j), j};
    j += len;
  }
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t r0 = panel * kQgemmPanelRows, rows = std::min(kQgemmPanelRows, w.m - r0);
    uint8_t* out = y.data + r0 * y.row_stride;
    const int8_t* panel_w = w.panel(panel);
    const int32_t* b = row_bias + r0;
    const float* m = y.multiplier + r0;
    const int v = count > 16 ? 2 : 1, r = rows > 8 ? 12 : rows > 4 ? 8 : 4;
#define EDGERT_SHIFTED_TILE(R, V) \
  tile<R, V>(plan, panel_w, image, q0, rows, b, m, runs, run_count, out, y.row_stride, y.zero_point)
    if (v == 2) {
      if (r == 12) EDGERT_SHIFTED_TILE(12, 2);
      else if (r == 8) EDGERT_SHIFTED_TILE(8, 2);
      else EDGERT_SHIFTED_TILE(4, 2);
    } else {
      if (r == 12) EDGERT_SHIFTED_TILE(12, 1);
      else if (r == 8) EDGERT_SHIFTED_TILE(8, 1);
      else EDGERT_SHIFTED_TILE(4, 1);
    }
#undef EDGERT_SHIFTED_TILE
  }
}

}  // namespace edgert::cpu::qshifted

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
