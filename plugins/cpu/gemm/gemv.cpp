#include "gemm/gemv.h"

#include <cstddef>

#include "prepared_state.h"

namespace edgert::cpu::gemm {

void pack_panels(const float* src, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride, PackedPanels& out) {
  const int64_t panels = (n + kGemvPanel - 1) / kGemvPanel;
  out.k = k;
  out.n = n;
  const size_t floats = static_cast<size_t>(panels * k * kGemvPanel);
  const prepared::Key key{prepared::kGemvPanels, k, n, kGemvPanel, 0};
  out.stored = prepared::take(key, floats);
  if (out.stored) {
    out.data.clear();
    out.data.shrink_to_fit();
    return;
  }
  out.data.assign(floats, 0.0f);
  prepared::record(key, out.data.data(), floats);
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < kGemvPanel && q * kGemvPanel + j < n; ++j)
        out.data[static_cast<size_t>((q * k + p) * kGemvPanel + j)] =
            src[p * row_stride + (q * kGemvPanel + j) * col_stride];
}

#define EDGERT_GEMV_PANELS gemv_panels_portable
#include "gemm/gemv_panels.inc"
#undef EDGERT_GEMV_PANELS

}  // namespace edgert::cpu::gemm
