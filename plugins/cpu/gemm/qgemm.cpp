// Packing, the scalar reference, the portable im2col and the blocking loops of qgemm.h; the
// families' tiles and activation packings are in x86/qgemm_avx512vnni.cpp, x86/qgemm_avx2.cpp
// and arm/qgemm_neon.cpp.
#include "gemm/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "prepared_state.h"
#include "thread_pool.h"

namespace edgert::cpu::gemm {

namespace {

int32_t wrap_to_int32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The largest packing of a pixel panel: 16-bit activations (AVX2, NEON).
size_t packed_panel_bytes(int64_t k) {
  return round_up_64(static_cast<size_t>((k + 3) / 4 * 4 * kQgemmPanelPixels) * sizeof(int16_t));
}
size_t scratch_bytes(int64_t k) { return round_up_64(static_cast<size_t>(k * kQgemmPanelPixels)); }

}  // namespace

bool qgemm_isa_available(QgemmIsa isa) {
  switch (isa) {
    case QgemmIsa::Reference: return true;
    case QgemmIsa::Avx512Vnni:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
      return false;
#endif
    case QgemmIsa::Avx2:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
      return false;
#endif
    case QgemmIsa::Neon:
#if defined(__aarch64__)
      return true;  // Advanced SIMD is part of every ARMv8-A Linux target
#else
      return false;
#endif
    case QgemmIsa::NeonDot:
#if defined(__aarch64__)
      return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
      return false;
#endif
  }
  return false;
}

namespace {

prepared::Key rows_key(int64_t m, int64_t k) { return {prepared::kQgemmRows, m, k, kQgemmPanelRows, 0}; }
prepared::Key sums_key(int64_t m, int64_t k) { return {prepared::kQgemmRowSums, m, k, 0, 0}; }

}  // namespace

bool take_stored_qrows(int64_t m, int64_t k, PackedQRows& out) {
  out.data.clear();
  out.row_sums.clear();
  out.stored = nullptr;
  out.stored_sums = nullptr;
  out.m = out.k = 0;
  if (m < 0 || k < 0 || k > kQgemmMaxDepth) return false;
  out.m = m;
  out.k = k;
  const size_t bytes = static_cast<size_t>(out.panels() * out.panel_bytes());  // a multiple of 48
  out.stored = static_cast<const int8_t*>(prepared::take_bytes(rows_key(m, k), bytes));
  if (!out.stored) return false;
  out.stored_sums = static_cast<const int32_t*>(prepared::take_bytes(sums_key(m, k), static_cast<size_t>(m) * 4));
  if (!out.stored_sums) {  // the panels hold every weight: the sums from them
    out.row_sums.assign(static_cast<size_t>(m), 0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t p = 0; p < k; ++p) out.row_sums[static_cast<size_t>(r)] += out.at(r, p);
  }
  return true;
}

bool pack_qrows(const int8_t* src, int64_t m, int64_t k, PackedQRows& out) {
  if (take_stored_qrows(m, k, out)) return true;
  if (m < 0 || k < 0 || k > kQgemmMaxDepth) return false;
  out.stored = nullptr;
  const size_t bytes = static_cast<size_t>(out.panels() * out.panel_bytes());
  const prepared::Key key = rows_key(m, k), row_sums_key = sums_key(m, k);
  out.data.assign(bytes, 0);
  out.row_sums.assign(static_cast<size_t>(m), 0);
  for (int64_t r = 0; r < m; ++r) {
    int8_t* row = out.data.data() + (r / kQgemmPanelRows) * out.panel_bytes() + (r % kQgemmPanelRows) * 4;
    int32_t sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      const int8_t v = src[r * k + p];
      row[(p / 4) * 4 * kQgemmPanelRows + p % 4] = v;
      sum += v;
    }
    out.row_sums[static_cast<size_t>(r)] = sum;
  }
  prepared::record_bytes(key, out.data.data(), bytes);
  prepared::record_bytes(row_sums_key, out.row_sums.data(), static_cast<size_t>(m) * 4);
  return true;
}

uint8_t QPixels::at(int64_t k, int64_t p) const {
  if (kind == Kind::Rows) return data[k * row_stride + p];
  const int64_t taps = kernel_h * kernel_w, c = k / taps, ky = (k % taps) / kernel_w, kx = k % kernel_w;
  const int64_t iy = (p / out_w) * stride_h - pad_top + ky * dilation_h;
  const int64_t ix = (p % out_w) * stride_w - pad_left + kx * dilation_w;
  if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) return static_cast<uint8_t>(zero_point);
  return data[(c * in_h + iy) * in_w + ix];
}

