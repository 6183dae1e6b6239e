// edgert.FusedAttention in float16 on tensor cores (fused_attention.cuh says how the work is
// split): a warp's products run as mma.sync m16n8k16 (float16 operands, float accumulation) on
// register fragments, FlashAttention-2's way. The scores of 16 queries by 64 keys stay in
// registers as the first product leaves them; the softmax works on them there (a row's 64
// scores lie with the 4 lanes of a quad: its maximum and sum are two shuffles); the
// probabilities, rounded to float16, are already the second product's A fragments; and the
// running output stays in registers across the key tiles. Shared memory holds only Q and each
// warp's key and value tiles, read with ldmatrix. Per key tile a warp issues a few hundred
// instructions; the WMMA kernel this replaces went through shared memory for every score,
// probability and output and issued ten times as many, which at the one or two warps a
// scheduler has on these small problems was what its time was made of.
// A block computes 64 output columns (kValueChunk): wider value heads take more blocks along y.
#include "cuda_op.h"
#include "fused_attention.cuh"

namespace edgert::cuda {
namespace {

constexpr int kValueChunk = 64;  // output columns a block computes
constexpr int kPad = 8;          // halves after each shared row: ldmatrix's 8 rows hit 8 different bank groups
constexpr int kOutStride = kValueChunk + 4;  // floats per row of a warp's output in shared memory

// Shared memory: the block's Q rows [row_tiles * 16, dp + kPad], the warps' maxima and sums
// [kAttentionWarps, 16] (float); then for each warp: its key tile (K [64, dp + kPad] or
// Kt [dp, 64 + kPad]; after its last tile its output [16, kOutStride] (float) in the same place)
// and its value tile [64, kValueChunk + kPad]. Byte offsets, 16-byte aligned (ldmatrix).
struct Fp16Layout {
  size_t q, stats, warp0, keys, values, per_warp, total;
  __host__ __device__ static size_t align(size_t n) { return (n + 15) / 16 * 16; }
  __host__ __device__ Fp16Layout(int dp, WarpSplit split, bool k_rows) {
    q = 0;
    stats = align(sizeof(__half) * split.row_tiles * kQueryTile * (dp + kPad));
    warp0 = align(stats + sizeof(float) * 2 * kAttentionWarps * kQueryTile);
    const size_t key_bytes = sizeof(__half) * (k_rows ? kKeyTile * (dp + kPad) : dp * (kKeyTile + kPad));
    const size_t out_bytes = sizeof(float) * kQueryTile * kOutStride;
    keys = 0;
    values = align(key_bytes > out_bytes ? key_bytes : out_bytes);
    per_warp = align(values + sizeof(__half) * kKeyTile * (kValueChunk + kPad));
    total = warp0 + split.warps * per_warp;
  }
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 float16 matrices from shared memory; lane i gives the address of row i % 8 of matrix i / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __half* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// Copies a tile as load_tile does (zeros outside the valid rows and columns), by cp.async where
// it goes in 16-byte chunks: the copies fly while the lanes issue the next ones, so a block's Q
// and its warps' first key and value tiles arrive in one round trip to memory instead of three
// in a row (a latency a vit_b_16 head pays once per block: each warp has one key tile). Other
// tiles go through load_tile. cp_async_wait() waits for this thread's copies.
__device__ __forceinline__ void copy_tile(const __half* __restrict__ src, int64_t stride, int rows, int cols,
                                          int64_t valid_rows, int64_t valid_cols, __half* dst, int dst_stride, int first,
                                          int lanes) {
#if __CUDA_ARCH__ >= 800
  if (loads_in_chunks(src, stride, cols, valid_cols, dst_stride)) {
    // Chunk i is (row, column) = (i / chunks_per_row, i % chunks_per_row): the lanes step
    // through them without dividing, as load_tile_chunks does.
    const int chunks_per_row = cols / 8, chunks = rows * chunks_per_row;
    const int row_step = lanes / chunks_per_row, col_step = lanes % chunks_per_row;
    const int valid_r = static_cast<int>(min(valid_rows, static_cast<int64_t>(rows)));
    const int valid_c = static_cast<int>(min(valid_cols, static_cast<int64_t>(cols)));
    int r = first / chunks_per_row, c = first % chunks_per_row;
    for (int i = first; i < chunks; i += lanes) {
      const bool valid = r < valid_r && c * 8 < valid_c;
      // A chunk outside the tile's data reads nothing (source size 0) and is zero-filled.
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst + r * dst_stride + c * 8)),
                   "l"(valid ? src + r * stride + c * 8 : src), "r"(valid ? 16 : 0));
      c += col_step;
      r += row_step;
      if (c >= chunks_per_row) {
        c -= chunks_per_row;
        ++r;
      }
    }
    return;
  }
#endif
  load_tile(src, stride, rows, cols, valid_rows, valid_cols, dst, dst_stride, 1.f, first, lanes);
}

