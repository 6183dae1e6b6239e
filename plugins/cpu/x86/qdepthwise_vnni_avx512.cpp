// The integer AVX-512 INT8 depthwise plane (fast/qdepthwise.h, VnniPlan): per kernel row and
// vector of outputs one masked byte load, one vpermb (vpermt2b for two rows) and one vpdpbusd
// per 4 taps; no scratch plane, no conversion to float. The requantisation is qgemm's.
// Compiled for AVX-512 VNNI and VBMI through the target pragma only; the tactic runs it only when
// vnni_available().
#include "fast/qdepthwise.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
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
  int64_t lowest = 0, highest = g.in_w;
  for (const VnniPlan::Load& load : p.loads) {
    lowest = std::min(lowest, load.column);
    highest = std::max(highest, load.column + 64);
  }
  // Planes of one vector a row and 4 taps, and those of two rows a vector, load each row a few
  // times only: the copy would cost more than the masks it saves.
  p.copy_rows = p.rows_per_vector == 1 && (p.chunks >= 2 || p.blocks >= 2);
  p.paired_last_tap = p.rows_per_vector == 1 && g.kernel_h == 5 && g.kernel_w == 5 && g.dilation_h == 1 &&
                      (g.stride_h == 1 || g.stride_h == 2);
  for (int i = 0; i < 16; ++i) {
    p.pair_index[4 * i] = static_cast<uint8_t>(g.stride_w * i + 4 * g.dilation_w);
    p.pair_index[4 * i + 1] = static_cast<uint8_t>(64 + g.stride_w * i + 4 * g.dilation_w);
  }
  p.row_left = p.copy_rows ? (-lowest + 63) / 64 * 64 : 0;
  p.row_stride = p.copy_rows ? (p.row_left + highest + 63) / 64 * 64 : g.in_w;
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
  if (plan.paired_last_tap) {
    const auto last = [&](int64_t ky) {
      return ky >= 0 && ky < g.kernel_h ? static_cast<uint8_t>(w[ky * g.kernel_w + g.kernel_w - 1]) : uint8_t{0};
    };
    for (int64_t k = -1; k < g.kernel_h; ++k)
      packed[g.kernel_h * plan.chunks + k + 1] =
          static_cast<int32_t>(static_cast<uint32_t>(last(k)) | static_cast<uint32_t>(last(k + 1)) << 8);
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

// The kVnniRows x B accumulators of a tile requantised and stored (rows past out_h not).
template <int B>
inline void store_tile(const Geometry& g, const __m512i (&acc)[VnniPlan::kVnniRows][B], const PackedRequant& prq,
                       int64_t oy, int64_t b0, uint8_t* y) {
  constexpr int kRows = VnniPlan::kVnniRows;
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

// 64 bytes of a row at p, columns outside the image as the zero point: padded already in the
// copied rows, else through the mask.
template <bool Copied>
inline __m512i load_row(__m512i zx, uint64_t mask, const uint8_t* p) {
  if (Copied) return _mm512_loadu_si512(p);
  return _mm512_mask_loadu_epi8(zx, mask, p);
}

// B vectors of 16 bytes of input row iy for chunk c, permuted into [16 outputs][4 taps].
template <int B, bool Copied>
inline void row_lanes(const VnniPlan& plan, const uint8_t* x, __m512i zx, __m512i index, int64_t iy, int64_t b0,
                      int64_t c, __m512i (&lanes)[B]) {
  const Geometry& g = plan.g;
  const bool inside = iy >= 0 && iy < g.in_h;
  const uint8_t* row = x + iy * plan.row_stride;
#pragma GCC unroll 4
  for (int v = 0; v < B; ++v) {
    const VnniPlan::Load& load = plan.loads[static_cast<size_t>((b0 + v) * plan.chunks + c)];
    if (!inside)
      lanes[v] = zx;
    else
      lanes[v] = _mm512_permutexvar_epi8(index, load_row<Copied>(zx, load.mask, row + load.column));
  }
}

// kVnniRows output rows from oy times B vectors of 16 outputs from block b0: the input rows they
// read walked once, each row's vector (one load and vpermb per block and chunk) added into every
// output row it reaches. Any kernel height, dilation and stride (row_taps says who gets what).
template <int B, bool Copied>
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
    const int8_t* taps = plan.row_taps.data() + j * kRows;
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i lanes[B];
      row_lanes<B, Copied>(plan, x, zx, index, iy0 + j, b0, c, lanes);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        if (taps[r] < 0) continue;
        const __m512i w = _mm512_set1_epi32(packed_w[taps[r] * chunks + c]);
#pragma GCC unroll 4
        for (int v = 0; v < B; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], lanes[v], w);
      }
    }
  }
  store_tile<B>(g, acc, prq, oy, b0, y);
}