uint8_t requantize(int32_t acc, float multiplier, int32_t zero_point) {
  // saturate_round (nn_common.h): round half to even, add the zero point, clamp.
  const double q = static_cast<double>(std::nearbyint(static_cast<float>(acc) * multiplier)) + zero_point;
  if (std::isnan(q)) return 0;
  return static_cast<uint8_t>(std::min(255.0, std::max(0.0, q)));
}

void qgemm_reference(const PackedQRows& w, const QPixels& b, int64_t r_begin, int64_t r_end, int64_t p_begin,
                     int64_t p_end, const QRequant& y) {
  for (int64_t r = r_begin; r < r_end; ++r) {
    for (int64_t p = p_begin; p < p_end; ++p) {
      int64_t sum = y.bias ? y.bias[r] : 0;
      for (int64_t k = 0; k < w.k; ++k) sum += (static_cast<int64_t>(b.at(k, p)) - b.zero_point) * w.at(r, k);
      // Modulo 2^32, as the vector kernels' wrapping adds (only a bias near the int32 limits can
      // make the sum leave int32).
      y.data[r * y.row_stride + p] = requantize(wrap_to_int32(sum), y.multiplier[r], y.zero_point);
    }
  }
}

namespace {

// ceil(v / s) for s >= 1 (v may be negative), without a division for strides 1 and 2.
int64_t ceil_div(int64_t v, int64_t s) {
  if (s == 1) return v;
  if (s == 2) return (v + 1) >> 1;  // arithmetic shift: floor, so ceil for negative v too
  return v >= 0 ? (v + s - 1) / s : -((-v) / s);
}

// B's im2col rows [0, k) for pixels [p0, p0 + count): row r at out + 32 r. The panel's pixels
// are cut once into runs along output rows, so each row of the window is a few contiguous (or
// strided) copies and two fills of padding, no division per byte.
void im2col_rows(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* out) {
  struct Run {
    int64_t iy0, ix0, len, offset;  // the window corner of the run's first pixel
  };
  Run runs[kQgemmPanelPixels];
  int run_count = 0;
  for (int64_t done = 0; done < count;) {
    const int64_t p = p0 + done, oy = p / b.out_w, ox = p % b.out_w, len = std::min(b.out_w - ox, count - done);
    runs[run_count++] = {oy * b.stride_h - b.pad_top, ox * b.stride_w - b.pad_left, len, done};
    done += len;
  }
  const uint8_t zero = static_cast<uint8_t>(b.zero_point);
  const int64_t s = b.stride_w, taps = b.kernel_h * b.kernel_w;
  int64_t r = 0;
  for (int64_t c = 0; r < k; ++c) {
    const uint8_t* plane = b.data + c * b.in_h * b.in_w;
    for (int64_t t = 0; t < taps; ++t, ++r) {
      const int64_t dy = (t / b.kernel_w) * b.dilation_h, dx = (t % b.kernel_w) * b.dilation_w;
      uint8_t* row_out = out + r * kQgemmPanelPixels;
      for (int i = 0; i < run_count; ++i) {
        const Run& run = runs[i];
        uint8_t* dst = row_out + run.offset;
        const int64_t iy = run.iy0 + dy, len = run.len;
        if (iy < 0 || iy >= b.in_h) {
          for (int64_t j = 0; j < len; ++j) dst[j] = zero;
          continue;
        }
        const int64_t ix0 = run.ix0 + dx;
        // Pixels j in [j_lo, j_hi) read inside the row; the others are padding.
        const int64_t j_lo = std::min(len, std::max<int64_t>(0, ceil_div(-ix0, s)));
        const int64_t j_hi = std::min(len, std::max(j_lo, ceil_div(b.in_w - ix0, s)));
        for (int64_t j = 0; j < j_lo; ++j) dst[j] = zero;
        for (int64_t j = j_hi; j < len; ++j) dst[j] = zero;
        const uint8_t* src = plane + iy * b.in_w + ix0;
        if (s == 1)
          std::memcpy(dst + j_lo, src + j_lo, static_cast<size_t>(j_hi - j_lo));
        else
          for (int64_t j = j_lo; j < j_hi; ++j) dst[j] = src[j * s];
      }
    }
  }
}

}  // namespace

