#include "gemm/gemv.h"

#include <cstddef>

namespace edgert::cpu::gemm {

void pack_panels(const float* src, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride, PackedPanels& out) {
  const int64_t panels = (n + kGemvPanel - 1) / kGemvPanel;
  out.k = k;
  out.n = n;
  out.data.assign(static_cast<size_t>(panels * k * kGemvPanel), 0.0f);
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