// rows_tile for kernel height KH, CH chunks, vertical stride S and dilation 1 (the zoo's 3x3 and
// 5x5, stride 1 and 2), the walk unrolled: which row feeds which output is known at compile time.
template <int B, int KH, int CH, int S, bool Copied>
void rows_tile_fixed(const VnniPlan& plan, const uint8_t* x, __m512i zx, __m512i index, const int32_t* packed_w,
                     __m512i bias, const PackedRequant& prq, int64_t oy, int64_t b0, uint8_t* y) {
  const Geometry& g = plan.g;
  constexpr int kRows = VnniPlan::kVnniRows, kWalk = (kRows - 1) * S + KH;
  __m512i acc[kRows][B];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < B; ++v) acc[r][v] = bias;
  const int64_t iy0 = oy * g.stride_h - g.pad_top;
#pragma GCC unroll 16
  for (int j = 0; j < kWalk; ++j) {
#pragma GCC unroll 2
    for (int c = 0; c < CH; ++c) {
      __m512i lanes[B];
      row_lanes<B, Copied>(plan, x, zx, index, iy0 + j, b0, c, lanes);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int ky = j - r * S;
        if (ky < 0 || ky >= KH) continue;
        const __m512i w = _mm512_set1_epi32(packed_w[ky * CH + c]);
#pragma GCC unroll 4
        for (int v = 0; v < B; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], lanes[v], w);
      }
    }
  }
  store_tile<B>(g, acc, prq, oy, b0, y);
}

// Planes at most 8 wide (rows_per_vector 2): kVnniRows vectors of two output rows each (vector
// r: rows oy + 2r and oy + 2r + 1), for kernel height KH, CH chunks, stride S, dilation 1. Input
// rows iy and iy + S meet in one vpermt2b; with stride 1 that pair serves two vectors.
template <int KH, int CH, int S>
void pairs_tile(const VnniPlan& plan, const uint8_t* x, __m512i zx, __m512i index, const int32_t* packed_w,
                __m512i bias, const PackedRequant& prq, int64_t oy, uint8_t* y) {
  const Geometry& g = plan.g;
  constexpr int kRows = VnniPlan::kVnniRows, kWalk = 2 * (kRows - 1) * S + KH;
  __m512i acc[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) acc[r] = bias;
  const int64_t iy0 = oy * g.stride_h - g.pad_top;
#pragma GCC unroll 32
  for (int p = 0; p < kWalk; ++p) {
    bool used = false;
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) used |= p - 2 * r * S >= 0 && p - 2 * r * S < KH;
    if (!used) continue;
    const int64_t ia = iy0 + p, ib = ia + S;
    const bool in_a = ia >= 0 && ia < g.in_h, in_b = ib >= 0 && ib < g.in_h;
#pragma GCC unroll 2
    for (int c = 0; c < CH; ++c) {
      const VnniPlan::Load& load = plan.loads[static_cast<size_t>(c)];
      const __m512i a = in_a ? load_row<false>(zx, load.mask, x + ia * plan.row_stride + load.column) : zx;
      const __m512i b = in_b ? load_row<false>(zx, load.mask, x + ib * plan.row_stride + load.column) : zx;
      const __m512i lanes = _mm512_permutex2var_epi8(a, index, b);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int ky = p - 2 * r * S;
        if (ky < 0 || ky >= KH) continue;
        acc[r] = _mm512_dpbusd_epi32(acc[r], lanes, _mm512_set1_epi32(packed_w[ky * CH + c]));
      }
    }
  }
  const __m512i packed = prq.bytes(prq.convert(acc[0]), prq.convert(acc[1]), prq.convert(acc[2]), prq.convert(acc[3]));
  // Output row oy + i sits at bytes [8 i, 8 i + out_w) of `packed`.
  const __mmask64 row_bytes = bytes64(g.out_w);
  const int64_t rows = std::min<int64_t>(2 * kRows, g.out_h - oy);
  for (int64_t i = 0; i < rows; ++i)
    _mm512_mask_storeu_epi8(y + (oy + i) * g.out_w - 8 * i, row_bytes << (8 * i), packed);
}

