// Direct convolution for the stems of CNNs (f32-conv-direct-8x16-avx512): few input channels
// (the 3 of an RGB image), a 3x3, 5x5 or 7x7 window, stride 1 or 2. Through im2col the packed
// GEMM spends as long gathering the image into panels as multiplying (K is only C x 9 or
// C x 49). Here the image is first split into its column phases (fast/conv_direct.h), so that
// every tap vector of 16 output columns is one plain load; every block of 8 output channels
// then takes 8 FMAs per tap vector, and the epilogue (bias, residual, activation) is finished
// in registers before the one store of each output row segment.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <cstring>

#include "fast/conv_direct.h"
#include "fast/pool_rows.h"
#include "gemm/sgemm.h"
#include "thread_pool.h"
#include "x86/isa_region.h"

EDGERT_ISA_REGION_BEGIN("avx512f,avx512vl,fma")
// GCC 12's false positive on its own masked max/min intrinsics (see x86/depthwise_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace edgert::cpu {

namespace {

#include "x86/activation_lanes_avx512.h"
#include "x86/window_avx512.h"

constexpr int kOutBlock = 8;  // output channels per register block
constexpr int kMaxColumnBlocks = 3;  // blocks of 16 output columns multiplied together

// Where the phase image of one image lives (fast/conv_direct.h): the first float of channel c,
// padded row r, phase ph is data + c * channel + r * row + ph * width.
struct PhaseImage {
  float* data;
  int64_t width, row, channel;
};

// The phase rows of `out_rows` output rows at `data` (fast/conv_direct.h).
PhaseImage phase_image(const DirectConvShape& s, float* data, int64_t out_rows) {
  const int64_t width = direct_conv_phase_width(s);
  return {data, width, s.stride * width, direct_conv_phase_rows(s, out_rows) * s.stride * width};
}

// Padded row r of channel c of image x into its phases, as row `at` of `im`; rows and columns
// outside the image are zeros. Stride 2: the even and odd lanes of each 32 columns, by two
// permutes.
template <int S>
void split_row(const DirectConvShape& s, const PhaseImage& im, const float* x, int64_t c, int64_t r, int64_t at) {
  float* out = im.data + c * im.channel + at * im.row;
  const int64_t iy = r - s.pad_top;
  if (iy < 0 || iy >= s.in_h) {
    std::memset(out, 0, static_cast<size_t>(im.row) * sizeof(float));
    return;
  }
  const float* row = x + (c * s.in_h + iy) * s.in_w;
  const __m512 zero = _mm512_setzero_ps();
  if (S == 1) {
    for (int64_t j = 0; j < im.width; j += 16) {
      const int64_t c0 = j - s.pad_left;
      _mm512_storeu_ps(out + j, load_columns(row, c0, column_mask(c0, s.in_w), zero));
    }
    return;
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int64_t j = 0; j < im.width; j += 16) {
    const int64_t c0 = 2 * j - s.pad_left;  // padded column 2j
    const __m512 lo = load_columns(row, c0, column_mask(c0, s.in_w), zero);
    const __m512 hi = load_columns(row, c0 + 16, column_mask(c0 + 16, s.in_w), zero);
    _mm512_storeu_ps(out + j, _mm512_permutex2var_ps(lo, even, hi));
    _mm512_storeu_ps(out + im.width + j, _mm512_permutex2var_ps(lo, odd, hi));
  }
}

// The phase rows of output rows [oy0, oy1) of image x into `im` (its row 0: padded row oy0 S).
template <int K, int S>
void split_rows(const DirectConvShape& s, const PhaseImage& im, const float* x, int64_t oy0, int64_t oy1) {
  const int64_t r0 = oy0 * S, r1 = (oy1 - 1) * S + K;
  for (int64_t c = 0; c < s.channels; ++c)
    for (int64_t r = r0; r < r1; ++r) split_row<S>(s, im, x, c, r, r - r0);
}

// NB blocks of 16 output columns of output row oy times every output channel, 8 at a time: each
// weight broadcast feeds NB FMAs, 8 x NB independent accumulators. Three blocks (24
// accumulators) take 11 loads per 24 FMAs where two took 10 per 16. The activation A is a
// compile-time constant and the epilogue is unrolled, so the accumulators stay in registers
// (with the kind read at run time, GCC spilled them and jumped through a table per vector: a
// quarter of a stem's time).
template <int K, int S, int NB, ActivationKind A>
inline void multiply_blocks(const DirectConvShape& s, const PhaseImage& im, const float* packed, const float* bias,
                            const float* z, float* y, const Activation& activation, int64_t oy, int64_t out_plane,
                            int64_t out_row, const int64_t* ox, const __mmask16* out_mask) {
  const int64_t taps_per_block = s.channels * K * K;
  const float* top = im.data + oy * S * im.row;  // channel 0, the window's first row, phase 0
  for (int64_t m0 = 0; m0 < s.out_channels; m0 += kOutBlock) {
    const float* w = packed + m0 * taps_per_block;  // [tap][kOutBlock]
    __m512 acc[NB][kOutBlock];
#pragma GCC unroll 8
    for (int r = 0; r < kOutBlock; ++r)
#pragma GCC unroll 3
      for (int b = 0; b < NB; ++b) acc[b][r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < s.channels; ++c) {
      for (int ky = 0; ky < K; ++ky) {
        const float* row = top + c * im.channel + ky * im.row;
#pragma GCC unroll 7
        for (int kx = 0; kx < K; ++kx, w += kOutBlock) {
          const float* tap = row + (kx % S) * im.width + kx / S;  // padded column S * ox + kx
          __m512 tv[NB];
#pragma GCC unroll 3
          for (int b = 0; b < NB; ++b) tv[b] = _mm512_loadu_ps(tap + ox[b]);
#pragma GCC unroll 8
          for (int r = 0; r < kOutBlock; ++r) {
            const __m512 wr = _mm512_set1_ps(w[r]);
#pragma GCC unroll 3
            for (int b = 0; b < NB; ++b) acc[b][r] = _mm512_fmadd_ps(wr, tv[b], acc[b][r]);
          }
        }
      }
    }
    const int64_t rows_here = std::min<int64_t>(kOutBlock, s.out_channels - m0);
#pragma GCC unroll 8
    for (int r = 0; r < kOutBlock; ++r) {
      if (r >= rows_here) break;
#pragma GCC unroll 3
      for (int b = 0; b < NB; ++b) {
        const int64_t at = (m0 + r) * out_plane + out_row * s.out_w + ox[b];
        __m512 v = acc[b][r];
        if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[m0 + r]));
        if (z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(out_mask[b], z + at));  // z may be y: read first
        v = activate_lanes(v, A, activation.p0, activation.p1);
        store_lanes(y + at, out_mask[b], v);
      }
    }
  }
}

