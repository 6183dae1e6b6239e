// Packing, the scalar reference and the blocking loops of qgemm.h; the VNNI tile is in
// x86/qgemm_avx512vnni.cpp.
#include "gemm/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "thread_pool.h"

namespace edgert::cpu::gemm {

namespace {

// Rows of A per block: the block's rows (12 KB of A at K 128) stay in L1/L2 while every weight
// panel passes over them, and each panel (4 KB at K 128) stays in L1 while the block's tiles use it.
constexpr int64_t kRowBlock = 8 * kQgemmTileRows;

int32_t wrap_to_int32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

}  // namespace

bool qgemm_isa_available(QgemmIsa isa) {
  switch (isa) {
    case QgemmIsa::Reference: return true;
    case QgemmIsa::Avx512Vnni:
#if defined(__x86_64__)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
#else
      return false;
#endif
  }
  return false;
}

QgemmIsa qgemm_best_isa() {
  static const QgemmIsa isa =
      qgemm_isa_available(QgemmIsa::Avx512Vnni) ? QgemmIsa::Avx512Vnni : QgemmIsa::Reference;
  return isa;
}

bool pack_qweights(const int8_t* src, int64_t n, int64_t k, int64_t n_stride, int64_t k_stride, PackedQWeights& out) {
  out.data.clear();
  out.column_sums.clear();
  out.n = out.k = 0;
  if (n < 0 || k < 0 || k > kQgemmMaxDepth) return false;
  out.n = n;
  out.k = k;
  const int64_t panels = (n + kQgemmPanelColumns - 1) / kQgemmPanelColumns;
  out.data.assign(static_cast<size_t>(panels * out.panel_bytes()), 0);
  out.column_sums.assign(static_cast<size_t>(panels * kQgemmPanelColumns), 0);
  for (int64_t j = 0; j < n; ++j) {
    int8_t* column = out.data.data() + (j / kQgemmPanelColumns) * out.panel_bytes() + (j % kQgemmPanelColumns) * 4;
    int32_t sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      const int8_t v = src[j * n_stride + p * k_stride];
      column[(p / 4) * 4 * kQgemmPanelColumns + p % 4] = v;
      sum += v;
    }
    out.column_sums[static_cast<size_t>(j)] = sum;
  }
  return true;
}

void qgemm_rows_reference(const PackedQWeights& w, const QActivations& a, int64_t i_begin, int64_t i_end,
                          const QOutput& y) {
  for (int64_t i = i_begin; i < i_end; ++i) {
    const uint8_t* row = a.data + i * a.row_stride;
    for (int64_t j = 0; j < w.n; ++j) {
      int64_t sum = y.bias ? y.bias[j] : 0;
      for (int64_t p = 0; p < w.k; ++p) sum += (static_cast<int64_t>(row[p]) - a.zero_point) * w.at(j, p);
      // Modulo 2^32, as the vector kernels' wrapping adds (only a bias near the int32 limits
      // can make the sum leave int32).
      const int32_t acc = wrap_to_int32(sum);
      const int64_t at = i * y.row_stride + j;
      switch (y.kind) {
        case QOutput::Kind::Int32: static_cast<int32_t*>(y.data)[at] = acc; break;
        case QOutput::Kind::Float32: {
          float v = static_cast<float>(acc) * y.scale[j];
          v = std::min(std::max(v, y.f_min), y.f_max);
          static_cast<float*>(y.data)[at] = v;
          break;
        }
        case QOutput::Kind::Uint8: {
          // Clamping before rounding, to bounds that are whole numbers, gives the same result as
          // after it, and keeps the float within int32 for the conversion.
          float v = static_cast<float>(acc) * y.scale[j];
          v = std::min(std::max(v, static_cast<float>(y.q_min - y.zero_point)), static_cast<float>(y.q_max - y.zero_point));
          static_cast<uint8_t*>(y.data)[at] = static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(v)) + y.zero_point);
          break;
        }
      }
    }
  }
}

void qgemm(QgemmIsa isa, const PackedQWeights& w, const QActivations& a, int64_t m, const QOutput& y,
           int max_threads) {
  if (m <= 0 || w.n == 0) return;
  ThreadPool& pool = ThreadPool::instance();
  if (isa == QgemmIsa::Reference) {
    pool.parallel_ranges(m, [&](int64_t i0, int64_t i1, int) { qgemm_rows_reference(w, a, i0, i1, y); }, max_threads);
    return;
  }
#if defined(__x86_64__)
  const int64_t panels = (w.n + kQgemmPanelColumns - 1) / kQgemmPanelColumns;
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  // Row blocks split over the threads, or, with fewer blocks than threads (a 7x7 image has 49
  // rows), weight panels: each task then reads all of A, which is small.
  const int64_t threads = std::max(1, std::min(pool.num_threads(), max_threads));
  const bool split_panels = blocks < threads && panels > 1;
  const auto run_block = [&](int64_t block, int64_t panel_begin, int64_t panel_end) {
    const int64_t i_begin = block * kRowBlock, i_end = std::min(m, i_begin + kRowBlock);
    for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
      const int64_t j0 = panel * kQgemmPanelColumns, cols = std::min(kQgemmPanelColumns, w.n - j0);
      for (int64_t i0 = i_begin; i0 < i_end; i0 += kQgemmTileRows)
        qgemm_u8s8_12x32_avx512vnni(w, a, i0, std::min(kQgemmTileRows, i_end - i0), j0, cols, y);
    }
  };
  if (split_panels) {
    pool.parallel_ranges(
        panels,
        [&](int64_t p0, int64_t p1, int) {
          for (int64_t block = 0; block < blocks; ++block) run_block(block, p0, p1);
        },
        max_threads);
  } else {
    pool.parallel_ranges(
        blocks,
        [&](int64_t b0, int64_t b1, int) {
          for (int64_t block = b0; block < b1; ++block) run_block(block, 0, panels);
        },
        max_threads);
  }
#endif
}

}  // namespace edgert::cpu::gemm
