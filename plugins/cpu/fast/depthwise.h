// Depthwise convolution (one input channel per output channel), one channel plane per call:
//   y = act(conv(x, w) + bias + z)
// with z (may be null, may alias y) a residual of y's shape. The loops are plain C++ written for
// the vectorizer, compiled twice: portably (depthwise.cpp) and for AVX2+FMA (x86/depthwise_x86.cpp);
// AVX-512 has its own intrinsics (x86/depthwise_avx512.cpp).
#pragma once

#include <cstdint>

#include "activation.h"

namespace edgert::cpu::depthwise {

struct Geometry {
  int64_t in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, pad_top,
      pad_left;
};

// 3x3 and 5x5 kernels with stride 1 or 2 and no dilation run over a zero-padded copy of the
// plane in `scratch` (scratch_rows x scratch_cols floats); other shapes need none (both 0) and
// walk the rows directly.
inline bool uses_padded_plane(const Geometry& g) {
  return g.kernel_h == g.kernel_w && (g.kernel_h == 3 || g.kernel_h == 5) && g.stride_h == g.stride_w &&
         (g.stride_h == 1 || g.stride_h == 2) && g.dilation_h == 1 && g.dilation_w == 1;
}
inline int64_t scratch_rows(const Geometry& g) {
  return uses_padded_plane(g) ? (g.out_h - 1) * g.stride_h + g.kernel_h : 0;
}
inline int64_t scratch_cols(const Geometry& g) {
  return uses_padded_plane(g) ? (g.out_w - 1) * g.stride_w + g.kernel_w : 0;
}
// The scratch a channel function needs: the padded plane (channel_avx512 needs none).
inline int64_t scratch_floats(const Geometry& g) { return scratch_rows(g) * scratch_cols(g); }

// One channel's operands: x, w, bias, z (may be null, or alias y) and y.
struct PlaneRef {
  const float* x;
  const float* w;
  float bias;
  const float* z;
  float* y;
};

// Whether channel_pair_avx512 computes two channels per vector (AVX-512 tactic only).
inline bool pairs_apply(const Geometry& g) { return uses_padded_plane(g) && g.out_w <= 8; }

using ChannelFn = void (*)(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                          const Activation& activation, float* scratch);
void channel_portable(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                      const Activation& activation, float* scratch);
#if defined(__x86_64__)
void channel_avx2(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                  const Activation& activation, float* scratch);
// Intrinsics for the padded-plane shapes (x86/depthwise_avx512.cpp); others run channel_avx2.
void channel_avx512(const Geometry& g, const float* x, const float* w, float bias, const float* z, float* y,
                    const Activation& activation, float* scratch);

// Planes of at most 8 output columns (7x7 layers) fill a 16-lane vector with one output row
// of two channels: channel_pair_avx512 computes channels a and b at once. Other shapes run
// channel_avx512 twice.
void channel_pair_avx512(const Geometry& g, const PlaneRef& a, const PlaneRef& b, const Activation& activation,
                         float* scratch);
#endif

}  // namespace edgert::cpu::depthwise
