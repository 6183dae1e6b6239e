// uint8 MaxPool over NCHW planes for Advanced SIMD (tactic u8-max-pool-direct-neon), the design
// of x86/max_pool_u8_avx512vbmi.cpp on 16 outputs a step: the plane is copied into a scratch
// plane padded with zeros (the lowest uint8, which never wins: a window always holds one input
// element, and the reference starts from the lowest value too); then every tap is one unaligned
// load (stride 1) or the even bytes of ld2's deinterleaving load (stride 2), folded with umax.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>

#include "fast/pool_rows.h"

namespace edgert::cpu {

void max_pool_plane_u8_neon(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch) {
  const int64_t rows = u8_pool_padded_rows(g), cols = u8_pool_padded_cols(g);
  std::memset(scratch, 0, static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < g.in_h; ++r)
    std::memcpy(scratch + (r + g.pad_top) * cols + g.pad_left, x + r * g.in_w, static_cast<size_t>(g.in_w));
  for (int64_t oy = 0; oy < g.out_h; ++oy) {
    const uint8_t* top = scratch + oy * g.stride * cols;
    for (int64_t j = 0; j < g.out_w; j += 16) {
      uint8x16_t acc = vdupq_n_u8(0);
      for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
        const uint8_t* row = top + ky * cols;
        for (int64_t kx = 0; kx < g.kernel_w; ++kx)
          acc = vmaxq_u8(acc, g.stride == 1 ? vld1q_u8(row + j + kx) : vld2q_u8(row + 2 * j + kx).val[0]);
      }
      uint8_t* out = y + oy * g.out_w + j;
      if (g.out_w - j >= 16) {
        vst1q_u8(out, acc);
      } else {
        uint8_t tail[16];
        vst1q_u8(tail, acc);
        std::memcpy(out, tail, static_cast<size_t>(g.out_w - j));
      }
    }
  }
}

}  // namespace edgert::cpu

#endif
