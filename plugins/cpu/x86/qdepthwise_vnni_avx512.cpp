// The integer AVX-512 INT8 depthwise plane (fast/qdepthwise.h, VnniPlan): per kernel row and
// vector of outputs one masked byte load, one vpermb (vpermt2b for two rows) and one vpdpbusd
// per 4 taps; no scratch plane, no conversion to float. The requantisation is qgemm's.
// Compiled for AVX-512 VNNI and VBMI through the target pragma only; the tactic runs it only when
// vnni_available().
#include "fast/qdepthwise.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace edgert::cpu::qdepthwise {

namespace {

// Bytes [lo, hi) of 64, clamped.
uint64_t byte_range(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 64);
  if (hi <= lo) return 0;
  const uint64_t upto_hi = hi >= 64 ? ~0ull : ((1ull << hi) - 1);
  return upto_hi & ~((1ull << lo) - 1);
}

}  // namespace

VnniPlan make_vnni_plan(const Geometry& g) {
  VnniPlan p;
  p.g = g;
  p.rows_per_vector = g.out_w <= 8 ? 2 : 1;
  p.chunks = (g.kernel_w + 3) / 4;
  const int64_t width = p.rows_per_vector == 2 ? 8 : 16;
  p.blocks = (g.out_w + width - 1) / width;
  for (int64_t b = 0; b < p.blocks; ++b)
    for (int64_t c = 0; c < p.chunks; ++c) {
      const int64_t column = b * width * g.stride_w - g.pad_left + 4 * c * g.dilation_w;
      p.loads.push_back({column, byte_range(-column, g.in_w - column)});
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t pixel = p.rows_per_vector == 2 ? i % 8 : i;
      const int64_t source = p.rows_per_vector == 2 ? 64 * (i / 8) : 0;
      p.index[4 * i + j] = static_cast<uint8_t>(source + g.stride_w * pixel + j * g.dilation_w);
    }
  constexpr int rows = VnniPlan::kVnniRows;
  p.walk = (rows - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1;
  p.row_taps.assign(static_cast<size_t>(p.walk * rows), -1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t ky = 0; ky < g.kernel_h; ++ky)
      p.row_taps[static_cast<size_t>((r * g.stride_h + ky * g.dilation_h) * rows + r)] = static_cast<int8_t>(ky);
  return p;
}

int32_t pack_vnni_weights(const VnniPlan& plan, const int8_t* w, int32_t* packed) {
  const Geometry& g = plan.g;
  int32_t sum = 0;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky)
    for (int64_t c = 0; c < plan.chunks; ++c) {
      uint32_t four = 0;
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t kx = 4 * c + j;
        if (kx >= g.kernel_w) break;
        const int8_t v = w[ky * g.kernel_w + kx];
        sum += v;
        four |= static_cast<uint32_t>(static_cast<uint8_t>(v)) << (8 * j);
      }
      packed[ky * plan.chunks + c] = static_cast<int32_t>(four);
    }
  return sum;
}

#if defined(__x86_64__)

bool vnni_available() {
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                                __builtin_cpu_supports("avx512vbmi");
  return available;
}

namespace {

inline __mmask16 lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u);
}

struct Requant {
  __m512 lo, hi, scale;
  __m512i zp;
  __m512i apply(__m512i acc) const {
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    return _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
  }
};

// Up to 16 results as bytes. vpmovusdb to a register, then a plain or masked byte store: its
// memory-destination form is microcoded on some cores (Zen 4) and cost more than the sums.
inline void store16(uint8_t* dst, __m512i q, int64_t count) {
  const __m128i bytes = _mm512_cvtusepi32_epi8(q);
  if (count >= 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), bytes);
  else
    _mm_mask_storeu_epi8(dst, lanes16(count), bytes);
}

