// What the two edgert.FusedAttention kernels share (fused_attention.cu: float32 on CUDA cores;
// fused_attention_f16.cu: float16 on tensor cores): the problem's shape, how a block's warps split
// it, loading tiles into shared memory, and merging the warps' partial softmaxes.
//
// Flash-style: a warp takes 16 queries of one batch matrix and walks the keys in tiles of 64,
// keeping for its queries the running maximum and sum of the softmax (the online softmax: a new
// maximum rescales what was summed so far) and the running output. A block's four warps split the
// keys among them where the sequence is long (four ways from 193 keys, two from 65) and take
// different queries where it is short (a 49-token window: four 16-query tiles over its one key
// tile), so short and long sequences alike keep every warp busy; the warps that split one query
// tile's keys merge their partial softmaxes at the end.
#pragma once

#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "activation.cuh"
#include "cuda_op.h"

namespace edgert::cuda {

constexpr int kAttentionWarps = 4;
constexpr int kQueryTile = 16;   // queries per warp (the tensor cores' tile height)
constexpr int kKeyTile = 64;     // keys per step of a warp
constexpr int kMaxBatchRank = 6;
constexpr int64_t kMaxHeadDim = 256;            // D and Dv
constexpr size_t kMaxSharedBytes = 160 * 1024;  // below every CUDA board's limit (Orin: 164 KiB)

// Offsets (in elements) of batch matrix `b` in Q, the keys, V, the mask and the output: the
// output's batch dims, last fastest, with each operand's strides (0 where it broadcasts).
struct BatchWalk {
  int rank = 0;
  int64_t dims[kMaxBatchRank] = {};
  int64_t q[kMaxBatchRank] = {}, k[kMaxBatchRank] = {}, v[kMaxBatchRank] = {}, mask[kMaxBatchRank] = {},
          y[kMaxBatchRank] = {};
};

struct AttentionShape {
  int64_t l, d, s, dv;         // Q [L, D], Kt [D, S], V [S, Dv]
  int64_t q_row, k_row, v_row, y_row;  // elements from one row of Q, the keys, V, the output to the next
  int dp, dvp;                 // D and Dv rounded up to 16 (the tensor cores' step)
  int64_t mask_row, mask_col;  // the mask's strides along L and S
  bool k_rows;                 // the keys as K [S, D] (else Kt [D, S])
  bool separate_values;        // float32: each warp's value tile has a place of its own
  float q_factor;              // Q's factor (q_scale / q_divisor)
  float score_factor;          // the scores' factor (score_scale / score_divisor)
};

// How a block's warps share the work: `key_splits` warps walk one query tile's keys, each its own
// share of the key tiles, and the block takes `row_tiles` such query tiles (warps = their product).
struct WarpSplit {
  int warps, key_splits, row_tiles;
};

__host__ __device__ inline WarpSplit split_warps(int warps, int64_t s) {
  const int64_t key_tiles = (s + kKeyTile - 1) / kKeyTile;
  int key_splits = 1;
  while (key_splits < warps && key_splits < key_tiles) key_splits *= 2;
  return {warps, key_splits, warps / key_splits};
}

// Where a block's batch matrix starts in Q, the keys, V, the mask and the output (elements).
struct BatchOffsets {
  int64_t q, k, v, mask, y;
};

__device__ inline BatchOffsets batch_offsets(const BatchWalk& walk, int b) {
  // 32-bit: the launch has fewer than 2^31 blocks, so fewer batch matrices (attention_blocks).
  BatchOffsets o{0, 0, 0, 0, 0};
  for (int d = walk.rank - 1, rest = b; d >= 0; --d) {
    const int extent = static_cast<int>(walk.dims[d]), i = rest % extent;
    rest /= extent;
    o.q += i * walk.q[d];
    o.k += i * walk.k[d];
    o.v += i * walk.v[d];
    o.mask += i * walk.mask[d];
    o.y += i * walk.y[d];
  }
  return o;
}

// The float32 kernel's exponentials as the reference's (expf); the float16 kernel's probabilities
// round to float16, far coarser than __expf's few ulp.
template <typename T>
__device__ __forceinline__ float exp_of(float x) {
  if constexpr (std::is_same_v<T, float>) return expf(x);
  else return __expf(x);
}

// Copies rows x cols of `src` (row stride `stride`; `valid_rows` x `valid_cols` of them real)
// into shared `dst` (row stride `dst_stride`) as T, zeros outside, times `factor`; `lanes`
// threads in all starting at `first`. Each thread issues kLoadBatch loads before it stores any:
// a tile is latency-bound otherwise, one global round trip per element.
constexpr int kLoadBatch = 16;

// 16-byte loads (8 halves a lane a load) where the real columns are a whole number of loads and
// 16-byte aligned: a 64 x 64 tile is 16 loads a lane, one batch.
__device__ inline bool loads_in_chunks(const void* src, int64_t stride, int cols, int64_t valid_cols, int dst_stride) {
  const int64_t real_cols = valid_cols < cols ? valid_cols : cols;
  return cols % 8 == 0 && stride % 8 == 0 && real_cols % 8 == 0 && dst_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(src) % 16 == 0;
}

__device__ inline void load_tile_chunks(const __half* __restrict__ src, int64_t stride, int rows, int cols,
                                        int64_t valid_rows, int64_t valid_cols, __half* dst, int dst_stride,
                                        float factor, int first, int lanes) {
  // Chunk i = first + j * lanes is (row, column) = (i / chunks_per_row, i % chunks_per_row); the
  // lanes step through them without dividing: a tile takes a few instructions a load.
  const int chunks_per_row = cols / 8, chunks = rows * chunks_per_row;
  const int row_step = lanes / chunks_per_row, col_step = lanes % chunks_per_row;
  const auto advance = [&](int& r, int& c) {
    c += col_step;
    r += row_step;
    if (c >= chunks_per_row) {
      c -= chunks_per_row;
      ++r;
    }
  };
  int row = first / chunks_per_row, col = first % chunks_per_row;
  for (int i0 = first; i0 < chunks; i0 += lanes * kLoadBatch) {
    const int n = (chunks - i0 + lanes - 1) / lanes;  // this lane's chunks from i0 on
    uint4 x[kLoadBatch];
    int r = row, c = col;
#pragma unroll
    for (int j = 0; j < kLoadBatch; ++j) {
      if (j >= n) break;
      x[j] = r < valid_rows && c * 8 < valid_cols ? *reinterpret_cast<const uint4*>(src + r * stride + c * 8)
                                                 : make_uint4(0, 0, 0, 0);
      advance(r, c);
    }
    r = row, c = col;
#pragma unroll
    for (int j = 0; j < kLoadBatch; ++j) {
      if (j >= n) break;
      if (factor != 1.f) {
        __half* h = reinterpret_cast<__half*>(&x[j]);
#pragma unroll
        for (int e = 0; e < 8; ++e) h[e] = __float2half(__half2float(h[e]) * factor);
      }
      *reinterpret_cast<uint4*>(dst + r * dst_stride + c * 8) = x[j];
      advance(r, c);
    }
    row = r, col = c;
  }
}

template <typename T, typename S>
__device__ void load_tile(const S* __restrict__ src, int64_t stride, int rows, int cols, int64_t valid_rows,
                          int64_t valid_cols, T* dst, int dst_stride, float factor, int first, int lanes) {
  if constexpr (std::is_same_v<T, __half> && std::is_same_v<S, __half>) {
    if (loads_in_chunks(src, stride, cols, valid_cols, dst_stride))
      return load_tile_chunks(src, stride, rows, cols, valid_rows, valid_cols, dst, dst_stride, factor, first, lanes);
  }
  // The lanes take neighbouring columns (coalesced).
  const int row_step = lanes / 32;
  for (int c = first % 32; c < cols; c += 32)
    for (int r0 = first / 32; r0 < rows; r0 += row_step * kLoadBatch) {
      float x[kLoadBatch];
#pragma unroll
      for (int j = 0; j < kLoadBatch; ++j) {
        const int r = r0 + j * row_step;
        x[j] = r < rows && r < valid_rows && c < valid_cols ? to_float(src[r * stride + c]) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kLoadBatch; ++j) {
        const int r = r0 + j * row_step;
        if (r < rows) dst[r * dst_stride + c] = from_float<T>(x[j] * factor);
      }
    }
}

// Writes a block's `valid_rows` x `cols` outputs to `y` (row stride `y_stride`): row r of query
// tile t merges the partial softmaxes of the warps t * key_splits ... that split its keys, each
// rescaled to the row's overall maximum. `maxima` and `sums` are [warps, kQueryTile];
// `partial(w)` is warp w's unnormalised output [kQueryTile, partial_stride] (float). A thread
// takes 8 columns of a row at a time: the row's factors once, then one 16-byte store of float16.
template <typename T, typename Partial>
__device__ void merge_and_store(const float* maxima, const float* sums, Partial partial, int partial_stride,
                                WarpSplit split, int valid_rows, int cols, T* y, int64_t y_stride) {
  constexpr int kCols = 8;
  const int chunks = (cols + kCols - 1) / kCols;
  for (int i = threadIdx.x; i < valid_rows * chunks; i += blockDim.x) {
    const int row = i / chunks, c0 = (i - row * chunks) * kCols, r = row % kQueryTile;
    const int w0 = row / kQueryTile * split.key_splits;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kAttentionWarps; ++w)
      if (w < split.key_splits) m = fmaxf(m, maxima[(w0 + w) * kQueryTile + r]);
    const float m_safe = m == -INFINITY ? 0.f : m;
    float scale[kAttentionWarps], sum = 0.f;
#pragma unroll
    for (int w = 0; w < kAttentionWarps; ++w) {
      scale[w] = w < split.key_splits ? exp_of<T>(maxima[(w0 + w) * kQueryTile + r] - m_safe) : 0.f;
      if (w < split.key_splits) sum += sums[(w0 + w) * kQueryTile + r] * scale[w];
    }
    float value[kCols] = {};
#pragma unroll
    for (int w = 0; w < kAttentionWarps; ++w) {
      if (w >= split.key_splits) break;
      const float* p = partial(w0 + w) + r * partial_stride + c0;
#pragma unroll
      for (int e = 0; e < kCols; ++e)
        if (c0 + e < cols) value[e] += p[e] * scale[w];
    }
    T* out = y + row * y_stride + c0;
    if constexpr (std::is_same_v<T, __half>) {
      if (c0 + kCols <= cols && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
        uint4 packed;
        __half2* h = reinterpret_cast<__half2*>(&packed);
#pragma unroll
        for (int e = 0; e < kCols / 2; ++e) h[e] = __floats2half2_rn(value[2 * e] / sum, value[2 * e + 1] / sum);
        *reinterpret_cast<uint4*>(out) = packed;
        continue;
      }
    }
#pragma unroll
    for (int e = 0; e < kCols; ++e)
      if (c0 + e < cols) out[e] = from_float<T>(value[e] / sum);
  }
}