// Output row oy (counted from the first row `im` holds) of every output channel, stored as row
// out_row of planes out_plane floats apart (the whole output: the row and its plane size; a band
// buffer: the row's place in the band).
template <int K, int S, ActivationKind A>
void output_row(const DirectConvShape& s, const PhaseImage& im, const float* packed, const float* bias,
                const float* z, float* y, const Activation& activation, int64_t oy, int64_t out_plane,
                int64_t out_row) {
  const int64_t blocks = (s.out_w + 15) / 16;
  for (int64_t b0 = 0; b0 < blocks;) {
    // Three blocks at a time; the rest as 2 + 2 rather than 3 + 1 (one block alone takes a load
    // per FMA).
    const int64_t left = blocks - b0, nb = left == 4 || left == 2 ? 2 : std::min<int64_t>(left, kMaxColumnBlocks);
    int64_t oxs[kMaxColumnBlocks] = {};
    __mmask16 masks[kMaxColumnBlocks] = {};
    for (int64_t b = 0; b < nb; ++b) {
      oxs[b] = (b0 + b) * 16;
      masks[b] = s.out_w - oxs[b] >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (s.out_w - oxs[b])) - 1);
    }
    const auto go = [&](auto blocks_now) {
      multiply_blocks<K, S, decltype(blocks_now)::value, A>(s, im, packed, bias, z, y, activation, oy, out_plane,
                                                            out_row, oxs, masks);
    };
    if (nb == 3) go(std::integral_constant<int, 3>{});
    else if (nb == 2) go(std::integral_constant<int, 2>{});
    else go(std::integral_constant<int, 1>{});
    b0 += nb;
  }
}