QPixelRows qgemm_pixel_rows(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch) {
  if (b.kind == QPixels::Kind::Rows) return {b.data + p0, b.row_stride};
  im2col_rows(b, k, p0, count, scratch);
  return {scratch, kQgemmPanelPixels};
}

size_t qgemm_workspace_bytes(int64_t k, int threads) {
  return static_cast<size_t>(std::max(threads, 1)) * (packed_panel_bytes(k) + scratch_bytes(k));
}

namespace {

// One optimized family as qgemm drives it: its packing, its panel loop, and what its packing
// subtracts from every activation (added back through the row biases).
struct Family {
  void (*pack)(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch, uint8_t* packed);
  void (*panel)(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed, int64_t p0,
                int64_t count, const int32_t* row_bias, const QRequant& y);
  int32_t activation_offset;
};

// Null for the reference and for a family of another architecture.
const Family* family_of(QgemmIsa isa) {
#if defined(__x86_64__)
  static const Family vnni{qgemm_pack_pixels_avx512, qgemm_panel_12x32_avx512vnni, 0};
  static const Family avx2{qgemm_pack_pixels_avx2, qgemm_panel_12x3_avx2, 0};
  if (isa == QgemmIsa::Avx512Vnni) return &vnni;
  if (isa == QgemmIsa::Avx2) return &avx2;
#endif
#if defined(__aarch64__)
  static const Family neon{qgemm_pack_pixels_neon, qgemm_panel_12x8_neon, 0};
  static const Family dotprod{qgemm_pack_pixels_dotprod, qgemm_panel_12x8_dotprod, 128};
  if (isa == QgemmIsa::Neon) return &neon;
  if (isa == QgemmIsa::NeonDot) return &dotprod;
#endif
  (void)isa;
  return nullptr;
}

}  // namespace

void qgemm(QgemmIsa isa, const PackedQRows& w, const QPixels& b, int64_t pixels, const QRequant& y,
           int32_t* row_bias, void* workspace, int max_threads) {
  if (pixels <= 0 || w.m == 0) return;
  ThreadPool& pool = ThreadPool::instance();
  const Family* family = family_of(isa);
  if (!family) {
    pool.parallel_ranges(w.m, [&](int64_t r0, int64_t r1, int) { qgemm_reference(w, b, r0, r1, 0, pixels, y); },
                         max_threads);
    return;
  }
  // sum (b - offset) w + bias - (zb - offset) sum w = bias + sum (b - zb) w, modulo 2^32.
  const int64_t zero_point = static_cast<int64_t>(b.zero_point) - family->activation_offset;
  for (int64_t r = 0; r < w.m; ++r)
    row_bias[r] = wrap_to_int32(static_cast<int64_t>(y.bias ? y.bias[r] : 0) - zero_point * w.sums()[r]);
  const int64_t pixel_panels = (pixels + kQgemmPanelPixels - 1) / kQgemmPanelPixels, row_panels = w.panels();
  // A task packs one pixel panel and runs rows over it. With fewer panels than two per thread (a
  // 7x7 image has 2), the rows are split too, each part packing the panel again (k x 32 bytes
  // against 12 k x 32 multiply-adds per row panel).
  const int64_t threads = std::max(1, std::min(pool.num_threads(), max_threads));
  const int64_t row_parts =
      std::min(row_panels, std::max<int64_t>(1, (2 * threads + pixel_panels - 1) / pixel_panels));
  const size_t per_thread = packed_panel_bytes(w.k) + scratch_bytes(w.k);
  pool.parallel_for(
      pixel_panels * row_parts,
      [&](int64_t task, int thread) {
        const int64_t panel = task / row_parts, part = task % row_parts;
        const int64_t p0 = panel * kQgemmPanelPixels, count = std::min(kQgemmPanelPixels, pixels - p0);
        uint8_t* packed = static_cast<uint8_t*>(workspace) + static_cast<size_t>(thread) * per_thread;
        family->pack(b, w.k, p0, count, packed + packed_panel_bytes(w.k), packed);
        family->panel(w, part * row_panels / row_parts, (part + 1) * row_panels / row_parts, packed, p0, count,
                      row_bias, y);
      },
      max_threads);
}

}  // namespace edgert::cpu::gemm
