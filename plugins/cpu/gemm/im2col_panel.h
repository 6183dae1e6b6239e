// Shared by the B packers of sgemm.cpp (portable) and x86/pack_b_avx512.cpp: a B panel's
// columns are output pixels, and a panel of up to kMaxPanelColumns columns crosses few output
// rows. Internal to the GEMM.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gemm/sgemm.h"

namespace edgert::cpu::gemm {

constexpr int kMaxPanelColumns = 32;

// Columns [j, j + len) of a B panel: output pixels (oy, ox) .. (oy, ox + len - 1) of one row.
struct PanelSegment {
  int64_t j, len, oy, ox;
};

// The segments of columns [jp, jp + w) (w <= kMaxPanelColumns) of an im2col source; returns how
// many.
inline int panel_segments(const BSource& b, int64_t jp, int64_t w, PanelSegment* segments) {
  int count = 0;
  for (int64_t j = 0, oy = jp / b.out_w, ox = jp % b.out_w; j < w; ox = 0, ++oy) {
    const int64_t len = std::min(w - j, b.out_w - ox);
    segments[count++] = {j, len, oy, ox};
    j += len;
  }
  return count;
}

// The columns t of a segment whose input column ix0 + t * stride lies inside a row of in_w:
// [*lo, *hi) within [0, len).
inline void inside_columns(int64_t ix0, int64_t stride, int64_t in_w, int64_t len, int64_t* lo, int64_t* hi) {
  *lo = ix0 >= 0 ? 0 : std::min(len, (-ix0 + stride - 1) / stride);
  *hi = ix0 >= in_w ? *lo : std::max(*lo, std::min(len, (in_w - 1 - ix0) / stride + 1));
}

// Where segment g reads for tap (ky, kx): image row iy, the input column ix0 of its first
// column, and its columns [lo, hi) that fall inside the row; false when row iy is outside the
// image (the segment reads zeros).
struct SegmentRead {
  int64_t iy, ix0, lo, hi;
};
inline bool segment_read(const BSource& b, const PanelSegment& g, int64_t ky, int64_t kx, SegmentRead* r) {
  r->iy = g.oy * b.stride_h - b.pad_top + ky * b.dilation_h;
  if (r->iy < 0 || r->iy >= b.in_h) return false;
  r->ix0 = g.ox * b.stride_w - b.pad_left + kx * b.dilation_w;
  inside_columns(r->ix0, b.stride_w, b.in_w, g.len, &r->lo, &r->hi);
  return true;
}

// (channel, ky, kx) of im2col row p, and the step to row p + 1.
struct Im2colRow {
  int64_t c, ky, kx;
  Im2colRow(const BSource& b, int64_t p)
      : c(p / (b.kernel_h * b.kernel_w)), ky(p % (b.kernel_h * b.kernel_w) / b.kernel_w), kx(p % b.kernel_w) {}
  void next(const BSource& b) {
    if (++kx < b.kernel_w) return;
    kx = 0;
    if (++ky < b.kernel_h) return;
    ky = 0;
    ++c;
  }
};

#if defined(__x86_64__)
// kc rows of a 32-column panel of the columns [0, w) (w <= 32) of a strided B with unit column
// stride, from src (x86/pack_b_avx512.cpp; AVX-512F only).
void pack_strided_panel_avx512(const float* src, int64_t row_stride, int64_t kc, int64_t w, float* dst,
                               const float* row_scale = nullptr);
// The same for a panel of nr = 7 or 8 columns (the tall tiles), w <= nr of them from src.
void pack_strided_narrow_panel_avx512(const float* src, int64_t row_stride, int64_t kc, int64_t nr, int64_t w,
                                      float* dst, const float* row_scale);
// Rows [p0, p0 + kc) of the 32-column im2col panel of columns [jp, jp + w), for stride_w 1 or 2
// (x86/pack_b_avx512.cpp; AVX-512F only).
void pack_im2col_panel_avx512(const BSource& b, int64_t p0, int64_t kc, int64_t jp, int64_t w, float* dst);
// The same for the tall tiles' panels of nr = 7 or 8 columns (w <= nr of them); false (nothing
// written) when it does not apply: a stride along the row other than 1 or 2, or a kernel of
// more than kMaxNarrowIm2colTaps taps (AVX-512F and VL only).
constexpr int64_t kMaxNarrowIm2colTaps = 49;
bool pack_im2col_narrow_panel_avx512(const BSource& b, int64_t p0, int64_t kc, int64_t nr, int64_t jp, int64_t w,
                                     float* dst);
#endif

}  // namespace edgert::cpu::gemm
