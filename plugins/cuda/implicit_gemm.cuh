// What the implicit-GEMM convolutions (conv_gemm.cu, qconv_imma.cu) share: where an output
// pixel's window starts. Their geometries differ; both have the fields used here.
#pragma once

namespace edgert::cuda {

// Pixel `pixel`'s image (offset of its first element) and window origin (may be in the padding).
struct PixelOrigin {
  int image = 0, iy = 0, ix = 0;
  bool valid = false;  // false past the last pixel
};

template <typename Geometry>
__device__ __forceinline__ PixelOrigin origin_of(const Geometry& g, int pixel) {
  PixelOrigin o;
  if (pixel >= g.pixels) return o;
  const int plane = g.out_h * g.out_w, n = pixel / plane, rest = pixel - n * plane;
  const int oy = rest / g.out_w, ox = rest - oy * g.out_w;
  o.image = n * g.c * g.h * g.w;
  o.iy = oy * g.stride_h - g.pad_top;
  o.ix = ox * g.stride_w - g.pad_left;
  o.valid = true;
  return o;
}

}  // namespace edgert::cuda
