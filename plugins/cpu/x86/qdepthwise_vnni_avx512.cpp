// The integer AVX-512 INT8 depthwise plane (fast/qdepthwise.h, VnniPlan): per kernel row and
// vector of outputs one masked byte load, one vpermb (vpermt2b for two rows) and one vpdpbusd
// per 4 taps; no scratch plane, no conversion to float. The requantisation is qgemm's.
// Compiled for AVX-512 VNNI and VBMI through the target pragma only; the tactic runs it only when
// vnni_available().
#include "fast/qdepthwise.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace edgert::cpu::qdepthwise {

namespace {

// Bytes [lo, hi) of 64, clamped.
uint64_t byte_range(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 64);
  if (hi <= lo) return 0;
  const uint64_t upto_hi = hi >= 64 ? ~0ull : ((1ull << hi) - 1);
  return upto_hi & ~((1ull << lo) - 1);
}

}  // namespace

VnniPlan make_vnni_plan(const Geometry& g) {
  VnniPlan p;
  p.g = g;
  p.rows_per_vector = g.out_w <= 8 ? 2 : 1;
  p.chunks = (g.kernel_w + 3) / 4;
  const int64_t width = p.rows_per_vector == 2 ? 8 : 16;
  p.blocks = (g.out_w + width - 1) / width;
  for (int64_t b = 0; b < p.blocks; ++b)
    for (int64_t c = 0; c < p.chunks; ++c) {
      const int64_t column = b * width * g.stride_w - g.pad_left + 4 * c * g.dilation_w;
      p.loads.push_back({column, byte_range(-column, g.in_w - column)});
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t pixel = p.rows_per_vector == 2 ? i % 8 : i;
      const int64_t source = p.rows_per_vector == 2 ? 64 * (i / 8) : 0;
      p.index[4 * i + j] = static_cast<uint8_t>(source + g.stride_w * pixel + j * g.dilation_w);
    }
  return p;
}

int32_t pack_vnni_weights(const VnniPlan& plan, const int8_t* w, int32_t* packed) {
  const Geometry& g = plan.g;
  int32_t sum = 0;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky)
    for (int64_t c = 0; c < plan.chunks; ++c) {
      uint32_t four = 0;
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t kx = 4 * c + j;
        if (kx >= g.kernel_w) break;
        const int8_t v = w[ky * g.kernel_w + kx];
        sum += v;
        four |= static_cast<uint32_t>(static_cast<uint8_t>(v)) << (8 * j);
      }
      packed[ky * plan.chunks + c] = static_cast<int32_t>(four);
    }
  return sum;
}

#if defined(__x86_64__)

bool vnni_available() {
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                                __builtin_cpu_supports("avx512vbmi");
  return available;
}

namespace {

inline __mmask16 lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : count <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << count) - 1u);
}

struct Requant {
  __m512 lo, hi, scale;
  __m512i zp;
  __m512i apply(__m512i acc) const {
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    return _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
  }
};

}  // namespace

void channel_vnni_avx512(const VnniPlan& plan, const uint8_t* x, int32_t x_zero_point, const int32_t* packed_w,
                         int32_t folded_bias, float multiplier, int32_t y_zero_point, uint8_t* y) {
  const Geometry& g = plan.g;
  const __m512i zx = _mm512_set1_epi8(static_cast<char>(x_zero_point));
  const __m512i index = _mm512_loadu_si512(plan.index);
  const __m512i bias = _mm512_set1_epi32(folded_bias);
  const Requant rq{_mm512_set1_ps(static_cast<float>(-y_zero_point)),
                   _mm512_set1_ps(static_cast<float>(255 - y_zero_point)), _mm512_set1_ps(multiplier),
                   _mm512_set1_epi32(y_zero_point)};
  const int64_t chunks = plan.chunks;
  if (plan.rows_per_vector == 1) {
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for (int64_t b = 0; b < plan.blocks; ++b) {
        const VnniPlan::Load* loads = plan.loads.data() + b * chunks;
        __m512i acc = bias;
        for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
          const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
          const int32_t* wk = packed_w + ky * chunks;
          if (iy < 0 || iy >= g.in_h) {
            for (int64_t c = 0; c < chunks; ++c) acc = _mm512_dpbusd_epi32(acc, zx, _mm512_set1_epi32(wk[c]));
            continue;
          }
          const uint8_t* row = x + iy * g.in_w;
          for (int64_t c = 0; c < chunks; ++c) {
            const __m512i src = _mm512_mask_loadu_epi8(zx, loads[c].mask, row + loads[c].column);
            acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(index, src), _mm512_set1_epi32(wk[c]));
          }
        }
        _mm512_mask_cvtusepi32_storeu_epi8(y + oy * g.out_w + 16 * b, lanes16(g.out_w - 16 * b), rq.apply(acc));
      }
    }
    return;
  }
  // Two output rows a vector: lanes 0-7 row oy, lanes 8-15 row oy + 1 (its input rows one stride
  // lower, the second source of vpermt2b).
  const __mmask16 first = static_cast<__mmask16>((1u << g.out_w) - 1u);
  for (int64_t oy = 0; oy < g.out_h; oy += 2) {
    __m512i acc = bias;
    const bool second_row = oy + 1 < g.out_h;
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      const int64_t iy0 = oy * g.stride_h - g.pad_top + ky * g.dilation_h, iy1 = iy0 + g.stride_h;
      const bool in0 = iy0 >= 0 && iy0 < g.in_h, in1 = second_row && iy1 >= 0 && iy1 < g.in_h;
      const int32_t* wk = packed_w + ky * chunks;
      for (int64_t c = 0; c < chunks; ++c) {
        const VnniPlan::Load& load = plan.loads[static_cast<size_t>(c)];
        const __m512i a = in0 ? _mm512_mask_loadu_epi8(zx, load.mask, x + iy0 * g.in_w + load.column) : zx;
        const __m512i b = in1 ? _mm512_mask_loadu_epi8(zx, load.mask, x + iy1 * g.in_w + load.column) : zx;
        acc = _mm512_dpbusd_epi32(acc, _mm512_permutex2var_epi8(a, index, b), _mm512_set1_epi32(wk[c]));
      }
    }
    const __m512i q = rq.apply(acc);
    _mm512_mask_cvtusepi32_storeu_epi8(y + oy * g.out_w, first, q);
    // Lanes 8.. land on row oy + 1: the store starts 8 bytes before it, those lanes masked off.
    if (second_row)
      _mm512_mask_cvtusepi32_storeu_epi8(y + (oy + 1) * g.out_w - 8, static_cast<__mmask16>(first << 8), q);
  }
}

#endif

}  // namespace edgert::cpu::qdepthwise

#if defined(__x86_64__)
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
