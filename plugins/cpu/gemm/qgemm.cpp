// Packing, the scalar reference and the blocking loops of qgemm.h; the VNNI tile and the
// activation packing are in x86/qgemm_avx512vnni.cpp.
#include "gemm/qgemm.h"

#include <algorithm>
#include <cmath>

#include "prepared_state.h"
#include "thread_pool.h"

namespace edgert::cpu::gemm {

namespace {

int32_t wrap_to_int32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

size_t packed_panel_bytes(int64_t k) { return round_up_64(static_cast<size_t>((k + 3) / 4 * 4 * kQgemmPanelPixels)); }
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

size_t qgemm_workspace_bytes(int64_t k, int threads) {
  return static_cast<size_t>(std::max(threads, 1)) * (packed_panel_bytes(k) + scratch_bytes(k));
}

void qgemm(QgemmIsa isa, const PackedQRows& w, const QPixels& b, int64_t pixels, const QRequant& y,
           int32_t* row_bias, void* workspace, int max_threads) {
  if (pixels <= 0 || w.m == 0) return;
  ThreadPool& pool = ThreadPool::instance();
  if (isa == QgemmIsa::Reference) {
    pool.parallel_ranges(w.m, [&](int64_t r0, int64_t r1, int) { qgemm_reference(w, b, r0, r1, 0, pixels, y); },
                         max_threads);
    return;
  }
#if defined(__x86_64__)
  for (int64_t r = 0; r < w.m; ++r)
    row_bias[r] = wrap_to_int32(static_cast<int64_t>(y.bias ? y.bias[r] : 0) -
                                static_cast<int64_t>(b.zero_point) * w.sums()[r]);
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
        qgemm_pack_pixels_avx512(b, w.k, p0, count, packed + packed_panel_bytes(w.k), packed);
        qgemm_panel_12x32_avx512vnni(w, part * row_panels / row_parts, (part + 1) * row_panels / row_parts, packed,
                                     p0, count, row_bias, y);
      },
      max_threads);
#else
  (void)row_bias, (void)workspace;
#endif
}

}  // namespace edgert::cpu::gemm
