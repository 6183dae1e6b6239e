// The B packing of sgemm.cpp for the AVX-512 tactics (32-column panels), written with
// intrinsics: the baseline-compiled packer copies im2col columns one float at a time, which for
// a stem convolution (3 input channels, 7x7 or 3x3 taps, stride 2) costs as much as the
// arithmetic. Here each 16 columns of a panel row are one or two masked loads (lanes outside
// the image read as zero) and, for stride 2, one permute (x86/window_avx512.h).
// Handles unit-stride matrices and im2col with column stride 1 or 2 and no column dilation;
// returns false for the rest, which the portable packer then does.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "gemm/sgemm.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl")

namespace edgert::cpu::gemm {

namespace {

#include "x86/window_avx512.h"

// 16 (or `count` < 16) columns of one im2col row segment: input columns c, c + s, ... of `row`.
template <int S>
inline void im2col_lanes(const float* row, int64_t c, int64_t in_w, int64_t count, float* dst) {
  const __mmask16 out = count >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << count) - 1);
  const __m512 zero = _mm512_setzero_ps();
  if (S == 1) {
    _mm512_mask_storeu_ps(dst, out, load_columns(row, c, column_mask(c, in_w) & out, zero));
    return;
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512 lo = load_columns(row, c, column_mask(c, in_w), zero);
  const __m512 hi = load_columns(row, c + 16, column_mask(c + 16, in_w), zero);
  _mm512_mask_storeu_ps(dst, out, _mm512_permutex2var_ps(lo, even, hi));
}

template <int S>
void pack_im2col(const BSource& b, int64_t nr, int64_t p0, int64_t kc, int64_t j0, int64_t j_end, float* dst) {
  const int64_t taps = b.kernel_h * b.kernel_w, plane = b.in_h * b.in_w;
  for (int64_t jp = j0; jp < j_end; jp += nr) {
    const int64_t w = std::min<int64_t>(nr, j_end - jp);
    const int64_t oy0 = jp / b.out_w, ox0 = jp % b.out_w;
    for (int64_t p = p0; p < p0 + kc; ++p, dst += nr) {
      const int64_t c = p / taps, tap = p % taps, ky = tap / b.kernel_w, kx = tap % b.kernel_w;
      const float* src = b.data + c * plane;
      int64_t oy = oy0, ox = ox0, j = 0;
      while (j < w) {
        const int64_t seg = std::min(w - j, b.out_w - ox);
        const int64_t iy = oy * b.stride_h - b.pad_top + ky * b.dilation_h;
        const int64_t ix0 = ox * S - b.pad_left + kx;
        for (int64_t s = 0; s < seg; s += 16) {
          if (iy < 0 || iy >= b.in_h) {
            const int64_t count = std::min<int64_t>(16, seg - s);
            _mm512_mask_storeu_ps(dst + j + s, count >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << count) - 1),
                                  _mm512_setzero_ps());
          } else {
            im2col_lanes<S>(src + iy * b.in_w, ix0 + s * S, b.in_w, seg - s, dst + j + s);
          }
        }
        j += seg;
        ox = 0;
        ++oy;
      }
      for (int64_t s = w; s < nr; ++s) dst[s] = 0.0f;
    }
  }
}

}  // namespace

bool pack_b_avx512(const BSource& b, int64_t nr, int64_t p0, int64_t kc, int64_t j0, int64_t j_end, float* dst) {
  if (b.kind == BSource::Kind::Strided) {
    if (b.col_stride != 1) return false;
    for (int64_t jp = j0; jp < j_end; jp += nr) {
      const int64_t w = std::min<int64_t>(nr, j_end - jp);
      const float* src = b.data + p0 * b.row_stride + jp;
      for (int64_t p = 0; p < kc; ++p, src += b.row_stride, dst += nr) {
        for (int64_t j = 0; j < nr; j += 16) {
          const int64_t count = std::max<int64_t>(0, std::min<int64_t>(16, w - j));
          const __mmask16 mask = count >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << count) - 1);
          _mm512_storeu_ps(dst + j, _mm512_maskz_loadu_ps(mask, src + j));  // zeros past w
        }
      }
    }
    return true;
  }
  if (b.dilation_w != 1) return false;
  if (b.stride_w == 1) return pack_im2col<1>(b, nr, p0, kc, j0, j_end, dst), true;
  if (b.stride_w == 2) return pack_im2col<2>(b, nr, p0, kc, j0, j_end, dst), true;
  return false;
}

}  // namespace edgert::cpu::gemm

#pragma GCC pop_options
#endif