__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// d [16x8, float] += a [16x16, row-major float16] b [16x8, column-major float16].
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_halves(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Fragment coordinates (PTX's m16n8k16 layouts): lane = 4 g + t; an accumulator's element e of
// n-tile j is row g + 8 (e / 2), column 8 j + 2 t + e % 2.
template <typename M>
__global__ void __launch_bounds__(kAttentionWarps * 32)
    fused_attention_f16(const __half* __restrict__ q, const __half* __restrict__ k, const __half* __restrict__ v,
                        const M* __restrict__ mask, __half* __restrict__ y, AttentionShape sh, BatchWalk walk,
                        int64_t row_blocks) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const WarpSplit split = split_warps(blockDim.x / 32, sh.s);
  const Fp16Layout layout(sh.dp, split, sh.k_rows);
  const int row_tile = warp / split.key_splits, key_split = warp % split.key_splits;
  const int block_rows = split.row_tiles * kQueryTile, q_stride = sh.dp + kPad;
  const int k_stride = sh.k_rows ? sh.dp + kPad : kKeyTile + kPad, v_stride = kValueChunk + kPad;
  __half* qs = reinterpret_cast<__half*>(smem + layout.q);
  float* maxima = reinterpret_cast<float*>(smem + layout.stats);
  float* sums = maxima + kAttentionWarps * kQueryTile;
  unsigned char* mine = smem + layout.warp0 + warp * layout.per_warp;
  __half* keys = reinterpret_cast<__half*>(mine + layout.keys);
  __half* values = reinterpret_cast<__half*>(mine + layout.values);

  const int b = static_cast<int>(blockIdx.x / static_cast<unsigned>(row_blocks));
  const int64_t block_row0 = static_cast<int64_t>(blockIdx.x % static_cast<unsigned>(row_blocks)) * block_rows;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kValueChunk;
  const int value_cols = static_cast<int>(min(static_cast<int64_t>(kValueChunk), sh.dv - c0));
  const BatchOffsets at = batch_offsets(walk, b);
  const int64_t row0 = block_row0 + row_tile * kQueryTile;
  const int rows = static_cast<int>(max(int64_t{0}, min(static_cast<int64_t>(kQueryTile), sh.l - row0)));
  const __half* kb = k + at.k;
  const __half* vb = v + at.v + c0;
  const M* mb = mask ? mask + at.mask + row0 * sh.mask_row : nullptr;

  // Q as it is: its factor goes to the scores (float32) with theirs.
  const float score_factor = sh.score_factor * sh.q_factor;
  copy_tile(q + at.q + block_row0 * sh.q_row, sh.q_row, block_rows, sh.dp, sh.l - block_row0, sh.d, qs, q_stride,
            threadIdx.x, blockDim.x);
  const auto copy_key_value_tiles = [&](int64_t s0) {
    if (sh.k_rows) copy_tile(kb + s0 * sh.k_row, sh.k_row, kKeyTile, sh.dp, sh.s - s0, sh.d, keys, k_stride, lane, 32);
    else copy_tile(kb + s0, sh.k_row, sh.dp, kKeyTile, sh.d, sh.s - s0, keys, k_stride, lane, 32);
    copy_tile(vb + s0 * sh.v_row, sh.v_row, kKeyTile, kValueChunk, sh.s - s0, value_cols, values, v_stride, lane, 32);
  };
  const int64_t first = rows > 0 ? key_split * kKeyTile : sh.s;      // a tile past the queries does nothing
  if (first < sh.s) copy_key_value_tiles(first);
  cp_async_wait();
  __syncthreads();  // Q and every warp's first key and value tiles are in
  const __half* q_warp = qs + row_tile * kQueryTile * q_stride;

  float o[kValueChunk / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // rows g and g + 8; sums of this lane's columns
  for (int64_t s0 = first; s0 < sh.s; s0 += split.key_splits * kKeyTile) {
    if (s0 != first) {
      copy_key_value_tiles(s0);
      cp_async_wait();
      __syncwarp();
    }

    // Scores [16, 64] = Q K^T: n-tiles of 8 keys, two a ldmatrix.
    float sc[kKeyTile / 8][4] = {};
    for (int kk = 0; kk < sh.dp; kk += 16) {
      uint32_t a[4];
      ldmatrix_x4(a, q_warp + (lane % 16) * q_stride + kk + (lane / 16) * 8);
#pragma unroll
      for (int np = 0; np < kKeyTile / 16; ++np) {
        uint32_t kf[4];
        if (sh.k_rows) ldmatrix_x4(kf, keys + (np * 16 + (lane / 16) * 8 + lane % 8) * k_stride + kk + ((lane / 8) % 2) * 8);
        else ldmatrix_x4_trans(kf, keys + (kk + ((lane / 8) % 2) * 8 + lane % 8) * k_stride + np * 16 + (lane / 16) * 8);
        mma_16816(sc[2 * np], a, kf[0], kf[1]);
        mma_16816(sc[2 * np + 1], a, kf[2], kf[3]);
      }
    }

    // The online softmax on the fragments: scale, mask, the rows' maxima over the quad.
    float tile_max[2] = {-INFINITY, -INFINITY};
    const int tile_keys = static_cast<int>(min(static_cast<int64_t>(kKeyTile), sh.s - s0));
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = g + 8 * (e / 2);
        const int key = 8 * j + 2 * t + e % 2;  // in the tile
        float x = -INFINITY;
        if (key < tile_keys) {
          x = sc[j][e] * score_factor;
          if (mb && r < rows) x += to_float(mb[r * sh.mask_row + (s0 + key) * sh.mask_col]);
        }
        sc[j][e] = x;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      }
    float alpha[2], m_safe[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      const float m_new = fmaxf(row_max[h], tile_max[h]);
      // A row whose scores are all -inf so far keeps nothing: exponents from 0, not from -inf.
      m_safe[h] = m_new == -INFINITY ? 0.f : m_new;
      alpha[h] = __expf(row_max[h] - m_safe[h]);
      row_max[h] = m_new;
      row_sum[h] *= alpha[h];
    }
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[j][e] = __expf(sc[j][e] - m_safe[e / 2]);
        row_sum[e / 2] += sc[j][e];
      }
#pragma unroll
    for (int j = 0; j < kValueChunk / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] *= alpha[e / 2];

    // Output += P V: the probabilities of keys 16 kt ... are the A fragment of n-tiles 2 kt, 2 kt + 1.
#pragma unroll
    for (int kt = 0; kt < kKeyTile / 16; ++kt) {
      const uint32_t a[4] = {pack_halves(sc[2 * kt][0], sc[2 * kt][1]), pack_halves(sc[2 * kt][2], sc[2 * kt][3]),
                             pack_halves(sc[2 * kt + 1][0], sc[2 * kt + 1][1]),
                             pack_halves(sc[2 * kt + 1][2], sc[2 * kt + 1][3])};
#pragma unroll
      for (int np = 0; np < kValueChunk / 16; ++np) {
        if (np * 16 >= value_cols) break;  // a narrower head: the rest of the chunk is zeros
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, values + (kt * 16 + ((lane / 8) % 2) * 8 + lane % 8) * v_stride + np * 16 + (lane / 16) * 8);
        mma_16816(o[2 * np], a, vf[0], vf[1]);
        mma_16816(o[2 * np + 1], a, vf[2], vf[3]);
      }
    }
    __syncwarp();  // the tiles are read: the next ones take their place
  }

  // The rows' sums over the quad; the output to shared memory (where the key tile was) for the merge.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  float* out = reinterpret_cast<float*>(keys);
