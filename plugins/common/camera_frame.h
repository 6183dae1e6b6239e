// Camera frame -> image tensor arithmetic, one definition for every place that does it:
// edgertd's CPU preprocessing, and the ImageToTensor kernels of the CPU and CUDA plugins (an
// engine built with `edgert build --camera` reads the raw frame). Integer colour conversion
// and bilinear weights, so every implementation computes the same values.
//
// Frames: YUYV (packed 4:2:2, one plane), NV12 (a luma plane, then interleaved UV at half
// resolution) and RGB24 (packed), each plane with its own row stride in bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EDGERT_CAMERA_FN __host__ __device__ __forceinline__
#else
#define EDGERT_CAMERA_FN inline
#endif

namespace edgert::camera {

enum class Layout : int32_t { kYuyv = 0, kNv12 = 1, kRgb24 = 2 };

struct Planes {
  Layout layout = Layout::kYuyv;
  int width = 0, height = 0;
  const uint8_t* plane[2] = {nullptr, nullptr};
  size_t stride[2] = {0, 0};
};

EDGERT_CAMERA_FN int clamp_u8(int v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

// BT.601 limited-range YUV -> RGB, 10-bit fixed point (what V4L2 cameras deliver by default).
EDGERT_CAMERA_FN void yuv_to_rgb(int y, int u, int v, int rgb[3]) {
  const int c = (y - 16) * 1192, d = u - 128, e = v - 128;
  rgb[0] = clamp_u8((c + 1634 * e + 512) >> 10);
  rgb[1] = clamp_u8((c - 401 * d - 833 * e + 512) >> 10);
  rgb[2] = clamp_u8((c + 2066 * d + 512) >> 10);
}

// RGB and luma of source pixel (x, y).
EDGERT_CAMERA_FN void fetch(const Planes& f, int x, int y, int rgb[3], int* luma) {
  if (f.layout == Layout::kYuyv) {
    const uint8_t* p = f.plane[0] + static_cast<size_t>(y) * f.stride[0] + static_cast<size_t>(x / 2) * 4;
    const int yy = p[(x & 1) ? 2 : 0];
    *luma = yy;
    yuv_to_rgb(yy, p[1], p[3], rgb);
  } else if (f.layout == Layout::kNv12) {
    const int yy = f.plane[0][static_cast<size_t>(y) * f.stride[0] + x];
    const uint8_t* uv = f.plane[1] + static_cast<size_t>(y / 2) * f.stride[1] + static_cast<size_t>(x / 2) * 2;
    *luma = yy;
    yuv_to_rgb(yy, uv[0], uv[1], rgb);
  } else {
    const uint8_t* p = f.plane[0] + static_cast<size_t>(y) * f.stride[0] + static_cast<size_t>(x) * 3;
    rgb[0] = p[0], rgb[1] = p[1], rgb[2] = p[2];
    *luma = (77 * p[0] + 150 * p[1] + 29 * p[2]) >> 8;
  }
}

// Output coordinate `o` of `out_size` samples from source positions i0 and i1 of `in_size`
// with weight w/1024 on i1 (half-pixel centres, as OpenCV's INTER_LINEAR).
EDGERT_CAMERA_FN void bilinear_source(int o, int out_size, int in_size, int* i0, int* i1, int* w) {
  float s = (o + 0.5f) * in_size / out_size - 0.5f;
  s = s < 0.0f ? 0.0f : s;
  int i = static_cast<int>(s);
  i = i < in_size - 1 ? i : in_size - 1;
  *i0 = i;
  *i1 = i + 1 < in_size - 1 ? i + 1 : in_size - 1;
  *w = static_cast<int>((s - i) * 1024);
}

// The interpolated value in [0, 255] of corners p q (top row) r s (bottom row).
EDGERT_CAMERA_FN float bilinear(int p, int q, int r, int s, int wx, int wy) {
  const int top = p * (1024 - wx) + q * wx, bottom = r * (1024 - wx) + s * wx;
  return (top * (1024 - wy) + bottom * wy) / (1024.0f * 1024.0f);
}

// Pixel scaling to [0, 1] then (v - mean) / std, as one multiply-add: scale = 1 / (255 std),
// bias = -mean / std.
struct Normalization {
  float scale[3] = {1.0f / 255, 1.0f / 255, 1.0f / 255};
  float bias[3] = {0, 0, 0};
};

EDGERT_CAMERA_FN Normalization normalization(const float mean[3], const float std[3]) {
  Normalization n;
  for (int c = 0; c < 3; ++c) {
    n.scale[c] = 1.0f / (255.0f * std[c]);
    n.bias[c] = -mean[c] / std[c];
  }
  return n;
}

// Output pixel (ox, oy) of an out_w x out_h image: `channels` values (1: luma, 3: RGB, or BGR
// with `bgr`), normalized. Products and sums rounded one at a time (no fused multiply-add), so
// host and device give the same floats.
EDGERT_CAMERA_FN void output_pixel(const Planes& f, int ox, int oy, int out_w, int out_h, int channels, bool bgr,
                                   const Normalization& n, float* values) {
  int x0, x1, wx, y0, y1, wy;
  bilinear_source(ox, out_w, f.width, &x0, &x1, &wx);
  bilinear_source(oy, out_h, f.height, &y0, &y1, &wy);
  int a[3], b[3], c[3], d[3], la, lb, lc, ld;
  fetch(f, x0, y0, a, &la);
  fetch(f, x1, y0, b, &lb);
  fetch(f, x0, y1, c, &lc);
  fetch(f, x1, y1, d, &ld);
#if defined(__CUDA_ARCH__)
#define EDGERT_CAMERA_MAD(v, s, t) __fadd_rn(__fmul_rn((v), (s)), (t))
#else
#define EDGERT_CAMERA_MAD(v, s, t) (static_cast<float>((v) * (s)) + (t))
#endif
  if (channels == 1) {
    values[0] = EDGERT_CAMERA_MAD(bilinear(la, lb, lc, ld, wx, wy), n.scale[0], n.bias[0]);
    return;
  }
  for (int ch = 0; ch < 3; ++ch) {
    const int src = bgr ? 2 - ch : ch;
    values[ch] = EDGERT_CAMERA_MAD(bilinear(a[src], b[src], c[src], d[src], wx, wy), n.scale[ch], n.bias[ch]);
  }
#undef EDGERT_CAMERA_MAD
}

}  // namespace edgert::camera