// Above 48 KiB a kernel must ask for its shared memory (once per kernel, `granted` remembering the
// most asked for); a host-side attribute, not a stream operation, so it is allowed while a CUDA
// graph is captured.
template <typename Kernel>
void grant_shared_memory(Kernel* kernel, size_t bytes, std::atomic<size_t>& granted) {
  if (bytes <= granted.load()) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "fused attention's shared memory");
  granted = bytes;
}

// The grid's x extent: `row_blocks` blocks of query rows for each of `batches` batch matrices.
inline unsigned attention_blocks(int64_t row_blocks, int64_t batches) {
  const int64_t blocks = row_blocks * batches;
  if (blocks > INT32_MAX) fail(EDGERT_ERR_UNSUPPORTED, "%lld blocks: too many for one launch", static_cast<long long>(blocks));
  return static_cast<unsigned>(blocks);
}

// The float16 kernel (fused_attention_f16.cu): shared memory of a block of `split`, and its launch
// on `stream` (`row_blocks` blocks of query rows per batch matrix, `batches` batch matrices).
size_t fused_attention_f16_shared_bytes(int dp, WarpSplit split, bool k_rows);
template <typename M>
void launch_fused_attention_f16(const __half* q, const __half* k, const __half* v, const M* mask, __half* y,
                                const AttentionShape& sh, const BatchWalk& walk, WarpSplit split, size_t shared_bytes,
                                int64_t row_blocks, int64_t batches, cudaStream_t stream);

}  // namespace edgert::cuda
