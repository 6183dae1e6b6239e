// Quantized GEMM in NCHW form, u8 activations x s8 weights -> s32 accumulators requantised to
// u8, for the INT8 convolutions (QLinearConv) on images that stay NCHW:
//   acc(m, p) = bias[m] + sum_k W(m, k) (B(k, p) - b_zero_point)
//   Y(m, p)   = clamp(round_half_even(float(acc) * multiplier[m]) + y_zero_point, 0, 255)
// Output channels are the rows (m), pixels the columns (p): an NCHW output plane is a row of Y,
// and B is the image itself (1x1 convolution) or its im2col expansion, never materialised whole.
// Weights are symmetric (zero point 0), packed once (prepare) with their row sums, so the
// activation zero point costs one multiply per row: sum (b - zb) w = sum b w - zb sum w.
// Rounding is the reference QLinearConv's (saturate_round, nn_common.h): the u8 results of every
// family are bit-exact with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgert::cpu::gemm {

// The kernel families: the portable scalar one (what the tests hold the others to), the
// AVX-512 VNNI 12x32 tile, the AVX2 12x3 tile (x86-64-v3), and on aarch64 the ARMv8.0 NEON 12x8
// tile and the 12x8 tile of the dot product extension (ARMv8.2 sdot).
enum class QgemmIsa { Reference, Avx512Vnni, Avx2, Neon, NeonDot };
// Whether `isa` can run on this CPU (checked at run time, not at compile time; false for the
// families of the other architecture).
bool qgemm_isa_available(QgemmIsa isa);

// Rows of W per packed panel and per tile of every family: the VNNI tile's 12 x 2 accumulators,
// 2 activation vectors and the broadcast weights (memory operands of vpdpbusd) fill the 32 zmm.
constexpr int64_t kQgemmPanelRows = 12;
// Pixels per packed activation panel (one task of qgemm) and per VNNI tile: two 16-lane vectors.
// The narrower tiles of the other families run across the panel.
constexpr int64_t kQgemmPanelPixels = 32;
// The largest K for which no sum can leave int32: |b - zb| <= 255, |w| <= 128, and 255 * 128 *
// 65536 < 2^31. Larger K is refused by pack_qrows.
constexpr int64_t kQgemmMaxDepth = 65536;

// W [m, k] packed. For each panel of 12 rows: ceil(k / 4) groups of 12 x 4 bytes, group g
// holding W(r, 4g .. 4g + 3) at bytes [4 (r % 12), 4 (r % 12) + 4); rows past m and depths past
// k are zero, so a tile may multiply them with any activation byte.
// Either array may instead be borrowed from the engine's stored state (prepared_state.h: the
// mapping outlives the kernel state), `data` or `row_sums` then staying empty.
struct PackedQRows {
  std::vector<int8_t> data;
  std::vector<int32_t> row_sums;  // sum_k W(r, k), one per row
  const int8_t* stored = nullptr;
  const int32_t* stored_sums = nullptr;
  int64_t m = 0, k = 0;
  int64_t groups() const { return (k + 3) / 4; }
  int64_t panels() const { return (m + kQgemmPanelRows - 1) / kQgemmPanelRows; }
  int64_t panel_bytes() const { return groups() * 4 * kQgemmPanelRows; }
  const int8_t* values() const { return stored ? stored : data.data(); }
  const int32_t* sums() const { return stored_sums ? stored_sums : row_sums.data(); }
  const int8_t* panel(int64_t index) const { return values() + index * panel_bytes(); }
  // W(r, k) read back from the packing (what the reference kernel multiplies).
  int8_t at(int64_t r, int64_t p) const {
    return values()[(r / kQgemmPanelRows) * panel_bytes() + (p / 4) * 4 * kQgemmPanelRows + (r % kQgemmPanelRows) * 4 +
                    p % 4];
  }
  size_t state_bytes() const { return data.capacity() + row_sums.capacity() * sizeof(int32_t); }
};
// Packs W(r, p) = src[r * k + p] for r < m, p < k (a convolution's [M, C/group, kh, kw] weights
// of one group). The source is not referenced afterwards, nor read at all when the current
// prepare has the packing stored (prepared_state.h; recorded when it exports). False (and `out`
// left empty) when k > kQgemmMaxDepth or a size is negative.
bool pack_qrows(const int8_t* src, int64_t m, int64_t k, PackedQRows& out);
// The stored packing of an m x k W when the current prepare has it (prepared_state.h): true and
// `out` borrowing it; else false, and the caller packs (pack_qrows) from W.
bool take_stored_qrows(int64_t m, int64_t k, PackedQRows& out);

// Where B(k, p) comes from, borrowed for one qgemm() call. Rows: B(k, p) = data[k * row_stride +
// p] (a 1x1 stride-1 convolution: the image's channel planes). Im2col: k = (c, ky, kx) over the
// kernel window of output pixel p (rows of out_w pixels), padding read as zero_point.
struct QPixels {
  enum class Kind { Rows, Im2col };
  Kind kind = Kind::Rows;
  const uint8_t* data = nullptr;
  int32_t zero_point = 0;  // 0 to 255
  int64_t row_stride = 0;  // Rows
  int64_t in_h = 1, in_w = 1, out_w = 1, kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;  // Im2col
  int64_t dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
  // B(k, p) one element at a time (the reference's and the packing's tails).
  uint8_t at(int64_t k, int64_t p) const;
};