// The requantisation of 4 vectors into 64 bytes: the upper clamp in float (min(hi, f) also keeps
// a NaN, which converts to INT_MIN), the conversion, then the saturating packs do the rest:
// s32 -> s16, + y_zero_point saturating, s16 -> u8; every value they saturate lies outside
// [0, 255] after the zero point, as the reference's clamp has it. vpermb puts the 4 vectors'
// bytes back in order (the packs work within 128-bit lanes).
struct PackedRequant {
  __m512 hi, scale;
  __m512i zp16, order;
  __m512i convert(__m512i acc) const {
    return _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale)));
  }
  __m512i bytes(__m512i a, __m512i b, __m512i c, __m512i d) const {
    const __m512i ab = _mm512_adds_epi16(_mm512_packs_epi32(a, b), zp16);
    const __m512i cd = _mm512_adds_epi16(_mm512_packs_epi32(c, d), zp16);
    return _mm512_permutexvar_epi8(order, _mm512_packus_epi16(ab, cd));
  }
};
// Byte 16 v + e of the result: element e of vector v, at 16 (e / 4) + 4 v + e % 4 after the packs.
alignas(64) constexpr uint8_t kPackedOrder[64] = {
    0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51, 4, 5, 6, 7, 20, 21, 22, 23, 36, 37, 38, 39, 52, 53, 54, 55,
    8, 9, 10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59, 12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61,
    62, 63};

inline __mmask64 bytes64(int64_t n) { return n >= 64 ? ~0ull : n <= 0 ? 0ull : ((1ull << n) - 1); }

// kVnniRows output rows from oy times B vectors of 16 outputs from block b0: the input rows they
// read walked once, each row's vector (one load and vpermb per block and chunk) added into every
// output row it reaches.
template <int B>
void rows_tile(const VnniPlan& plan, const uint8_t* x, __m512i zx, __m512i index, const int32_t* packed_w,
               __m512i bias, const PackedRequant& prq, int64_t oy, int64_t b0, uint8_t* y) {
  const Geometry& g = plan.g;
  constexpr int kRows = VnniPlan::kVnniRows;
  const int64_t chunks = plan.chunks;
  __m512i acc[kRows][B];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < B; ++v) acc[r][v] = bias;
  const int64_t iy0 = oy * g.stride_h - g.pad_top;
  for (int64_t j = 0; j < plan.walk; ++j) {
    const int64_t iy = iy0 + j;
    const int8_t* taps = plan.row_taps.data() + j * kRows;
    const bool inside = iy >= 0 && iy < g.in_h;
    const uint8_t* row = x + iy * g.in_w;
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i lanes[B];
#pragma GCC unroll 4
      for (int v = 0; v < B; ++v) {
        const VnniPlan::Load& load = plan.loads[static_cast<size_t>((b0 + v) * chunks + c)];
        if (!inside)
          lanes[v] = zx;
        else if (load.mask == ~0ull)
          lanes[v] = _mm512_permutexvar_epi8(index, _mm512_loadu_si512(row + load.column));
        else
          lanes[v] = _mm512_permutexvar_epi8(index, _mm512_mask_loadu_epi8(zx, load.mask, row + load.column));
      }
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        if (taps[r] < 0) continue;
        const __m512i w = _mm512_set1_epi32(packed_w[taps[r] * chunks + c]);
#pragma GCC unroll 4
        for (int v = 0; v < B; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], lanes[v], w);
      }
    }
  }
  const int64_t rows = std::min<int64_t>(kRows, g.out_h - oy);
  if (B == 1) {
    // One vector a row: the rows' vectors packed together, each stored from its 16 bytes (the
    // store starts 16 r bytes before row r, those lanes masked off).
    const __m512i packed = prq.bytes(prq.convert(acc[0][0]), prq.convert(acc[1][0]), prq.convert(acc[2][0]),
                                     prq.convert(acc[3][0]));
    const __mmask64 row_bytes = bytes64(std::min<int64_t>(16, g.out_w - 16 * b0));
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r)
      if (r < rows)
        _mm512_mask_storeu_epi8(y + (oy + r) * g.out_w + 16 * b0 - 16 * r, row_bytes << (16 * r), packed);
    return;
  }
  const __m512i none = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    __m512i q[4] = {none, none, none, none};