template <int K, int S, ActivationKind A>
void run(const DirectConvShape& s, const float* x, const float* packed, const float* bias, const float* z, float* y,
         const Activation& activation, float* workspace, int threads) {
  const int64_t tasks = std::min<int64_t>(s.out_h, 4 * threads), task_rows = direct_conv_task_rows(s, threads);
  const int64_t in_image = s.channels * s.in_h * s.in_w, out_image = s.out_channels * s.out_h * s.out_w;
  const int64_t per_thread = direct_conv_phase_floats(s, task_rows);
  for (int64_t n = 0; n < s.batch; ++n) {
    ThreadPool::instance().parallel_for(
        tasks,
        [&](int64_t task, int thread) {
          const int64_t oy0 = task * s.out_h / tasks, oy1 = (task + 1) * s.out_h / tasks;
          if (oy0 >= oy1) return;
          const PhaseImage im = phase_image(s, workspace + thread * per_thread, task_rows);
          split_rows<K, S>(s, im, x + n * in_image, oy0, oy1);
          for (int64_t oy = oy0; oy < oy1; ++oy)
            output_row<K, S, A>(s, im, packed, bias, z ? z + n * out_image : nullptr, y + n * out_image, activation,
                                oy - oy0, s.out_h * s.out_w, oy);
        },
        threads);
  }
}

// Convolution and max pool in bands of pooled rows (see direct_conv_pool_avx512): the band's
// convolution rows, every output channel, go to this thread's band buffer (planes of the
// largest band's rows), are finished there (activations the lanes lack) and pooled from it
// into y. A thread takes consecutive bands, and the rows two bands share (kernel - stride of
// them) are moved to the top of the buffer rather than computed again (a 7x7 stem's row costs
// ~10x its copy).
template <int K, int S, ActivationKind A>
void run_pooled(const DirectConvShape& s, const DirectConvPool& p, const float* x, const float* packed,
                const float* bias, float* y, const Activation& activation, float* workspace, int threads) {
  const int64_t bands = (p.out_h + p.band_rows - 1) / p.band_rows;
  const int64_t in_image = s.channels * s.in_h * s.in_w, pooled_plane = p.out_h * p.out_w;
  const int64_t band_plane = direct_conv_pool_band_conv_rows(p) * s.out_w;
  const int64_t band_conv_rows = direct_conv_pool_band_conv_rows(p);
  const size_t per_thread = direct_conv_pool_thread_floats(s, p);
  const size_t phase_per_thread = static_cast<size_t>(direct_conv_phase_floats(s, band_conv_rows));
  float* const bands_at = workspace + static_cast<size_t>(std::max(threads, 1)) * phase_per_thread;
  for (int64_t n = 0; n < s.batch; ++n) {
    ThreadPool::instance().parallel_ranges(
        bands,
        [&](int64_t begin, int64_t end, int thread) {
          float* band = bands_at + static_cast<size_t>(thread) * per_thread;
          const PhaseImage im = phase_image(s, workspace + static_cast<size_t>(thread) * phase_per_thread, band_conv_rows);
          int64_t held0 = 0, held1 = 0;  // rows [held0, held1) are in the buffer
          for (int64_t b = begin; b < end; ++b) {
            const int64_t p0 = b * p.band_rows, p1 = std::min(p.out_h, p0 + p.band_rows);
            // The convolution rows the pooled rows [p0, p1) read; those outside are the pool's padding.
            const int64_t lo = p0 * p.stride - p.pad_top, hi = (p1 - 1) * p.stride - p.pad_top + p.kernel;
            const int64_t r0 = std::max<int64_t>(0, lo), r1 = std::min(s.out_h, hi), rows = r1 - r0;
            if (rows <= 0) continue;  // cannot happen for a valid geometry: every window meets the input
            int64_t first_new = r0;
            if (b > begin && r0 >= held0 && r0 < held1) {
              const int64_t kept = held1 - r0;
              for (int64_t m = 0; m < s.out_channels; ++m)
                std::memmove(band + m * band_plane, band + m * band_plane + (r0 - held0) * s.out_w,
                             static_cast<size_t>(kept * s.out_w) * sizeof(float));
              first_new = held1;
            }
            if (first_new < r1) split_rows<K, S>(s, im, x + n * in_image, first_new, r1);
            for (int64_t oy = first_new; oy < r1; ++oy) {
              output_row<K, S, A>(s, im, packed, bias, nullptr, band, activation, oy - first_new, band_plane, oy - r0);
              if (!activation_in_lanes(activation.kind))
                for (int64_t m = 0; m < s.out_channels; ++m)
                  gemm::apply_activation(band + m * band_plane + (oy - r0) * s.out_w, s.out_w, activation);
            }
            held0 = r0, held1 = r1;
            for (int64_t m = 0; m < s.out_channels; ++m) {
              const float* plane = band + m * band_plane;
              float* pooled = y + (n * s.out_channels + m) * pooled_plane + p0 * p.out_w;
              max_pool_plane_avx512(plane, pooled, rows, s.out_w, p1 - p0, p.out_w, p.kernel, p.stride, r0 - lo,
                                    p.pad_left);
            }
          }
        },
        threads);
  }
}

