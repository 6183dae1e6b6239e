// Packed float32 GEMM for the optimized tactics of Conv, FusedConv and Winograd:
//   Y(i, j) = act(alpha * sum_p A(i, p) B(p, j) + bias_row[i] + bias_col[j] + beta * Z(i, j))
// A (the weights) is packed once, in prepare, into panels of tile_rows() rows; B (the
// activations) is packed at run time, block by block, into panels of tile_cols() columns,
// straight from its source (a strided matrix or, for convolutions, the image itself: im2col
// happens inside the packing, so no im2col buffer exists). A register-blocked micro-kernel
// (AVX-512, AVX2+FMA, NEON or portable C++, as the tactic names) multiplies the panels; the
// epilogue runs on each row strip while it is in L1. Work is split over the plugin's ThreadPool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "activation.h"

namespace edgert::cpu::gemm {

// The micro-kernel families: tile 6x16 for Portable, Avx2Fma and Neon, 8x32 for Avx512, and
// 48x7 for Avx512Tall and 48x8 for Avx512Tall8 (AVX-512 with A's rows in the vector lanes, for
// B with few columns: 1x1 and 3x3 convolutions on 7x7 and 14x14 images, whose 49 and 196
// columns are whole 7-column panels, and Winograd on a 7x7 image, 16 tiles). Avx512Bf16: the
// 8x32 tile with bfloat16 products (vdpbf16ps, float32 sums): A and B rounded to bfloat16 as
// they are packed, in pairs of k (bf16_pairs.h); only where a convolution is allowed
// bfloat16 (--bf16), never the float32 default. NeonFp16 likewise with float16 (--fp16 on
// Armv8.2 cores with half-precision arithmetic): an 8x16 tile of FMLA on 8 halves, its sums in
// float16 for at most 128 k at a time, then added into float32 C.
enum class Isa { Portable, Avx2Fma, Neon, Avx512, Avx512Tall, Avx512Tall8, Avx512Bf16, NeonFp16 };
// Whether the family keeps A's rows in the lanes (and packs A as one k block).
inline bool is_tall(Isa isa) { return isa == Isa::Avx512Tall || isa == Isa::Avx512Tall8; }
// The fastest family this CPU runs, fixed at first use from its features.
Isa best_isa();
// Whether `isa` can run on this CPU (tests run each one that can).
bool isa_available(Isa isa);
int tile_rows(Isa isa);
int tile_cols(Isa isa);

// std::vector's allocator, except that resize() leaves floats uninitialized: packing writes
// every value, and zeroing first was a second pass over tens of megabytes of weights (resnet18
// packs 90 MB, at every engine load and twice in a build).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}
  template <typename U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// A [m, k] in micro-panels for one ISA's tile. Owns its storage, or borrows the same layout
// stored in the engine (prepared_state.h); the source is not referenced after packing.
// Avx512Bf16 keeps two bfloat16 of consecutive k in each 32-bit slot (bf16_pairs.h): a k block
// of kc values takes ceil(kc / 2) slots a row; NeonFp16 one float16 per value, a panel's 8 rows
// of one k in 4 slots.
struct PackedA {
  std::vector<float, UninitializedAllocator<float>> data;
  const float* stored = nullptr;  // borrowed from the engine's mapping; `data` then stays empty
  int64_t m = 0, k = 0, kc = 1;   // kc: rows of K per block
  Isa isa = Isa::Portable;
  const float* values() const { return stored ? stored : data.data(); }
};
// Bytes `a` holds (what a kernel keeping it reports as its state): none when borrowed.
inline size_t state_bytes(const PackedA& a) { return a.data.capacity() * sizeof(float); }
// Packs A(i, p) = src[i * row_stride + p * col_stride] for `isa`'s micro-kernel, K in cache-sized
// blocks, or in one block when an Epilogue's addend may alias the output (see Epilogue).
void pack_a(Isa isa, const float* src, int64_t m, int64_t k, int64_t row_stride, int64_t col_stride, PackedA& out,
            bool one_k_block = false);
// The same in steps, for an A made a few rows and columns at a time (Winograd's transformed
// filters), without a copy of the whole A first: sizes `out` for an m x k A (rows past m zero,
// the others left for pack_a_panel to write, every one of them; when the engine holds this A
// already, out.stored is set and there is nothing to write), then places
// columns [k_begin, k_end) of the rows of one panel (tile_rows(isa) rows from panel *
// tile_rows), A(i, p) = src[(i - panel * tile_rows) * row_stride + (p - k_begin) * col_stride].
// The reduced families (Avx512Bf16, NeonFp16) pack whole rows only (k_begin 0, k_end k), as
// pack_a does.
void pack_a_begin(Isa isa, int64_t m, int64_t k, PackedA& out, bool one_k_block = false);
// The layout pack_a gives an m x k A (sizes, k blocking) without storage or packing: for sizing
// sgemm's workspace where A is an activation, packed at each run (nothing to store in an engine).
PackedA packed_a_layout(Isa isa, int64_t m, int64_t k);
void pack_a_panel(PackedA& out, int64_t panel, const float* src, int64_t row_stride, int64_t col_stride,
                  int64_t k_begin, int64_t k_end);

// Where B [k, n] comes from. Pointers are borrowed for the duration of one sgemm() call.
struct BSource {
  enum class Kind { Strided, Im2col };
  Kind kind = Kind::Strided;
  const float* data = nullptr;
  // Strided: B(p, j) = data[p * row_stride + j * col_stride], times row_scale[p] when set (a
  // FusedConv's channel scale: squeeze-and-excitation's multiply, done while packing).
  int64_t row_stride = 0, col_stride = 1;
  const float* row_scale = nullptr;
  // Strided with unit column stride and no row_scale only: the AVX-512 8x32 tile reads B's whole
  // panels where they lie instead of packing them (tactic f32-conv-1x1-gemm-8x32-inplace-avx512).
  // For few rows of K over many columns (a 1x1 convolution with 16-32 input channels on a large
  // image) the copy cost about what the products did; with many rows, packing wins.
  bool in_place = false;
  // Im2col of one image and one group of a 2-D convolution (data = the group's first input
  // channel, planes of in_h x in_w): p = (c, ky, kx), j = (oy, ox); outside the image reads 0.
  int64_t in_h = 0, in_w = 0, out_w = 0, kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
};

// Where Y(i, j) goes: data[i * row_stride + j * col_stride].
struct Output {
  float* data = nullptr;
  int64_t row_stride = 0, col_stride = 1;
};

// Applied to every output element once its sum is complete, in the order of the formula (the
// order of the unfused graph, so fused and unfused results match bit for bit); null pointers
// are skipped. The addend may alias Output exactly (the in-place residual of FusedConv) only
// with beta 1, unit column strides and A packed as one k block: partial sums of earlier k
// blocks would overwrite it otherwise.
struct Epilogue {
  float alpha = 1.0f;
  const float* bias_row = nullptr;
  const float* bias_col = nullptr;
  const float* addend = nullptr;
  int64_t addend_row_stride = 0, addend_col_stride = 0;
  float beta = 1.0f;
  Activation activation;
};

// Scratch one sgemm() needs with up to `threads` threads, for an A packed with k blocks of
// `kc` rows (PackedA::kc; 0 for the default blocking). 64-byte aligned by the runtime.
size_t workspace_bytes(int threads, int64_t kc = 0);
// The same for sgemm(a, ..., n, ...) in particular: with B's width known it includes room for
// B packed once, for all threads, where otherwise every row task would pack the same columns
// (see sgemm).
size_t workspace_bytes(int threads, const PackedA& a, int64_t n);

// Y = epilogue(A B) for B with n columns, with the micro-kernel A was packed for; uses up to
// `max_threads` of the pool (the count the workspace was sized for). Does not allocate.
// Threads split B's columns when there are enough, else A's rows; in that case, when the
// workspace was sized by workspace_bytes(threads, a, n), B is packed once by all threads
// before the products instead of once per row task (for a 3x3 conv on a 7x7 image, im2col
// repeated in every task cost more than the second thread gained).
void sgemm(const PackedA& a, const BSource& b, int64_t n, const Output& y, const Epilogue& epilogue,
           void* workspace, int max_threads);

// y[0..n) = act(y[0..n)) with the float formulas of activation.h (vectorizable where exact;
// Sigmoid, SiLU and Tanh use a float exp accurate to a few ulp).
void apply_activation(float* y, int64_t n, const Activation& activation);
// y[0..n) = exp(y[0..n)), with the float exp of the activations (a few ulp, vectorized).
void exp_rows(float* y, int64_t n);

}  // namespace edgert::cpu::gemm
