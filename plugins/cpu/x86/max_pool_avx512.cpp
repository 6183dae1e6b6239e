// MaxPool over NCHW planes for AVX-512 (tactic f32-max-pool-direct-avx512): square 2x2, 3x3 or
// 5x5 windows, stride 1 or 2, no dilation, the shapes of CNN stems and downsampling (ceil_mode
// and pads included). Taps are read straight from the input (x86/window_avx512.h); lanes outside
// it read as the lowest float, the reference's starting value. `v > m ? v : m` per tap, which is
// what vmaxps(v, m) computes, so NaN inputs are skipped as the reference skips them.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <limits>

#include "fast/pool_rows.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl")
// GCC 12's false positive on its own masked max intrinsic (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu {

namespace {

#include "x86/window_avx512.h"

// Output rows kRows at a time, each input row loaded once for all of them (for_each_group_tap).
constexpr int kRows = 7;

template <int K, int S>
void max_plane(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, int64_t pad_top,
               int64_t pad_left) {
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  constexpr int64_t kChunk = 16;
  BlockMasks masks[kChunk];
  for (int64_t first = 0; first < out_w; first += 16 * kChunk) {
    const int64_t blocks = std::min<int64_t>(kChunk, (out_w - first + 15) / 16);
    for (int64_t b = 0; b < blocks; ++b) masks[b] = block_masks<K, S>(in_w, out_w, pad_left, first + 16 * b);
    for (int64_t oy0 = 0; oy0 < out_h; oy0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, out_h - oy0);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t ox = first + 16 * b;
        const BlockMasks m = masks[b];  // a copy: its masks stay in mask registers
        __m512 acc[kRows];
#pragma GCC unroll 7
        for (int r = 0; r < kRows; ++r) acc[r] = lowest;
        // Each input row's taps are reduced apart first (see depthwise_avx512.cpp's RowSums).
        const auto group = [&](auto interior) __attribute__((always_inline)) {
          __m512 row[kRows];
          for_each_group_tap<K, S, kRows, decltype(interior)::value>(
              x, in_h, in_w, oy0 * S - pad_top, ox * S - pad_left, m, lowest,
              [&](int r, int, int kx, __m512 v) __attribute__((always_inline)) {
                row[r] = kx == 0 ? v : _mm512_max_ps(v, row[r]);
                if (kx == K - 1) acc[r] = _mm512_max_ps(row[r], acc[r]);
              });
        };
        if (m.interior) {
          group(std::true_type{});
        } else {
          group(std::false_type{});
        }
#pragma GCC unroll 7
        for (int r = 0; r < kRows; ++r) {  // unrolled, so acc stays in registers
          if (r >= rows) break;
          store_lanes(y + (oy0 + r) * out_w + ox, m.out, acc[r]);
        }
      }
    }
  }
}

}  // namespace

bool max_pool_avx512_applies(int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w,
                             int64_t dilation_h, int64_t dilation_w) {
  return kernel_h == kernel_w && (kernel_h == 2 || kernel_h == 3 || kernel_h == 5) && stride_h == stride_w &&
         (stride_h == 1 || stride_h == 2) && dilation_h == 1 && dilation_w == 1;
}

void max_pool_plane_avx512(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           int64_t kernel, int64_t stride, int64_t pad_top, int64_t pad_left) {
  const auto run = [&](auto plane) { plane(x, y, in_h, in_w, out_h, out_w, pad_top, pad_left); };
  if (kernel == 2) return stride == 1 ? run(max_plane<2, 1>) : run(max_plane<2, 2>);
  if (kernel == 3) return stride == 1 ? run(max_plane<3, 1>) : run(max_plane<3, 2>);
  return stride == 1 ? run(max_plane<5, 1>) : run(max_plane<5, 2>);
}

}  // namespace edgert::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
