// Quantized GEMV for INT8 1x1 convolutions on a few pixels (squeeze-and-excitation convolutions
// run on 1x1 images): y(m) = requant(bias[m] + sum_k W(m, k) (x(k) - x_zero_point)), one pixel at
// a time. Output channels lie in the lanes (16 per vector) and 4 k per vpdpbusd, with x's 4 bytes
// broadcast: the qgemm tile would fill 1 of its 16 pixel lanes. Sums and requantisation are
// qgemm's (gemm/qgemm.h): bit-exact with the reference QLinearConv.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgert::cpu::gemm {

// Output channels per packed panel and per vector.
constexpr int64_t kQgemvPanelRows = 16;

// W [m, k] packed: for each panel of 16 rows, ceil(k / 4) groups of 16 x 4 bytes (row r's
// W(r, 4g .. 4g + 3) at bytes [4 r, 4 r + 4)), zero past m and k. The panels may be borrowed
// from the engine's stored state (prepared_state.h), `data` then staying empty.
struct PackedQColumns {
  std::vector<int8_t> data;
  const int8_t* stored = nullptr;
  std::vector<int32_t> row_sums;  // sum_k W(r, k), from the panels
  int64_t m = 0, k = 0;
  int64_t groups() const { return (k + 3) / 4; }
  int64_t panels() const { return (m + kQgemvPanelRows - 1) / kQgemvPanelRows; }
  int64_t panel_bytes() const { return groups() * 4 * kQgemvPanelRows; }
  const int8_t* values() const { return stored ? stored : data.data(); }
  size_t state_bytes() const { return data.capacity() + row_sums.capacity() * sizeof(int32_t); }
};
// Packs W(r, p) = src[r * k + p] (not referenced afterwards, nor read when the current prepare
// has the packing stored; recorded when it exports). False when k > 65536 (int32 sums) or a size
// is negative.
bool pack_qcolumns(const int8_t* src, int64_t m, int64_t k, PackedQColumns& out);

#if defined(__x86_64__)
// Whether this CPU runs the VNNI GEMV (avx512 bw, vl and vnni).
bool qgemv_available();
// Panels [panel_begin, panel_end) for one pixel: x(k) at x[k * x_stride], y(m) at y[m *
// y_stride]. `row_bias`: bias - x_zero_point * row_sums, one per row; `multiplier` one per row.
// `x4` is scratch of 4 ceil(k / 4) bytes (x gathered, padded with the zero point).
void qgemv_avx512vnni(const PackedQColumns& w, int64_t panel_begin, int64_t panel_end, const uint8_t* x,
                      int64_t x_stride, int32_t x_zero_point, const int32_t* row_bias, const float* multiplier,
                      int32_t y_zero_point, uint8_t* y, int64_t y_stride, uint8_t* x4);
#endif

}  // namespace edgert::cpu::gemm
