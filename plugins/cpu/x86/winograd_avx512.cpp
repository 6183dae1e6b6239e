// Winograd transforms with AVX-512, 16 tiles of one tile row per vector.
// F(2x2, 3x3): tile k of the block reads input columns 2 (tx + k) - pad_left + j, j < 4, the
// even and odd lanes of two 32-column windows (window_avx512.h's stride-2 taps, "kernel" 4
// wide), so one tile row's 4 x 4 input patches arrive as 16 vectors and B^T d B is 32 vector
// adds. Back, A^T m A gives each tile's 2 x 2 outputs as four vectors; even and odd output
// columns are interleaved into 32 consecutive floats, bias, residual and the activation added
// in registers. F(4x4, 3x3) the same with 6 x 6 patches (columns 4 (tx + k) + j: permutes of
// a 64-column window) and 4 x 4 outputs interleaved by two rounds of permutes.
// The scalar transforms, a tile at a time, took a fifth of resnet18's time, and made F(4x4)
// lose to F(2x2); with these F(4x4) wins on 28x28 to 56x56 images.
// Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "fast/winograd_tiles.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl,fma")
// GCC 12's false positive on its own masked intrinsics (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace edgert::cpu {

namespace {

#include "x86/activation_lanes_avx512.h"
#include "x86/window_avx512.h"

// The lanes below n (0 <= n, at most 16 lanes).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1u);
}

// Calls block(ty, tx, tiles, at) for the runs of up to 16 tiles of one tile row that make up
// tiles [t0, t0 + count): `tiles` of them from tile (ty, tx), the first at index `at` - t0.
template <typename Block>
void for_each_tile_block(const TileGeometry& g, int64_t t0, int64_t count, Block&& block) {
  for (int64_t t = t0; t < t0 + count;) {
    const int64_t ty = t / g.tiles_w, tx = t % g.tiles_w;
    const int64_t tiles = std::min<int64_t>({16, g.tiles_w - tx, t0 + count - t});
    block(ty, tx, tiles, t - t0);
    t += tiles;
  }
}

// The (M + 2) x (M + 2) input patches of 16 tiles of tile row ty: row i of them is input row
// M ty - pad_top + i, whose taps taps_of(row, d[i]) loads; rows outside the image are zero.
template <int M, int kA = M + 2, typename TapsOf>
__attribute__((always_inline)) inline void load_patches(const TileGeometry& g, const float* plane, int64_t ty,
                                                        __m512 (&d)[kA][kA], TapsOf&& taps_of) {
#pragma GCC unroll 6
  for (int i = 0; i < kA; ++i) {
    const int64_t iy = M * ty - g.pad_top + i;
    if (iy < 0 || iy >= g.in_h) {
#pragma GCC unroll 6
      for (int j = 0; j < kA; ++j) d[i][j] = _mm512_setzero_ps();
    } else {
      taps_of(plane + iy * g.in_w, d[i]);
    }
  }
}

template <ActivationKind A>
void output_tiles(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0, int64_t count, float bias,
                  const float* z, float* y, const Activation& activation) {
  // Lane l of the even/odd outputs goes to output column 2l (+1): interleaving indices.
  const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512 bv = _mm512_set1_ps(bias);
  for_each_tile_block(g, t0, count, [&](int64_t ty, int64_t tx, int64_t tiles, int64_t at) {
    const __mmask16 valid = first_lanes(tiles);
    __m512 m[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) m[i][j] = _mm512_maskz_loadu_ps(valid, mt + (i * 4 + j) * pos_stride + at);
    // A^T = {{1, 1, 1, 0}, {0, 1, -1, -1}}: s = A^T m (by columns), then o = s A (by rows),
    // in the order of the scalar transform.
    __m512 s[2][4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      s[0][j] = _mm512_add_ps(_mm512_add_ps(m[0][j], m[1][j]), m[2][j]);
      s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m[1][j], m[2][j]), m[3][j]);
    }
    const int64_t ox = 2 * tx, columns = std::min<int64_t>(2 * tiles, g.out_w - ox);
    const __mmask16 store_low = first_lanes(columns), store_high = first_lanes(columns - 16);
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {
      const int64_t oy = 2 * ty + i;
      if (oy >= g.out_h) break;
      const __m512 even = _mm512_add_ps(_mm512_add_ps(s[i][0], s[i][1]), s[i][2]);
      const __m512 odd = _mm512_sub_ps(_mm512_sub_ps(s[i][1], s[i][2]), s[i][3]);
      __m512 half[2] = {_mm512_permutex2var_ps(even, low, odd), _mm512_permutex2var_ps(even, high, odd)};
      const __mmask16 mask[2] = {store_low, store_high};
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        if (!mask[h]) break;
        const int64_t offset = oy * g.out_w + ox + 16 * h;
        __m512 v = _mm512_add_ps(half[h], bv);
        if (z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask[h], z + offset));  // z may be y: read first
        v = activate_lanes(v, A, activation.p0, activation.p1);
        store_lanes(y + offset, mask[h], v);
      }
    }
  });
}

