#include "gemm/qgemv.h"

#include "prepared_state.h"

namespace edgert::cpu::gemm {

bool pack_qcolumns(const int8_t* src, int64_t m, int64_t k, PackedQColumns& out) {
  out.data.clear();
  out.row_sums.clear();
  out.stored = nullptr;
  out.m = out.k = 0;
  if (m < 0 || k < 0 || k > 65536) return false;
  out.m = m;
  out.k = k;
  const size_t bytes = static_cast<size_t>(out.panels() * out.panel_bytes());  // a multiple of 64
  const prepared::Key key{prepared::kQgemvColumns, m, k, kQgemvPanelRows, 0};
  out.stored = static_cast<const int8_t*>(prepared::take_bytes(key, bytes));
  if (!out.stored) {
    out.data.assign(bytes, 0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t p = 0; p < k; ++p)
        out.data[static_cast<size_t>((r / kQgemvPanelRows) * out.panel_bytes() + (p / 4) * 4 * kQgemvPanelRows +
                                     (r % kQgemvPanelRows) * 4 + p % 4)] = src[r * k + p];
    prepared::record_bytes(key, out.data.data(), bytes);
  }
  const int8_t* w = out.values();
  out.row_sums.assign(static_cast<size_t>(m), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t p = 0; p < k; ++p)
      out.row_sums[static_cast<size_t>(r)] += w[(r / kQgemvPanelRows) * out.panel_bytes() +
                                                (p / 4) * 4 * kQgemvPanelRows + (r % kQgemvPanelRows) * 4 + p % 4];
  return true;
}

}  // namespace edgert::cpu::gemm