#pragma unroll
  for (int j = 0; j < kValueChunk / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<float2*>(out + (g + 8 * h) * kOutStride + 8 * j + 2 * t) = make_float2(o[j][2 * h], o[j][2 * h + 1]);
  if (t == 0)
    for (int h = 0; h < 2; ++h) {
      maxima[warp * kQueryTile + g + 8 * h] = row_max[h];
      sums[warp * kQueryTile + g + 8 * h] = row_sum[h];
    }
  __syncthreads();
  const auto partial = [&](int w) {
    return reinterpret_cast<const float*>(smem + layout.warp0 + w * layout.per_warp + layout.keys);
  };
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(block_rows), sh.l - block_row0));
  merge_and_store(maxima, sums, partial, kOutStride, split, valid_rows, value_cols,
                  y + at.y + block_row0 * sh.y_row + c0, sh.y_row);
}

}  // namespace

size_t fused_attention_f16_shared_bytes(int dp, WarpSplit split, bool k_rows) {
  return Fp16Layout(dp, split, k_rows).total;
}

template <typename M>
void launch_fused_attention_f16(const __half* q, const __half* k, const __half* v, const M* mask, __half* y,
                                const AttentionShape& sh, const BatchWalk& walk, WarpSplit split, size_t shared_bytes,
                                int64_t row_blocks, int64_t batches, cudaStream_t stream) {
  static std::atomic<size_t> granted{48 * 1024};
  grant_shared_memory(fused_attention_f16<M>, shared_bytes, granted);
  const dim3 grid(attention_blocks(row_blocks, batches), static_cast<unsigned>((sh.dv + kValueChunk - 1) / kValueChunk));
  fused_attention_f16<M><<<grid, split.warps * 32, shared_bytes, stream>>>(q, k, v, mask, y, sh, walk, row_blocks);
  check_launch("fused_attention_f16");
}

template void launch_fused_attention_f16<__half>(const __half*, const __half*, const __half*, const __half*, __half*,
                                                 const AttentionShape&, const BatchWalk&, WarpSplit, size_t, int64_t,
                                                 int64_t, cudaStream_t);
template void launch_fused_attention_f16<float>(const __half*, const __half*, const __half*, const float*, __half*,
                                                const AttentionShape&, const BatchWalk&, WarpSplit, size_t, int64_t,
                                                int64_t, cudaStream_t);

}  // namespace edgert::cuda