// F(4x4, 3x3): the matrices of fast/conv_winograd.cpp's Transforms<4>.
constexpr float kBT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                              {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
constexpr float kAT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

// sum_k c[k] x[k * stride] over the non-zero coefficients, in order, as the scalar combine()
// (the scalar file contracts c x + sum into one FMA; so does this).
template <int N>
__attribute__((always_inline)) inline __m512 combine(const float (&c)[N], const __m512* x, int stride) {
  __m512 sum = _mm512_setzero_ps();
  bool first = true;
#pragma GCC unroll 6
  for (int k = 0; k < N; ++k) {
    if (c[k] == 0.0f) continue;
    const __m512 v = x[k * stride];
    if (first) {
      sum = c[k] == 1.0f ? v : c[k] == -1.0f ? _mm512_sub_ps(_mm512_setzero_ps(), v) : _mm512_mul_ps(_mm512_set1_ps(c[k]), v);
    } else if (c[k] == 1.0f) {
      sum = _mm512_add_ps(sum, v);
    } else if (c[k] == -1.0f) {
      sum = _mm512_sub_ps(sum, v);
    } else {
      sum = _mm512_fmadd_ps(_mm512_set1_ps(c[k]), v, sum);
    }
    first = false;
  }
  return sum;
}

// The six taps of 16 tiles on one input row: lane k of tap j is column c0 + 4k + j. Elements
// j, j + 4, ... of two 32-column halves are picked by permutes and joined; taps 4 and 5 are taps
// 0 and 1 moved one tile along, with the 65th and 66th columns coming in.
__attribute__((always_inline)) inline void row_taps_f43(const float* row, int64_t c0, int64_t in_w, __m512* tap) {
  __m512 w[5];
#pragma GCC unroll 5
  for (int q = 0; q < 5; ++q) w[q] = load_columns(row, c0 + 16 * q, column_mask(c0 + 16 * q, in_w), _mm512_setzero_ps());
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i pick = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, j + 28, j + 24, j + 20, j + 16, j + 12, j + 8, j + 4, j);
    const __m512 low = _mm512_permutex2var_ps(w[0], pick, w[1]), high = _mm512_permutex2var_ps(w[2], pick, w[3]);
    tap[j] = _mm512_shuffle_f32x4(low, high, 0x44);
  }
  const __m512i next = _mm512_castps_si512(w[4]);
  tap[4] = _mm512_castsi512_ps(_mm512_alignr_epi32(next, _mm512_castps_si512(tap[0]), 1));
  tap[5] = _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_alignr_epi32(next, next, 1), _mm512_castps_si512(tap[1]), 1));
}

template <ActivationKind A>
void output_tiles_f43(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0, int64_t count,
                      float bias, const float* z, float* y, const Activation& activation) {
  // Interleaving: pairs (o0[l], o1[l]) and (o2[l], o3[l]), then those pairs in turn.
  const __m512i pairs_low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i pairs_high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512i quads_low = _mm512_set_epi32(23, 22, 7, 6, 21, 20, 5, 4, 19, 18, 3, 2, 17, 16, 1, 0);
  const __m512i quads_high = _mm512_set_epi32(31, 30, 15, 14, 29, 28, 13, 12, 27, 26, 11, 10, 25, 24, 9, 8);
  const __m512 bv = _mm512_set1_ps(bias);
  for_each_tile_block(g, t0, count, [&](int64_t ty, int64_t tx, int64_t tiles, int64_t at) {
    const __mmask16 valid = first_lanes(tiles);
    __m512 m[36];
#pragma GCC unroll 36
    for (int p = 0; p < 36; ++p) m[p] = _mm512_maskz_loadu_ps(valid, mt + p * pos_stride + at);
    __m512 s[4][6];
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) s[i][j] = combine(kAT4[i], m + j, 6);
    const int64_t ox = 4 * tx, columns = std::min<int64_t>(4 * tiles, g.out_w - ox);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int64_t oy = 4 * ty + i;
      if (oy >= g.out_h) break;
      __m512 o[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) o[j] = combine(kAT4[j], s[i], 1);
      const __m512 p01[2] = {_mm512_permutex2var_ps(o[0], pairs_low, o[1]), _mm512_permutex2var_ps(o[0], pairs_high, o[1])};
      const __m512 p23[2] = {_mm512_permutex2var_ps(o[2], pairs_low, o[3]), _mm512_permutex2var_ps(o[2], pairs_high, o[3])};
      const __m512 out[4] = {_mm512_permutex2var_ps(p01[0], quads_low, p23[0]),
                             _mm512_permutex2var_ps(p01[0], quads_high, p23[0]),
                             _mm512_permutex2var_ps(p01[1], quads_low, p23[1]),
                             _mm512_permutex2var_ps(p01[1], quads_high, p23[1])};
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __mmask16 mask = first_lanes(columns - 16 * q);
        if (!mask) break;
        const int64_t offset = oy * g.out_w + ox + 16 * q;
        __m512 v = _mm512_add_ps(out[q], bv);
        if (z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, z + offset));  // z may be y: read first
        v = activate_lanes(v, A, activation.p0, activation.p1);
        store_lanes(y + offset, mask, v);
      }
    }
  });
}

}  // namespace