// Where Y goes and how it is requantised; pointers borrowed for one qgemm() call. bias and
// multiplier have one entry per row (bias null: none); Y(m, p) at data[m * row_stride + p].
struct QRequant {
  uint8_t* data = nullptr;
  int64_t row_stride = 0;
  const int32_t* bias = nullptr;  // added as s32, wrapping (the row sums' term included by qgemm)
  const float* multiplier = nullptr;
  int32_t zero_point = 0;
};

// Workspace qgemm needs for `threads` threads and B of depth k (bytes, 64-byte aligned start),
// for whichever family runs (sized for the largest packing, 16-bit activations).
size_t qgemm_workspace_bytes(int64_t k, int threads);

// Y = requant(W B) for `pixels` columns, with `isa`'s kernel (which must be available), using up
// to `max_threads` of the plugin's thread pool. `row_bias` (one s32 per row) is workspace the
// caller owns, written here with bias - zb * row_sums. Does not allocate.
void qgemm(QgemmIsa isa, const PackedQRows& w, const QPixels& b, int64_t pixels, const QRequant& y,
           int32_t* row_bias, void* workspace, int max_threads);

// Rows [r_begin, r_end) and pixels [p_begin, p_end) by the formulas of this header, one element
// at a time: the reference every other family must match bit for bit.
void qgemm_reference(const PackedQRows& w, const QPixels& b, int64_t r_begin, int64_t r_end, int64_t p_begin,
                     int64_t p_end, const QRequant& y);

// The requantisation of one accumulator, as the reference QLinearConv rounds it.
uint8_t requantize(int32_t acc, float multiplier, int32_t zero_point);

// Rows [0, k) of B for the pixels [p0, p0 + count) of one panel (count <= 32): row r at data +
// r * stride, its first `count` bytes valid. The image's own rows (Rows; data borrowed from B),
// or the im2col rows written to `scratch` (k x 32 bytes, stride 32) by the portable im2col that
// the AVX2 and NEON packings share.
struct QPixelRows {
  const uint8_t* data = nullptr;
  int64_t stride = 0;
};
QPixelRows qgemm_pixel_rows(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch);

// Each family below: a packing of B's pixels [p0, p0 + count) (count <= 32; `scratch`: k x 32
// bytes for the im2col rows) and the rows of panels [panel_begin, panel_end) of W times that
// packed panel, requantised into Y, with `row_bias` already holding bias - (zb - offset) *
// row_sums, where offset is what the family's packing subtracts from every activation (128 for
// the dot product family, 0 for the others).
#if defined(__x86_64__)
// B's pixels [p0, p0 + count) (count <= 32) packed as groups of 4 k: [ceil(k / 4)][32][4] bytes,
// past k and count zero. `scratch`: k x 32 bytes for the im2col rows.
void qgemm_pack_pixels_avx512(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                              uint8_t* packed);
// Rows of panels [panel_begin, panel_end) of W times a packed pixel panel (count <= 32 pixels
// from p0), requantised into Y. `row_bias` already holds bias - zb * row_sums.
void qgemm_panel_12x32_avx512vnni(const PackedQRows& w, int64_t panel_begin, int64_t panel_end,
                                  const uint8_t* packed, int64_t p0, int64_t count, const int32_t* row_bias,
                                  const QRequant& y);
// AVX2 (with FMA: x86-64-v3): pixels as 16-bit values, [ceil(k / 4)][32][4] int16, past k and
// count zero.
void qgemm_pack_pixels_avx2(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                            uint8_t* packed);
// 12-row x 3-pixel tiles across the panel: vpmaddwd of the weights widened to 16 bits.
void qgemm_panel_12x3_avx2(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed,
                           int64_t p0, int64_t count, const int32_t* row_bias, const QRequant& y);
#endif
#if defined(__aarch64__)
// ARMv8.0 NEON: pixels as 16-bit values, [4 ceil(k / 4)][32] int16, past k and count zero.
void qgemm_pack_pixels_neon(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                            uint8_t* packed);
// 12-row x 8-pixel tiles across the panel: 16-bit multiply-accumulates by weight lane.
void qgemm_panel_12x8_neon(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed,
                           int64_t p0, int64_t count, const int32_t* row_bias, const QRequant& y);
// Dot product extension: pixels as b - 128 in s8 (b XOR 0x80), [ceil(k / 4)][32][4] bytes.
void qgemm_pack_pixels_dotprod(const QPixels& b, int64_t k, int64_t p0, int64_t count, uint8_t* scratch,
                               uint8_t* packed);
// 12-row x 8-pixel tiles across the panel: sdot by weight lane. Compiled for ARMv8.2 dotprod;
// call only where qgemm_isa_available(QgemmIsa::NeonDot).
void qgemm_panel_12x8_dotprod(const PackedQRows& w, int64_t panel_begin, int64_t panel_end, const uint8_t* packed,
                              int64_t p0, int64_t count, const int32_t* row_bias, const QRequant& y);
#endif

}  // namespace edgert::cpu::gemm
