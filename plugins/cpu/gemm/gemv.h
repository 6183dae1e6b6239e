// Products with a constant right-hand matrix and few left-hand rows (the classifier heads of
// edge models: Gemm / FusedGemm with batch 1): the weights W' [K, N] are packed once into
// column panels of kGemvPanel, then each row of X streams them once, panels spread over the
// thread pool. Compiled portably, for AVX2+FMA (x86/gemv_x86.cpp) and AVX-512 (x86/gemv_avx512.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgert::cpu::gemm {

constexpr int64_t kGemvPanel = 16;

struct PackedPanels {
  std::vector<float> data;  // for each panel: k x kGemvPanel floats, columns past n zero
  const float* stored = nullptr;  // the same, borrowed from the engine (prepared_state.h); data empty
  int64_t k = 0, n = 0;
  const float* values() const { return stored ? stored : data.data(); }
  size_t state_bytes() const { return data.capacity() * sizeof(float); }
};
// Packs W'(p, j) = src[p * row_stride + j * col_stride].
void pack_panels(const float* src, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride, PackedPanels& out);

// out[j] = sum_p x[p * x_stride] * W'(p, j) for the columns of panels [panel_begin, panel_end)
// of W' (`panels` = PackedPanels::data, k rows); out has room for whole panels.
using GemvPanelsFn = void (*)(const float* x, int64_t x_stride, const float* panels, int64_t k, int64_t panel_begin,
                              int64_t panel_end, float* out);
void gemv_panels_portable(const float* x, int64_t x_stride, const float* panels, int64_t k, int64_t panel_begin,
                          int64_t panel_end, float* out);
#if defined(__x86_64__)
void gemv_panels_avx2(const float* x, int64_t x_stride, const float* panels, int64_t k, int64_t panel_begin,
                      int64_t panel_end, float* out);
void gemv_panels_avx512(const float* x, int64_t x_stride, const float* panels, int64_t k, int64_t panel_begin,
                        int64_t panel_end, float* out);
#endif

}  // namespace edgert::cpu::gemm