template <ActivationKind A>
void run_kernel(const DirectConvShape& s, const float* x, const float* packed, const float* bias, const float* z,
                float* y, const Activation& activation, float* workspace, int threads) {
  const auto go = [&](auto kernel) { kernel(s, x, packed, bias, z, y, activation, workspace, threads); };
  if (s.kernel == 3) s.stride == 1 ? go(run<3, 1, A>) : go(run<3, 2, A>);
  else if (s.kernel == 5) s.stride == 1 ? go(run<5, 1, A>) : go(run<5, 2, A>);
  else s.stride == 1 ? go(run<7, 1, A>) : go(run<7, 2, A>);
}

template <ActivationKind A>
void run_pooled_kernel(const DirectConvShape& s, const DirectConvPool& p, const float* x, const float* packed,
                       const float* bias, float* y, const Activation& activation, float* workspace, int threads) {
  const auto go = [&](auto kernel) { kernel(s, p, x, packed, bias, y, activation, workspace, threads); };
  if (s.kernel == 3) s.stride == 1 ? go(run_pooled<3, 1, A>) : go(run_pooled<3, 2, A>);
  else if (s.kernel == 5) s.stride == 1 ? go(run_pooled<5, 1, A>) : go(run_pooled<5, 2, A>);
  else s.stride == 1 ? go(run_pooled<7, 1, A>) : go(run_pooled<7, 2, A>);
}

}  // namespace

void direct_conv_pool_avx512(const DirectConvShape& s, const DirectConvPool& p, const float* x, const float* packed,
                             const float* bias, float* y, const Activation& activation, float* workspace,
                             int threads) {
  with_lane_activation(activation.kind, [&](auto kind) {
    run_pooled_kernel<decltype(kind)::value>(s, p, x, packed, bias, y, activation, workspace, threads);
  });
}

void direct_conv_avx512(const DirectConvShape& s, const float* x, const float* packed, const float* bias,
                        const float* z, float* y, const Activation& activation, float* workspace, int threads) {
  with_lane_activation(activation.kind, [&](auto kind) {
    run_kernel<decltype(kind)::value>(s, x, packed, bias, z, y, activation, workspace, threads);
  });
  if (!activation_in_lanes(activation.kind)) {
    const int64_t planes = s.batch * s.out_channels, plane = s.out_h * s.out_w;
    ThreadPool::instance().parallel_for(
        planes, [&](int64_t p, int) { gemm::apply_activation(y + p * plane, plane, activation); }, threads);
  }
}

}  // namespace edgert::cpu

#pragma GCC diagnostic pop
EDGERT_ISA_REGION_END
#endif