using PairsFn = void (*)(const VnniPlan&, const uint8_t*, __m512i, __m512i, const int32_t*, __m512i,
                         const PackedRequant&, int64_t, uint8_t*);

PairsFn pairs_tile_for(const VnniPlan& plan) {
  const Geometry& g = plan.g;
  if (g.dilation_h != 1 || (g.stride_h != 1 && g.stride_h != 2)) return nullptr;
  const bool s1 = g.stride_h == 1;
  if (g.kernel_h == 3 && plan.chunks == 1) return s1 ? pairs_tile<3, 1, 1> : pairs_tile<3, 1, 2>;
  if (g.kernel_h == 5 && plan.chunks == 2) return s1 ? pairs_tile<5, 2, 1> : pairs_tile<5, 2, 2>;
  return nullptr;
}

// B vectors of input row iy's 64 bytes at block b0's chunk-0 loads (zx outside the image rows).
template <int B, bool Copied>
inline void row_data(const VnniPlan& plan, const uint8_t* x, __m512i zx, int64_t iy, int64_t b0, __m512i (&data)[B]) {
  const bool inside = iy >= 0 && iy < plan.g.in_h;
  const uint8_t* row = x + iy * plan.row_stride;
#pragma GCC unroll 4
  for (int v = 0; v < B; ++v) {
    const VnniPlan::Load& load = plan.loads[static_cast<size_t>((b0 + v) * plan.chunks)];
    data[v] = inside ? load_row<Copied>(zx, load.mask, row + load.column) : zx;
  }
}

// The 5x5 tile (paired_last_tap): input rows walked two at a time, j and j + 1. Taps 0-3 of each
// row through vpermb and one vpdpbusd per output row it reaches; the fifth taps of both rows
// through one vpermt2b of the same loads, one vpdpbusd per output row with the pair of weights
// (w(k, 4), w(k + 1, 4)) for k = j - r S.
template <int B, int S, bool Copied>
void rows_tile_5x5(const VnniPlan& plan, const uint8_t* x, __m512i zx, __m512i index, const int32_t* packed_w,
                   __m512i bias, const PackedRequant& prq, int64_t oy, int64_t b0, uint8_t* y) {
  const Geometry& g = plan.g;
  constexpr int KH = 5, kRows = VnniPlan::kVnniRows, kWalk = (kRows - 1) * S + KH;
  const int32_t* pairs = packed_w + 2 * KH;
  const __m512i pair_index = _mm512_loadu_si512(plan.pair_index);
  __m512i acc[kRows][B];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < B; ++v) acc[r][v] = bias;
  const int64_t iy0 = oy * g.stride_h - g.pad_top;
#pragma GCC unroll 8
  for (int j = 0; j < kWalk; j += 2) {
    __m512i d0[B], d1[B];
    row_data<B, Copied>(plan, x, zx, iy0 + j, b0, d0);
    row_data<B, Copied>(plan, x, zx, iy0 + j + 1, b0, d1);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const int k = j - r * S;
      if (k >= 0 && k < KH) {
        const __m512i w = _mm512_set1_epi32(packed_w[2 * k]);
#pragma GCC unroll 4
        for (int v = 0; v < B; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], _mm512_permutexvar_epi8(index, d0[v]), w);
      }
      if (j + 1 < kWalk && k + 1 >= 0 && k + 1 < KH) {
        const __m512i w = _mm512_set1_epi32(packed_w[2 * (k + 1)]);
#pragma GCC unroll 4
        for (int v = 0; v < B; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], _mm512_permutexvar_epi8(index, d1[v]), w);
      }
      if (k >= -1 && k < KH) {
        const __m512i w = _mm512_set1_epi32(pairs[k + 1]);
#pragma GCC unroll 4
        for (int v = 0; v < B; ++v)
          acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], _mm512_permutex2var_epi8(d0[v], pair_index, d1[v]), w);
      }
    }
  }
  store_tile<B>(g, acc, prq, oy, b0, y);
}

using TileFn = void (*)(const VnniPlan&, const uint8_t*, __m512i, __m512i, const int32_t*, __m512i,
                        const PackedRequant&, int64_t, int64_t, uint8_t*);

template <int KH, int CH, int S, bool Copied>
TileFn fixed_tile(int64_t b) {
  switch (b) {
    case 4: return rows_tile_fixed<4, KH, CH, S, Copied>;
    case 3: return rows_tile_fixed<3, KH, CH, S, Copied>;
    case 2: return rows_tile_fixed<2, KH, CH, S, Copied>;
    default: return rows_tile_fixed<1, KH, CH, S, Copied>;
  }
}

