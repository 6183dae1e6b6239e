// The tile geometry of WinogradConv (fast/conv_winograd.cpp) and its AVX-512 transforms of
// F(2x2, 3x3) (x86/winograd_avx512.cpp). Internal to the Winograd tactics.
#pragma once

#include <cstdint>

#include "activation.h"

namespace edgert::cpu {

// Geometry the tile loops need, copied out of the WinogradConv.
struct TileGeometry {
  int64_t in_h, in_w, out_h, out_w, pad_top, pad_left, tiles_w;
};

#if defined(__x86_64__)
// V = B^T d B for tiles [t0, t0 + count) of one channel plane, 16 tiles of a tile row at a
// time; element pos of tile t goes to v[pos * pos_stride + t - t0].
void winograd_input_tiles_f23_avx512(const TileGeometry& g, const float* plane, int64_t t0, int64_t count, float* v,
                                     int64_t pos_stride);
// Y = act(A^T Mt A + bias + Z) for tiles [t0, t0 + count) of one output channel, element pos of
// tile t at mt[pos * pos_stride + t - t0]; Z (may be null) may be Y. The activation must be one
// activation_in_lanes (x86/activation_lanes_avx512.h) takes, or None.
void winograd_output_tiles_f23_avx512(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0,
                                      int64_t count, float bias, const float* z, float* y,
                                      const Activation& activation);
// The same for F(4x4, 3x3): 16 tiles of a tile row per vector, 6 x 6 patches in, 4 x 4 out.
void winograd_input_tiles_f43_avx512(const TileGeometry& g, const float* plane, int64_t t0, int64_t count, float* v,
                                     int64_t pos_stride);
void winograd_output_tiles_f43_avx512(const TileGeometry& g, const float* mt, int64_t pos_stride, int64_t t0,
                                      int64_t count, float bias, const float* z, float* y,
                                      const Activation& activation);
// Whether the output transforms above apply `kind` themselves.
bool winograd_activation_in_lanes(ActivationKind kind);
#endif

}  // namespace edgert::cpu
