// Quantized GEMM, u8 activations x s8 weights -> s32 accumulators, for INT8 convolutions and
// MatMuls (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger):
//   acc(i, j) = bias[j] + sum_p (A(i, p) - a_zero_point) * W(j, p)
// then written as s32, as float (acc * scale[j], clamped) or requantised to u8
// (round-half-even(acc * scale[j]) + zero_point, clamped to [q_min, q_max]).
// Weights are symmetric (zero point 0), per output channel scaled. They are packed once, in
// prepare, into the layout vpdpbusd reads (4 consecutive k values of one channel in each 32-bit
// lane) with their column sums, so the activation zero point costs one multiply per column
// instead of a pass over A: sum (a - za) w = sum a w - za sum w.
// Activations are read where they lie (rows of K bytes, no packing), output channels are the
// columns of the output: the layout of an NHWC 1x1 convolution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace edgert::cpu::gemm {

// The kernel families: the portable scalar one (the reference the tests hold the others to, and
// what runs where no other can) and the AVX-512 VNNI 12x32 tile.
enum class QgemmIsa { Reference, Avx512Vnni };
// Whether `isa` can run on this CPU (checked at run time, not at compile time).
bool qgemm_isa_available(QgemmIsa isa);
// The fastest family this CPU runs, fixed at first use.
QgemmIsa qgemm_best_isa();

// Output channels per packed weight panel (the VNNI tile's width: two 16-lane vectors).
constexpr int64_t kQgemmPanelColumns = 32;
// Rows of A per VNNI tile: 12 x 2 accumulators, 2 weight vectors and a broadcast in 32 zmm.
constexpr int64_t kQgemmTileRows = 12;
// The largest K for which no sum can leave int32: |a - za| <= 255, |w| <= 128, and 255 * 128 *
// 65536 < 2^31. Larger K is refused by pack_qweights.
constexpr int64_t kQgemmMaxDepth = 65536;

// W [n, k] packed. For each panel of 32 output channels: ceil(k / 4) groups of 32 x 4 bytes,
// group g holding W(j, 4g .. 4g + 3) at bytes [4 (j % 32), 4 (j % 32) + 4); channels past n and
// depths past k are zero, so a tile may multiply them with any activation byte.
struct PackedQWeights {
  std::vector<int8_t> data;
  std::vector<int32_t> column_sums;  // sum_p W(j, p), n rounded up to 32 entries, zero past n
  int64_t n = 0, k = 0;
  int64_t groups() const { return (k + 3) / 4; }
  int64_t panel_bytes() const { return groups() * 4 * kQgemmPanelColumns; }
  // W(j, p) read back from the packing (what the reference kernel multiplies).
  int8_t at(int64_t j, int64_t p) const {
    const int64_t panel = j / kQgemmPanelColumns, column = j % kQgemmPanelColumns;
    return data[static_cast<size_t>(panel * panel_bytes() + (p / 4) * 4 * kQgemmPanelColumns + column * 4 + p % 4)];
  }
};
// Packs W(j, p) = src[j * n_stride + p * k_stride] for j < n, p < k: [N, K] weights have strides
// (k, 1), [K, N] ones (1, n). The source is not referenced afterwards. False (and `out` left
// empty) when k > kQgemmMaxDepth or a size is negative.
bool pack_qweights(const int8_t* src, int64_t n, int64_t k, int64_t n_stride, int64_t k_stride, PackedQWeights& out);

// A(i, p) = data[i * row_stride + p], borrowed for one qgemm() call. Rows are read exactly to
// their k-th byte (the tail of a row whose K is not a multiple of 4 is not over-read).
struct QActivations {
  const uint8_t* data = nullptr;
  int64_t row_stride = 0;
  int32_t zero_point = 0;  // 0 to 255
};

// Where and how acc(i, j) is written: data + (i * row_stride + j) elements of the kind's type.
// Pointers are borrowed for one qgemm() call; scale and bias have n entries.
struct QOutput {
  enum class Kind { Int32, Float32, Uint8 };
  Kind kind = Kind::Int32;
  void* data = nullptr;
  int64_t row_stride = 0;
  const int32_t* bias = nullptr;  // added to every accumulator of channel j (null: none), wrapping as s32
  // Float32 and Uint8: per channel, a_scale * w_scale[j] for float output, a_scale * w_scale[j]
  // / y_scale for u8 (null for Int32).
  const float* scale = nullptr;
  // Float32: the result clamped to [f_min, f_max] (ReLU: f_min = 0).
  float f_min = -std::numeric_limits<float>::infinity(), f_max = std::numeric_limits<float>::infinity();
  // Uint8: y = clamp(round_half_even(acc * scale[j]) + zero_point, q_min, q_max), 0 <= q_min <=
  // q_max <= 255 (ReLU folded as q_min = zero_point).
  int32_t zero_point = 0;
  int32_t q_min = 0, q_max = 255;
};

// Y = output(A W^T) for A with m rows, with `isa`'s kernel (which must be available), using up
// to `max_threads` of the plugin's thread pool. Does not allocate.
void qgemm(QgemmIsa isa, const PackedQWeights& w, const QActivations& a, int64_t m, const QOutput& y,
           int max_threads);

// Rows [i_begin, i_end) of Y by the scalar formulas of this header, one element at a time: the
// reference every other kernel must match bit for bit.
void qgemm_rows_reference(const PackedQWeights& w, const QActivations& a, int64_t i_begin, int64_t i_end,
                          const QOutput& y);

#if defined(__x86_64__)
// Rows [i0, i0 + rows) (rows <= 12) and columns [j0, j0 + cols) (cols <= 32, j0 a multiple of
// 32) of Y with vpdpbusd: one tile of qgemm's Avx512Vnni family.
void qgemm_u8s8_12x32_avx512vnni(const PackedQWeights& w, const QActivations& a, int64_t i0, int64_t rows,
                                  int64_t j0, int64_t cols, const QOutput& y);
#endif

}  // namespace edgert::cpu::gemm