template <int S, bool Copied>
TileFn tile_5x5(int64_t b) {
  switch (b) {
    case 4: return rows_tile_5x5<4, S, Copied>;
    case 3: return rows_tile_5x5<3, S, Copied>;
    case 2: return rows_tile_5x5<2, S, Copied>;
    default: return rows_tile_5x5<1, S, Copied>;
  }
}

template <bool Copied>
TileFn tile_of(const VnniPlan& plan, int64_t b) {
  const Geometry& g = plan.g;
  if (plan.paired_last_tap) return g.stride_h == 1 ? tile_5x5<1, Copied>(b) : tile_5x5<2, Copied>(b);
  if (g.dilation_h == 1 && (g.stride_h == 1 || g.stride_h == 2)) {
    const bool s1 = g.stride_h == 1;
    if (g.kernel_h == 3 && plan.chunks == 1)
      return s1 ? fixed_tile<3, 1, 1, Copied>(b) : fixed_tile<3, 1, 2, Copied>(b);
    if (g.kernel_h == 5 && plan.chunks == 2)
      return s1 ? fixed_tile<5, 2, 1, Copied>(b) : fixed_tile<5, 2, 2, Copied>(b);
  }
  switch (b) {
    case 4: return rows_tile<4, Copied>;
    case 3: return rows_tile<3, Copied>;
    case 2: return rows_tile<2, Copied>;
    default: return rows_tile<1, Copied>;
  }
}

// The tile for B vectors (1 to 4) of this geometry: an unrolled one where there is one.
TileFn tile_for(const VnniPlan& plan, int64_t b) {
  return plan.copy_rows ? tile_of<true>(plan, b) : tile_of<false>(plan, b);
}

}  // namespace

void vnni_fill_scratch(const VnniPlan& plan, int32_t x_zero_point, uint8_t* scratch) {
  if (plan.copy_rows) std::memset(scratch, x_zero_point, plan.scratch_bytes());
}

void channel_vnni_avx512(const VnniPlan& plan, const uint8_t* plane, int32_t x_zero_point, const int32_t* packed_w,
                         int32_t folded_bias, float multiplier, int32_t y_zero_point, uint8_t* y, uint8_t* scratch) {
  const Geometry& g = plan.g;
  if (plan.copy_rows)
    for (int64_t iy = 0; iy < g.in_h; ++iy) {
      uint8_t* dst = scratch + iy * plan.row_stride + plan.row_left;
      for (int64_t ix = 0; ix < g.in_w; ix += 64) {
        const __mmask64 m = bytes64(g.in_w - ix);
        _mm512_mask_storeu_epi8(dst + ix, m, _mm512_maskz_loadu_epi8(m, plane + iy * g.in_w + ix));
      }
    }
  const uint8_t* x = plan.copy_rows ? scratch + plan.row_left : plane;
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
    // Blocks of 4 vectors, then the rest (one call per tile: the tiles of a row group share rows).
    const int64_t full = plan.blocks / 4 * 4, rest = plan.blocks - full;
    const TileFn four = tile_for(plan, 4), tail = rest ? tile_for(plan, rest) : nullptr;
    for (int64_t oy = 0; oy < g.out_h; oy += VnniPlan::kVnniRows) {
      for (int64_t b = 0; b < full; b += 4) four(plan, x, zx, index, packed_w, bias, prq, oy, b, y);
      if (tail) tail(plan, x, zx, index, packed_w, bias, prq, oy, full, y);
    }
    return;
  }
  if (const PairsFn pairs = pairs_tile_for(plan)) {
    const PackedRequant prq{_mm512_set1_ps(static_cast<float>(255 - y_zero_point)), _mm512_set1_ps(multiplier),
                            _mm512_set1_epi16(static_cast<int16_t>(y_zero_point)),
                            _mm512_loadu_si512(kPackedOrder)};
    for (int64_t oy = 0; oy < g.out_h; oy += 2 * VnniPlan::kVnniRows)
      pairs(plan, x, zx, index, packed_w, bias, prq, oy, y);
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
        const __m512i a = in0 ? load_row<false>(zx, load.mask, x + iy0 * plan.row_stride + load.column) : zx;
        const __m512i b = in1 ? load_row<false>(zx, load.mask, x + iy1 * plan.row_stride + load.column) : zx;
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
EDGERT_ISA_REGION_END
#endif