void winograd_input_tiles_f23_avx512(const TileGeometry& g, const float* plane, int64_t t0, int64_t count, float* v,
                                     int64_t pos_stride) {
  for_each_tile_block(g, t0, count, [&](int64_t ty, int64_t tx, int64_t tiles, int64_t at) {
    // Tile k reads columns c0 + 2k + j: the taps of a 4-wide, stride-2 window at "output" tx.
    const BlockMasks masks = block_masks<4, 2>(g.in_w, g.tiles_w, g.pad_left, tx);
    const int64_t c0 = 2 * tx - g.pad_left;
    __m512 d[4][4];
    load_patches<2>(g, plane, ty, d, [&](const float* row, __m512* taps) {
      row_taps<4, 2>(row, c0, masks, _mm512_setzero_ps(), taps);
    });
    // B^T = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}: r = B^T d (by
    // columns), then V = r B (by rows), the scalar transform's operations in its order (the
    // results are the same bits).
    __m512 r[4][4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      r[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
      r[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
      r[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
      r[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
    }
    const __mmask16 valid = first_lanes(tiles);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 out[4] = {_mm512_sub_ps(r[i][0], r[i][2]), _mm512_add_ps(r[i][1], r[i][2]),
                             _mm512_sub_ps(r[i][2], r[i][1]),
                             _mm512_sub_ps(r[i][1], r[i][3])};
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) store_lanes(v + (i * 4 + j) * pos_stride + at, valid, out[j]);
    }
  });
}

bool winograd_activation_in_lanes(ActivationKind kind) { return activation_in_lanes(kind); }

void winograd_output_tiles_f23_avx512(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0,
                                      int64_t count, float bias, const float* z, float* y,
                                      const Activation& activation) {
  with_lane_activation(activation.kind, [&](auto kind) {
    output_tiles<decltype(kind)::value>(g, mt, pos_stride, t0, count, bias, z, y, activation);
  });
}

void winograd_input_tiles_f43_avx512(const TileGeometry& g, const float* plane, int64_t t0, int64_t count, float* v,
                                     int64_t pos_stride) {
  for_each_tile_block(g, t0, count, [&](int64_t ty, int64_t tx, int64_t tiles, int64_t at) {
    const int64_t c0 = 4 * tx - g.pad_left;
    __m512 d[6][6];
    load_patches<4>(g, plane, ty, d, [&](const float* row, __m512* taps) { row_taps_f43(row, c0, g.in_w, taps); });
    // r = B^T d by columns, then V = r B by rows, as the scalar transform.
    __m512 r[6][6];
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) r[i][j] = combine(kBT4[i], &d[0][j], 6);
    const __mmask16 valid = first_lanes(tiles);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) store_lanes(v + (i * 6 + j) * pos_stride + at, valid, combine(kBT4[j], r[i], 1));
  });
}

void winograd_output_tiles_f43_avx512(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0,
                                      int64_t count, float bias, const float* z, float* y,
                                      const Activation& activation) {
  with_lane_activation(activation.kind, [&](auto kind) {
    output_tiles_f43<decltype(kind)::value>(g, mt, pos_stride, t0, count, bias, z, y, activation);
  });
}

}  // namespace edgert::cpu

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
