// F(2x2, 3x3) Winograd transforms with AVX-512, 16 tiles of one tile row per vector: tile k of
// the block reads input columns 2 (tx + k) - pad_left + j, j < 4, which are the even and odd
// lanes of two 32-column windows (window_avx512.h's stride-2 taps, "kernel" 4 wide), so one
// tile row's 4 x 4 input patches arrive as 16 vectors and B^T d B is 32 vector adds. Back,
// A^T m A gives each tile's 2 x 2 outputs as four vectors; even and odd output columns are
// interleaved into 32 consecutive floats, bias, residual and the activation added in registers.
// The scalar transforms, a tile at a time, took a fifth of resnet18's time.
// Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "fast/winograd_tiles.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")
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

}  // namespace

void winograd_input_tiles_f23_avx512(const TileGeometry& g, const float* plane, int64_t t0, int64_t count, float* v,
                                     int64_t pos_stride) {
  for_each_tile_block(g, t0, count, [&](int64_t ty, int64_t tx, int64_t tiles, int64_t at) {
    // Tile k reads columns c0 + 2k + j: the taps of a 4-wide, stride-2 window at "output" tx.
    const BlockMasks masks = block_masks<4, 2>(g.in_w, g.tiles_w, g.pad_left, tx);
    const int64_t c0 = 2 * tx - g.pad_left;
    __m512 d[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int64_t iy = 2 * ty - g.pad_top + i;
      if (iy < 0 || iy >= g.in_h) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) d[i][j] = _mm512_setzero_ps();
      } else {
        row_taps<4, 2>(plane + iy * g.in_w, c0, masks, _mm512_setzero_ps(), d[i]);
      }
    }
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
  const auto run = [&](auto kernel) { kernel(g, mt, pos_stride, t0, count, bias, z, y, activation); };
  switch (activation.kind) {
    case ActivationKind::Relu: return run(output_tiles<ActivationKind::Relu>);
    case ActivationKind::Clip: return run(output_tiles<ActivationKind::Clip>);
    case ActivationKind::HardSwish: return run(output_tiles<ActivationKind::HardSwish>);
    case ActivationKind::Sigmoid: return run(output_tiles<ActivationKind::Sigmoid>);
    case ActivationKind::SiLU: return run(output_tiles<ActivationKind::SiLU>);
    default: return run(output_tiles<ActivationKind::None>);
  }
}

}  // namespace edgert::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
