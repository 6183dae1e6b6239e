// B-panel packing for the 8x32 AVX-512 tile (32-column panels): each panel row is built in two
// registers and stored whole; and for the tall tiles' 7- and 8-column panels, a register a row.
//  - Strided B with unit column stride (1x1 convolutions read the image itself): two loads per
//    row, masked on the last panel. The portable loop, compiled for the baseline ISA, copied 4
//    floats at a time and took 7% of MobileNetV2.
//  - im2col (gemm/im2col_panel.h), stride 1 or 2 along the row: stride-1 runs are masked loads
//    shifted to their lanes, stride-2 runs the even lanes of two loads; lanes outside the image
//    (or past the panel's columns) stay zero. The portable packer copied element by element
//    (stride 2) or through memcpy calls of a few dozen floats, a third of a 3x3 convolution's
//    time; for the tall tiles it still did until kernel revision 42 (resnet18's 3x3/2
//    convolutions on 14x14 and 7x7 ran 10-20% faster with this one).
// Called only when the CPU reports AVX-512F.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "gemm/im2col_panel.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl")
// GCC 12 reports the _mm512_undefined_ps inside its own intrinsics as (maybe) uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace edgert::cpu::gemm {

namespace {

// Lanes [a, e) of 16 (0 <= a, e <= 16; none when e <= a).
inline __mmask16 lanes(int64_t a, int64_t e) {
  if (e <= a) return 0;
  const uint32_t below_e = e >= 16 ? 0xFFFFu : (1u << e) - 1u;
  return static_cast<__mmask16>(below_e & ~((1u << a) - 1u));
}

// plane + offset for a masked load: lanes outside the mask are never read, even where the
// address of lane 0 lies before the row (or the plane).
inline const float* at(const float* row, int64_t offset) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(offset * 4));
}

}  // namespace

void pack_strided_panel_avx512(const float* src, int64_t row_stride, int64_t kc, int64_t w, float* dst,
                               const float* row_scale) {
  const __mmask16 first = lanes(0, std::min<int64_t>(w, 16)), second = lanes(0, w - 16);
  if (row_scale) {  // one multiply per value, rounded as the separate Mul rounded it
    for (int64_t p = 0; p < kc; ++p, src += row_stride, dst += kMaxPanelColumns) {
      const __m512 scale = _mm512_set1_ps(row_scale[p]);
      _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_maskz_loadu_ps(first, src), scale));
      _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_maskz_loadu_ps(second, src + 16), scale));
    }
    return;
  }
  if (w == kMaxPanelColumns) {
    for (int64_t p = 0; p < kc; ++p, src += row_stride, dst += kMaxPanelColumns) {
      _mm512_storeu_ps(dst, _mm512_loadu_ps(src));
      _mm512_storeu_ps(dst + 16, _mm512_loadu_ps(src + 16));
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p, src += row_stride, dst += kMaxPanelColumns) {
    _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(first, src));
    _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(second, src + 16));
  }
}

// The tall tiles' panels (7 or 8 columns): one masked load per row, stored 8 lanes wide. Rows
// are nr floats apart, so the eighth lane of a 7-column row lands on the next row's first
// value, which that row's store then writes; the panel's last row is stored masked. The
// portable loop was 9% of a 960 -> 160 projection on a 7x7 image.
void pack_strided_narrow_panel_avx512(const float* src, int64_t row_stride, int64_t kc, int64_t nr, int64_t w,
                                      float* dst, const float* row_scale) {
  const __mmask8 load = static_cast<__mmask8>((1u << w) - 1u), last = static_cast<__mmask8>((1u << nr) - 1u);
  for (int64_t p = 0; p < kc; ++p, src += row_stride, dst += nr) {
    __m256 v = _mm256_maskz_loadu_ps(load, src);
    if (row_scale) v = _mm256_mul_ps(v, _mm256_set1_ps(row_scale[p]));
    if (p + 1 < kc) {
      _mm256_storeu_ps(dst, v);
    } else {
      _mm256_mask_storeu_ps(dst, last, v);
    }
  }
}

// How one half (16 lanes) of a panel row reads one segment for one (ky, kx): a masked load at
// `offset` from the channel plane (stride 1), or the even lanes of two masked loads (stride 2).
struct HalfRead {
  int64_t offset;
  __mmask16 lanes, first, second;
};

// One half of a panel row of the channel plane `channel`: its n reads merged into one register.
inline __m512 gather_half(const float* channel, const HalfRead* reads, int n, int64_t sw, __m512i even) {
  __m512 v = _mm512_setzero_ps();
  for (int i = 0; i < n; ++i) {
    const HalfRead& r = reads[i];
    if (sw == 1) {
      v = _mm512_mask_loadu_ps(v, r.lanes, at(channel, r.offset));
    } else {
      const __m512 first = _mm512_maskz_loadu_ps(r.first, at(channel, r.offset));
      const __m512 second = _mm512_maskz_loadu_ps(r.second, at(channel, r.offset + 16));
      v = _mm512_mask_mov_ps(v, r.lanes, _mm512_permutex2var_ps(first, even, second));
    }
  }
  return v;
}