#pragma GCC unroll 4
    for (int v = 0; v < B; ++v) q[v] = prq.convert(acc[r][v]);
    _mm512_mask_storeu_epi8(y + (oy + r) * g.out_w + 16 * b0, bytes64(g.out_w - 16 * b0),
                            prq.bytes(q[0], q[1], q[2], q[3]));
  }
}

}  // namespace

void channel_vnni_avx512(const VnniPlan& plan, const uint8_t* x, int32_t x_zero_point, const int32_t* packed_w,
                         int32_t folded_bias, float multiplier, int32_t y_zero_point, uint8_t* y) {
  const Geometry& g = plan.g;
  const __m512i zx = _mm512_set1_epi8(static_cast<char>(x_zero_point));
  const __m512i index = _mm512_loadu_si512(plan.index);
  const __m512i bias = _mm512_set1_epi32(folded_bias);
  const Requant rq{_mm512_set1_ps(static_cast<float>(-y_zero_point)),
                   _mm512_set1_ps(static_cast<float>(255 - y_zero_point)), _mm512_set1_ps(multiplier),
                   _mm512_set1_epi32(y_zero_point)};
  const int64_t chunks = plan.chunks;
  if (plan.rows_per_vector == 1) {
    const PackedRequant prq{_mm512_set1_ps(static_cast<float>(255 - y_zero_point)), _mm512_set1_ps(multiplier),
                            _mm512_set1_epi16(static_cast<int16_t>(y_zero_point)),
                            _mm512_loadu_si512(kPackedOrder)};
    for (int64_t oy = 0; oy < g.out_h; oy += VnniPlan::kVnniRows)
      for (int64_t b = 0; b < plan.blocks; b += 4) {
        switch (std::min<int64_t>(4, plan.blocks - b)) {
          case 4: rows_tile<4>(plan, x, zx, index, packed_w, bias, prq, oy, b, y); break;
          case 3: rows_tile<3>(plan, x, zx, index, packed_w, bias, prq, oy, b, y); break;
          case 2: rows_tile<2>(plan, x, zx, index, packed_w, bias, prq, oy, b, y); break;
          default: rows_tile<1>(plan, x, zx, index, packed_w, bias, prq, oy, b, y); break;
        }
      }
    return;
  }
  // Two output rows a vector: lanes 0-7 row oy, lanes 8-15 row oy + 1 (its input rows one stride
  // lower, the second source of vpermt2b).
  const __mmask16 first = static_cast<__mmask16>((1u << g.out_w) - 1u);
  for (int64_t oy = 0; oy < g.out_h; oy += 2) {
    __m512i acc = bias;
    const bool second_row = oy + 1 < g.out_h;
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      const int64_t iy0 = oy * g.stride_h - g.pad_top + ky * g.dilation_h, iy1 = iy0 + g.stride_h;
      const bool in0 = iy0 >= 0 && iy0 < g.in_h, in1 = second_row && iy1 >= 0 && iy1 < g.in_h;
      const int32_t* wk = packed_w + ky * chunks;
      for (int64_t c = 0; c < chunks; ++c) {
        const VnniPlan::Load& load = plan.loads[static_cast<size_t>(c)];
        const __m512i a = in0 ? _mm512_mask_loadu_epi8(zx, load.mask, x + iy0 * g.in_w + load.column) : zx;
        const __m512i b = in1 ? _mm512_mask_loadu_epi8(zx, load.mask, x + iy1 * g.in_w + load.column) : zx;
        acc = _mm512_dpbusd_epi32(acc, _mm512_permutex2var_epi8(a, index, b), _mm512_set1_epi32(wk[c]));
      }
    }
    const __m128i q = _mm512_cvtusepi32_epi8(rq.apply(acc));
    _mm_mask_storeu_epi8(y + oy * g.out_w, first, q);
    // Lanes 8.. land on row oy + 1: the store starts 8 bytes before it, those lanes masked off.
    if (second_row) _mm_mask_storeu_epi8(y + (oy + 1) * g.out_w - 8, static_cast<__mmask16>(first << 8), q);
  }
}

#endif

}  // namespace edgert::cpu::qdepthwise

#if defined(__x86_64__)
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