void pack_im2col_panel_avx512(const BSource& b, int64_t p0, int64_t kc, int64_t jp, int64_t w, float* dst) {
  PanelSegment segments[kMaxPanelColumns];
  const int count = panel_segments(b, jp, w, segments);
  const int64_t taps = b.kernel_h * b.kernel_w, plane = b.in_h * b.in_w, sw = b.stride_w;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  // Rows of the panel that share (ky, kx) differ only in the channel: the reads are worked out
  // once per tap, then every channel's row takes its loads and two stores.
  for (int64_t tap = 0; tap < taps; ++tap) {
    const int64_t ky = tap / b.kernel_w, kx = tap % b.kernel_w;
    // Channels whose row c * taps + tap lies in [p0, p0 + kc).
    const int64_t c_begin = (p0 - tap + taps - 1) / taps, c_end = (p0 + kc - tap + taps - 1) / taps;
    if (c_begin >= c_end) continue;
    // Each half's reads apart: a register per half (an array indexed by the half lived on the
    // stack, and its masked stores then full loads missed store forwarding: 24% of a 3x3/2
    // convolution 64 -> 128 on 56x56 was this packer).
    HalfRead reads[2][2 * kMaxPanelColumns];
    int n[2] = {0, 0};
    for (int s = 0; s < count; ++s) {
      const PanelSegment& g = segments[s];
      SegmentRead sr;
      if (!segment_read(b, g, ky, kx, &sr)) continue;
      for (int h = 0; h < 2; ++h) {
        // This half's lanes [a, e) hold columns lo .. hi of the segment.
        const int64_t a = std::max<int64_t>(g.j + sr.lo, 16 * h) - 16 * h;
        const int64_t e = std::min<int64_t>(g.j + sr.hi, 16 * h + 16) - 16 * h;
        if (e <= a) continue;
        HalfRead& r = reads[h][n[h]++];
        r.lanes = lanes(a, e);
        if (sw == 1) {
          r.offset = sr.iy * b.in_w + sr.ix0 + 16 * h - g.j;  // lane l reads ix0 + 16h + l - g.j
        } else {
          // Lane l reads element 2l of the 32 from ix0 + 2 (16h - g.j); the elements the lanes
          // need, [2a, 2e - 1), lie inside the row.
          r.offset = sr.iy * b.in_w + sr.ix0 + 2 * (16 * h - g.j);
          r.first = lanes(2 * a, std::min<int64_t>(2 * e - 1, 16));
          r.second = lanes(std::max<int64_t>(2 * a - 16, 0), 2 * e - 1 - 16);
        }
      }
    }
    float* row_dst = dst + (c_begin * taps + tap - p0) * kMaxPanelColumns;
    for (int64_t c = c_begin; c < c_end; ++c, row_dst += taps * kMaxPanelColumns) {
      const float* channel = b.data + c * plane;
      _mm512_storeu_ps(row_dst, gather_half(channel, reads[0], n[0], sw, even));
      _mm512_storeu_ps(row_dst + 16, gather_half(channel, reads[1], n[1], sw, even));
    }
  }
}

bool pack_im2col_narrow_panel_avx512(const BSource& b, int64_t p0, int64_t kc, int64_t nr, int64_t jp, int64_t w,
                                     float* dst) {
  const int64_t taps = b.kernel_h * b.kernel_w, plane = b.in_h * b.in_w, sw = b.stride_w;
  if (taps > kMaxNarrowIm2colTaps || (sw != 1 && sw != 2) || nr > 8 || kc <= 0) return false;
  PanelSegment segments[kMaxPanelColumns];
  const int count = panel_segments(b, jp, w, segments);
  // A panel row's reads for each tap, worked out once: a masked 8-lane load (stride 1), or the
  // even elements of a masked 16-lane load (stride 2), into lanes [a, e).
  struct NarrowRead {
    int64_t offset;
    __mmask16 load;
    __mmask8 lanes;
  };
  NarrowRead reads[kMaxNarrowIm2colTaps][8];
  int n[kMaxNarrowIm2colTaps];
  for (int64_t tap = 0; tap < taps; ++tap) {
    const int64_t ky = tap / b.kernel_w, kx = tap % b.kernel_w;
    n[tap] = 0;
    for (int s = 0; s < count; ++s) {
      const PanelSegment& g = segments[s];
      SegmentRead sr;
      if (!segment_read(b, g, ky, kx, &sr)) continue;
      const int64_t a = g.j + sr.lo, e = g.j + sr.hi;
      if (e <= a) continue;
      NarrowRead& r = reads[tap][n[tap]++];
      r.lanes = static_cast<__mmask8>(lanes(a, e));
      // Lane l reads ix0 + sw (l - g.j): element l (stride 1) or 2l (stride 2) from offset.
      r.offset = sr.iy * b.in_w + sr.ix0 - sw * g.j;
      r.load = sw == 1 ? lanes(a, e) : lanes(2 * a, 2 * e - 1);
    }
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __mmask8 last_row = static_cast<__mmask8>((1u << nr) - 1u);
  int64_t c = p0 / taps, tap = p0 % taps;
  for (int64_t p = 0; p < kc; ++p, dst += nr) {
    const float* channel = b.data + c * plane;
    __m256 v = _mm256_setzero_ps();
    for (int i = 0; i < n[tap]; ++i) {
      const NarrowRead& r = reads[tap][i];
      if (sw == 1) {
        v = _mm256_mask_loadu_ps(v, r.lanes, at(channel, r.offset));
      } else {
        const __m512 pair = _mm512_maskz_loadu_ps(r.load, at(channel, r.offset));
        v = _mm256_mask_mov_ps(v, r.lanes, _mm512_castps512_ps256(_mm512_permutexvar_ps(even, pair)));
      }
    }
    // Rows nr floats apart: 8 lanes stored, a 7-column row's eighth (zero) overwritten by the
    // next row's store; the last row masked.
    if (p + 1 < kc) {
      _mm256_storeu_ps(dst, v);
    } else {
      _mm256_mask_storeu_ps(dst, last_row, v);
    }
    if (++tap == taps) tap = 0, ++c;
  }
  return true;
}

}  // namespace edgert::cpu::gemm

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
