// edgert.FusedAttention on the GPU (builder/src/passes/attention_fusion.cpp): for every batch
// matrix
//   O = softmax(((Q * q_scale / q_divisor) Kt) * score_scale / score_divisor + mask) V
// with Q [..., L, D], Kt [..., D, S] (the keys already transposed), V [..., S, Dv], batch dims
// broadcasting as MatMul's, and an optional additive mask broadcasting over the scores [..., L, S].
// With keys_transposed 0 the second input is K [..., S, D]: its tiles load as rows of D
// contiguous elements (16-byte loads where D allows) and the tensor cores read them as Kt
// (column-major), so no transposed copy of the keys is made in the graph.
//
// Flash-style: a block takes 16 queries of one batch matrix; its four warps walk the keys in tiles
// of 64, each its own share of the tiles (keys split across warps: a short sequence still keeps
// many warps busy), each keeping for its queries the running maximum and sum of the softmax (the
// online softmax: a new maximum rescales what was summed so far) and the running output in shared
// memory. The warps' partial results are merged at the end. The [L, S] scores never reach global
// memory and the whole attention is one kernel instead of two products, a softmax in float32
// with float16 casts around it, and the layout changes between.
// Float16 products run on tensor cores (WMMA 16x16x16, float accumulation, the probabilities
// rounded to float16 for the second product as every fused attention does); float32 products on
// CUDA cores in float, as the unfused graph computes them (no TF32). Scores, maximum, exponentials
// and sums are float in both.
#include <mma.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <type_traits>

#include "activation.cuh"
#include "cuda_op.h"
#include "warp_reduce.cuh"

namespace edgert::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRows = 16;     // queries per block (the tensor cores' tile height)
constexpr int kKeyTile = 64;  // keys per step of a warp
constexpr int kMaxBatchRank = 6;
constexpr int64_t kMaxHeadDim = 256;        // D and Dv
constexpr size_t kMaxSharedBytes = 160 * 1024;  // below every CUDA board's limit (Orin: 164 KiB)

// Offsets of batch matrix `b` in Q, Kt, V (in matrices) and in the mask (in elements): the
// output's batch dims, last fastest, with each operand's strides (0 where it broadcasts).
struct BatchWalk {
  int rank = 0;
  int64_t dims[kMaxBatchRank] = {};
  int64_t q[kMaxBatchRank] = {}, k[kMaxBatchRank] = {}, v[kMaxBatchRank] = {}, mask[kMaxBatchRank] = {};
};

struct AttentionShape {
  int64_t l, d, s, dv;      // Q [L, D], Kt [D, S], V [S, Dv]
  int dp, dvp;              // D and Dv rounded up to 16 (the tensor cores' step)
  int64_t mask_row, mask_col;  // the mask's strides along L and S
  bool k_rows;                 // the keys as K [S, D] (else Kt [D, S])
  float q_factor_scale, q_factor_divisor, score_scale, score_divisor;
};

template <typename T>
struct SharedLayout {
  // The block's Q rows [kRows, dp] (T) and the warps' maxima and sums [kWarps, kRows] (float),
  // then for each of its `warps` warps, from warp0 + warp * per_warp: a key or value tile
  // [max(dp, kKeyTile), max(kKeyTile, dvp)] (T), the scores [kRows, kKeyTile] (float), the
  // probabilities [kRows, kKeyTile] (T) and the output [kRows, dvp] (float). Offsets in bytes
  // (tile, scores, probs and out within a warp's part), each 32-byte aligned (WMMA's pointers).
  size_t q, stats, warp0, tile, scores, probs, out, per_warp, total;
  __host__ __device__ static size_t align(size_t n) { return (n + 31) / 32 * 32; }
  __host__ __device__ SharedLayout(int dp, int dvp, int warps) {
    q = 0;
    stats = align(q + sizeof(T) * kRows * dp);
    warp0 = align(stats + sizeof(float) * 2 * kWarps * kRows);
    const size_t tile_elems = std::max(static_cast<size_t>(dp) * kKeyTile, static_cast<size_t>(kKeyTile) * dvp);
    tile = 0;
    scores = align(tile + sizeof(T) * tile_elems);
    probs = align(scores + sizeof(float) * kRows * kKeyTile);
    out = align(probs + sizeof(T) * kRows * kKeyTile);
    per_warp = align(out + sizeof(float) * kRows * dvp);
    total = warp0 + warps * per_warp;
  }
};

// scores [16, kKeyTile] (float, row stride kKeyTile) = q [16, dp] (row stride dp) x kt [dp, kKeyTile]
// (`k_rows`: the tile holds K [kKeyTile, dp], row-major, which is Kt column-major).
template <bool kRowsOfK>
__device__ void warp_scores_wmma(const __half* q, const __half* kt, int dp, float* scores) {
  using namespace nvcuda;
  using Layout = std::conditional_t<kRowsOfK, wmma::col_major, wmma::row_major>;
  for (int j = 0; j < kKeyTile / 16; ++j) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < dp / 16; ++k) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, Layout> b;
      wmma::load_matrix_sync(a, q + k * 16, dp);
      if constexpr (kRowsOfK) wmma::load_matrix_sync(b, kt + j * 16 * dp + k * 16, dp);
      else wmma::load_matrix_sync(b, kt + k * 16 * kKeyTile + j * 16, kKeyTile);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(scores + j * 16, acc, kKeyTile, wmma::mem_row_major);
  }
}

__device__ void warp_scores(const __half* q, const __half* kt, int dp, bool k_rows, float* scores) {
  if (k_rows) warp_scores_wmma<true>(q, kt, dp, scores);
  else warp_scores_wmma<false>(q, kt, dp, scores);
}

__device__ void warp_scores(const float* q, const float* kt, int dp, bool k_rows, float* scores) {
  const int lane = threadIdx.x % 32;
  // Kt (d, c) in the tile: d * kKeyTile + c, or (K's rows) c * dp + d.
  const int64_t d_step = k_rows ? 1 : kKeyTile, c_step = k_rows ? dp : 1;
  float acc[kRows][2] = {};
  for (int d = 0; d < dp; ++d) {
    const float k0 = kt[d * d_step + lane * c_step], k1 = kt[d * d_step + (lane + 32) * c_step];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float qv = q[r * dp + d];
      acc[r][0] = fmaf(qv, k0, acc[r][0]);
      acc[r][1] = fmaf(qv, k1, acc[r][1]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    scores[r * kKeyTile + lane] = acc[r][0];
    scores[r * kKeyTile + lane + 32] = acc[r][1];
  }
}

// out [16, dvp] (float, row stride dvp) += p [16, kKeyTile] (row stride kKeyTile) x v [kKeyTile, dvp].
__device__ void warp_accumulate(const __half* p, const __half* v, int dvp, float* out) {
  using namespace nvcuda;
  for (int j = 0; j < dvp / 16; ++j) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, out + j * 16, dvp, wmma::mem_row_major);
    for (int k = 0; k < kKeyTile / 16; ++k) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
      wmma::load_matrix_sync(a, p + k * 16, kKeyTile);
      wmma::load_matrix_sync(b, v + k * 16 * dvp + j * 16, dvp);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(out + j * 16, acc, dvp, wmma::mem_row_major);
  }
}

__device__ void warp_accumulate(const float* p, const float* v, int dvp, float* out) {
  const int lane = threadIdx.x % 32;
  for (int c0 = 0; c0 < dvp; c0 += 64) {
    const int c[2] = {c0 + lane, c0 + 32 + lane};
    float acc[kRows][2];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      for (int h = 0; h < 2; ++h) acc[r][h] = c[h] < dvp ? out[r * dvp + c[h]] : 0.f;
    for (int k = 0; k < kKeyTile; ++k) {
      const float v0 = c[0] < dvp ? v[k * dvp + c[0]] : 0.f, v1 = c[1] < dvp ? v[k * dvp + c[1]] : 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float pv = p[r * kKeyTile + k];
        acc[r][0] = fmaf(pv, v0, acc[r][0]);
        acc[r][1] = fmaf(pv, v1, acc[r][1]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      for (int h = 0; h < 2; ++h)
        if (c[h] < dvp) out[r * dvp + c[h]] = acc[r][h];
  }
}

// The float32 kernel's exponentials as the reference's (expf); the float16 kernel's probabilities
// round to float16, far coarser than __expf's few ulp.
template <typename T>
__device__ __forceinline__ float exp_of(float x) {
  if constexpr (std::is_same_v<T, float>) return expf(x);
  else return __expf(x);
}

// Copies rows x cols of `src` (row stride `stride`; `valid_rows` x `valid_cols` of them real)
// into shared `dst` (row stride `cols`) as T, zeros outside, times `factor`; the lanes take
// neighbouring columns (coalesced), `lanes` threads in all starting at `first`. Each thread
// issues kLoadBatch loads before it stores any: a tile is latency-bound otherwise, one global
// round trip per element.
constexpr int kLoadBatch = 16;

// The same with 16-byte loads (8 halves a lane a load) where a row's `cols` halves are all real,
// 16-byte aligned and a whole number of loads: a 64 x 64 tile is 16 loads a lane, one batch.
__device__ bool loads_in_chunks(const void* src, int64_t stride, int cols, int64_t valid_cols) {
  return cols % 8 == 0 && stride % 8 == 0 && valid_cols == cols && reinterpret_cast<uintptr_t>(src) % 16 == 0;
}

__device__ void load_tile_chunks(const __half* __restrict__ src, int64_t stride, int rows, int cols,
                                 int64_t valid_rows, __half* dst, float factor, int first, int lanes) {
  const int chunks_per_row = cols / 8, chunks = rows * chunks_per_row;
  for (int i0 = first; i0 < chunks; i0 += lanes * kLoadBatch) {
    uint4 x[kLoadBatch];
#pragma unroll
    for (int j = 0; j < kLoadBatch; ++j) {
      const int i = i0 + j * lanes, r = i / chunks_per_row, c = i % chunks_per_row;
      x[j] = i < chunks && r < valid_rows ? *reinterpret_cast<const uint4*>(src + r * stride + c * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < kLoadBatch; ++j) {
      const int i = i0 + j * lanes;
      if (i >= chunks) continue;
      if (factor != 1.f) {
        __half* h = reinterpret_cast<__half*>(&x[j]);
#pragma unroll
        for (int e = 0; e < 8; ++e) h[e] = __float2half(__half2float(h[e]) * factor);
      }
      *reinterpret_cast<uint4*>(dst + (i / chunks_per_row) * cols + (i % chunks_per_row) * 8) = x[j];
    }
  }
}

template <typename T, typename S>
__device__ void load_tile(const S* __restrict__ src, int64_t stride, int rows, int cols, int64_t valid_rows,
                          int64_t valid_cols, T* dst, float factor, int first, int lanes) {
  if constexpr (std::is_same_v<T, __half> && std::is_same_v<S, __half>) {
    if (loads_in_chunks(src, stride, cols, valid_cols))
      return load_tile_chunks(src, stride, rows, cols, valid_rows, dst, factor, first, lanes);
  }
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
        if (r < rows) dst[r * cols + c] = from_float<T>(x[j] * factor);
      }
    }
}

template <typename T, typename M>
__global__ void __launch_bounds__(kWarps * 32)
    fused_attention(const T* __restrict__ q, const T* __restrict__ kt, const T* __restrict__ v,
                    const M* __restrict__ mask, T* __restrict__ y, AttentionShape sh, BatchWalk walk,
                    int64_t row_blocks) {
  extern __shared__ __align__(32) unsigned char smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const SharedLayout<T> layout(sh.dp, sh.dvp, warps);
  T* qs = reinterpret_cast<T*>(smem + layout.q);
  float* maxima = reinterpret_cast<float*>(smem + layout.stats);
  float* sums = maxima + kWarps * kRows;
  unsigned char* mine = smem + layout.warp0 + warp * layout.per_warp;
  T* tile = reinterpret_cast<T*>(mine + layout.tile);
  float* scores = reinterpret_cast<float*>(mine + layout.scores);
  T* probs = reinterpret_cast<T*>(mine + layout.probs);
  float* out = reinterpret_cast<float*>(mine + layout.out);

  const int64_t b = blockIdx.x / row_blocks, row0 = (blockIdx.x % row_blocks) * kRows;
  int64_t qo = 0, ko = 0, vo = 0, mo = 0;
  for (int64_t d = walk.rank - 1, rest = b; d >= 0; --d) {
    const int64_t i = rest % walk.dims[d];
    rest /= walk.dims[d];
    qo += i * walk.q[d];
    ko += i * walk.k[d];
    vo += i * walk.v[d];
    mo += i * walk.mask[d];
  }
  const T* qb = q + qo * sh.l * sh.d + row0 * sh.d;
  const T* kb = kt + ko * sh.d * sh.s;
  const T* vb = v + vo * sh.s * sh.dv;
  const M* mb = mask ? mask + mo + row0 * sh.mask_row : nullptr;
  const int64_t rows = min(static_cast<int64_t>(kRows), sh.l - row0);

  load_tile(qb, sh.d, kRows, sh.dp, rows, sh.d, qs, sh.q_factor_scale / sh.q_factor_divisor, threadIdx.x,
            warps * 32);
  for (int i = lane; i < kRows * sh.dvp; i += 32) out[i] = 0.f;
  // Every lane keeps every row's running maximum and sum (the warp reduces one row at a time).
  float row_max[kRows], row_sum[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.f;
  }
  __syncthreads();  // Q is loaded

  for (int64_t s0 = warp * kKeyTile; s0 < sh.s; s0 += warps * kKeyTile) {
    if (sh.k_rows) load_tile(kb + s0 * sh.d, sh.d, kKeyTile, sh.dp, sh.s - s0, sh.d, tile, 1.f, lane, 32);
    else load_tile(kb + s0, sh.s, sh.dp, kKeyTile, sh.d, sh.s - s0, tile, 1.f, lane, 32);
    __syncwarp();
    warp_scores(qs, tile, sh.dp, sh.k_rows, scores);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float x[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = h * 32 + lane;
        float value = -INFINITY;
        if (s0 + c < sh.s) {
          value = scores[r * kKeyTile + c] * sh.score_scale / sh.score_divisor;
          if (mb && r < rows) value += to_float(mb[r * sh.mask_row + (s0 + c) * sh.mask_col]);
        }
        x[h] = value;
      }
      const float m_new = fmaxf(row_max[r], warp_max(fmaxf(x[0], x[1])));
      // A row whose scores are all -inf so far keeps nothing: exponents from 0, not from -inf.
      const float m_safe = m_new == -INFINITY ? 0.f : m_new;
      const float p0 = exp_of<T>(x[0] - m_safe), p1 = exp_of<T>(x[1] - m_safe);
      const float alpha = exp_of<T>(row_max[r] - m_safe);
      row_sum[r] = row_sum[r] * alpha + warp_sum(p0 + p1);
      row_max[r] = m_new;
      probs[r * kKeyTile + lane] = from_float<T>(p0);
      probs[r * kKeyTile + lane + 32] = from_float<T>(p1);
      for (int c = lane; c < sh.dvp; c += 32) out[r * sh.dvp + c] *= alpha;
    }
    __syncwarp();  // the key tile is read: the value tile takes its place
    load_tile(vb + s0 * sh.dv, sh.dv, kKeyTile, sh.dvp, sh.s - s0, sh.dv, tile, 1.f, lane, 32);
    __syncwarp();
    warp_accumulate(probs, tile, sh.dvp, out);
    __syncwarp();
  }
  if (lane < kRows) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r == lane) {
        maxima[warp * kRows + r] = row_max[r];
        sums[warp * kRows + r] = row_sum[r];
      }
  }
  __syncthreads();
  // Merge the warps' partial softmaxes: each rescaled to the row's overall maximum.
  T* yb = y + b * sh.l * sh.dv + row0 * sh.dv;
  for (int i = threadIdx.x; i < rows * sh.dv; i += blockDim.x) {
    const int r = static_cast<int>(i / sh.dv), c = static_cast<int>(i % sh.dv);
    float m = -INFINITY;
    for (int w = 0; w < warps; ++w) m = fmaxf(m, maxima[w * kRows + r]);
    const float m_safe = m == -INFINITY ? 0.f : m;
    float sum = 0.f, value = 0.f;
    for (int w = 0; w < warps; ++w) {
      const float scale = exp_of<T>(maxima[w * kRows + r] - m_safe);
      sum += sums[w * kRows + r] * scale;
      const float* partial = reinterpret_cast<const float*>(smem + layout.warp0 + w * layout.per_warp + layout.out);
      value += partial[r * sh.dvp + c] * scale;
    }
    yb[i] = from_float<T>(value / sum);
  }
}

const edgert_tensor* mask_input(const edgert_node& node, const edgert_tensor* in) {
  return node.num_inputs > 3 && is_present(in[3]) ? &in[3] : nullptr;
}

// Shared memory of a block of `warps` warps for heads D and Dv.
size_t shared_bytes(edgert_dtype dtype, int64_t d, int64_t dv, int warps) {
  const int dp = static_cast<int>((d + 15) / 16 * 16), dvp = static_cast<int>((dv + 15) / 16 * 16);
  return dtype == EDGERT_DTYPE_FLOAT16 ? SharedLayout<__half>(dp, dvp, warps).total
                                       : SharedLayout<float>(dp, dvp, warps).total;
}

// Four warps a block where their shared memory fits every board, else fewer (wide float32 heads).
int warps_for(edgert_dtype dtype, int64_t d, int64_t dv) {
  int warps = kWarps;
  while (warps > 1 && shared_bytes(dtype, d, dv, warps) > kMaxSharedBytes) warps /= 2;
  return warps;
}

// Heads up to 256 wide whose one-warp blocks fit in shared memory.
int32_t fused_attention_supports(const edgert_node* node, const edgert_tensor* in) {
  if (channels_last(*node)) return 0;  // its rank-4 operands stay [..., L, D] in memory
  const edgert_dtype dtype = in[0].dtype;
  if (dtype != EDGERT_DTYPE_UNDEFINED && !is_float(dtype)) return 0;
  for (int i = 1; i < 3; ++i)
    if (in[i].dtype != EDGERT_DTYPE_UNDEFINED && in[i].dtype != dtype) return 0;
  if (node->num_inputs > 3 && in[3].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[3].dtype)) return 0;
  if (in[0].rank < 2 || in[2].rank < 2) return 1;  // prepare says what is wrong
  const int64_t d = in[0].dims[in[0].rank - 1], dv = in[2].dims[in[2].rank - 1];
  if (d > kMaxHeadDim || dv > kMaxHeadDim) return 0;
  return shared_bytes(dtype, d, dv, 1) <= kMaxSharedBytes;
}

Shape batch_of(const edgert_tensor& t) { return Shape(t.dims, t.dims + t.rank - 2); }

// Strides of `operand` (elements per step of each of its own dims, `inner` elements per step of
// its last batch dim) along the output's batch dims `out`, 0 where it broadcasts.
void broadcast_strides(const Shape& operand, const Shape& out, int64_t inner, int64_t* strides) {
  const size_t offset = out.size() - operand.size();
  int64_t stride = inner;
  for (size_t d = out.size(); d-- > 0;) {
    strides[d] = 0;
    if (d < offset) continue;
    const int64_t extent = operand[d - offset];
    strides[d] = extent == 1 ? 0 : stride;
    stride *= extent;
  }
}

class FusedAttentionOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    dtype_ = in[0].dtype;
    for (int i = 0; i < 3; ++i) {
      if (in[i].dtype != dtype_ || !is_float(dtype_))
        fail(EDGERT_ERR_UNSUPPORTED, "input %d is %s beside Q's %s; the GPU kernel takes float32 or float16 Q, Kt and V",
             i, edgert_dtype_name(in[i].dtype), edgert_dtype_name(dtype_));
      if (in[i].rank < 2) fail(EDGERT_ERR_SHAPE, "input %d has rank %d, expected 2 or more", i, in[i].rank);
    }
    const edgert_tensor &q = in[0], &kt = in[1], &v = in[2];
    shape_.k_rows = Attributes(&node).get_int("keys_transposed", 1) == 0;
    const int64_t k_rows = kt.dims[kt.rank - 2], k_cols = kt.dims[kt.rank - 1];
    shape_.l = q.dims[q.rank - 2];
    shape_.d = q.dims[q.rank - 1];
    shape_.s = shape_.k_rows ? k_rows : k_cols;
    shape_.dv = v.dims[v.rank - 1];
    if ((shape_.k_rows ? k_cols : k_rows) != shape_.d || v.dims[v.rank - 2] != shape_.s)
      fail(EDGERT_ERR_SHAPE, "Q %s, %s %s and V %s do not chain as Q %s V", shape_string(shape_of(q)).c_str(),
           shape_.k_rows ? "K" : "Kt", shape_string(shape_of(kt)).c_str(), shape_string(shape_of(v)).c_str(),
           shape_.k_rows ? "K^T" : "Kt");
    if (shape_.d > kMaxHeadDim || shape_.dv > kMaxHeadDim || shared_bytes(dtype_, shape_.d, shape_.dv, 1) > kMaxSharedBytes)
      fail(EDGERT_ERR_UNSUPPORTED, "head sizes D %lld and Dv %lld in %s: more shared memory than the GPU kernel takes",
           static_cast<long long>(shape_.d), static_cast<long long>(shape_.dv), edgert_dtype_name(dtype_));
    shape_.dp = static_cast<int>((shape_.d + 15) / 16 * 16);
    shape_.dvp = static_cast<int>((shape_.dv + 15) / 16 * 16);

    // The output's batch dims: Q's, Kt's and V's broadcast as MatMul's.
    const Shape qb = batch_of(q), kb = batch_of(kt), vb = batch_of(v);
    const size_t rank = std::max({qb.size(), kb.size(), vb.size()});
    if (rank > static_cast<size_t>(kMaxBatchRank))
      fail(EDGERT_ERR_UNSUPPORTED, "%zu batch dims: the GPU kernel takes up to %d", rank, kMaxBatchRank);
    Shape batch(rank, 1);
    for (const Shape* operand : {&qb, &kb, &vb})
      for (size_t i = 0; i < operand->size(); ++i) {
        int64_t& extent = batch[rank - operand->size() + i];
        const int64_t e = (*operand)[i];
        if (e != 1 && extent != 1 && e != extent)
          fail(EDGERT_ERR_SHAPE, "batch dims of Q %s, Kt %s and V %s do not broadcast", shape_string(shape_of(q)).c_str(),
               shape_string(shape_of(kt)).c_str(), shape_string(shape_of(v)).c_str());
        if (e != 1) extent = e;
      }
    walk_ = BatchWalk{};
    walk_.rank = static_cast<int>(rank);
    batches_ = 1;
    for (size_t i = 0; i < rank; ++i) {
      walk_.dims[i] = batch[i];
      batches_ *= batch[i];
    }
    broadcast_strides(qb, batch, 1, walk_.q);
    broadcast_strides(kb, batch, 1, walk_.k);
    broadcast_strides(vb, batch, 1, walk_.v);

    mask_dtype_ = EDGERT_DTYPE_UNDEFINED;
    shape_.mask_row = shape_.mask_col = 0;
    if (const edgert_tensor* mask = mask_input(node, in)) {
      if (!is_float(mask->dtype)) fail(EDGERT_ERR_UNSUPPORTED, "mask is %s; the GPU kernel takes float32 or float16",
                                       edgert_dtype_name(mask->dtype));
      mask_dtype_ = mask->dtype;
      // The mask over [batch..., L, S]: right-aligned, its dims 1 or the scores'.
      Shape scores = batch;
      scores.push_back(shape_.l);
      scores.push_back(shape_.s);
      const Shape m = shape_of(*mask);
      if (m.size() > scores.size())
        fail(EDGERT_ERR_SHAPE, "mask %s has more dims than the scores %s", shape_string(m).c_str(), shape_string(scores).c_str());
      int64_t strides[kMaxBatchRank + 2] = {};
      int64_t stride = 1;
      for (size_t d = scores.size(); d-- > 0;) {
        const size_t offset = scores.size() - m.size();
        if (d < offset) continue;
        const int64_t extent = m[d - offset];
        if (extent != 1 && extent != scores[d])
          fail(EDGERT_ERR_SHAPE, "mask %s does not broadcast over the scores %s", shape_string(m).c_str(),
               shape_string(scores).c_str());
        strides[d] = extent == 1 ? 0 : stride;
        stride *= extent;
      }
      for (size_t d = 0; d < rank; ++d) walk_.mask[d] = strides[d];
      shape_.mask_row = strides[rank];
      shape_.mask_col = strides[rank + 1];
    }
    Attributes a(&node);
    shape_.q_factor_scale = a.get_float("q_scale", 1.0f);
    shape_.q_factor_divisor = a.get_float("q_divisor", 1.0f);
    shape_.score_scale = a.get_float("score_scale", 1.0f);
    shape_.score_divisor = a.get_float("score_divisor", 1.0f);
    Shape out_shape = batch;
    out_shape.push_back(shape_.l);
    out_shape.push_back(shape_.dv);
    set_output(out[0], dtype_, out_shape);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (batches_ * shape_.l * shape_.dv == 0) return;
    const void* mask = mask_dtype_ == EDGERT_DTYPE_UNDEFINED ? nullptr : mask_input(node, in)->data;
    if (dtype_ == EDGERT_DTYPE_FLOAT16) {
      if (mask_dtype_ == EDGERT_DTYPE_FLOAT32) run<__half, float>(in, mask, out[0].data, stream);
      else run<__half, __half>(in, mask, out[0].data, stream);
    } else {
      if (mask_dtype_ == EDGERT_DTYPE_FLOAT16) run<float, __half>(in, mask, out[0].data, stream);
      else run<float, float>(in, mask, out[0].data, stream);
    }
  }

 private:
  template <typename T, typename M>
  void run(const edgert_tensor* in, const void* mask, void* y, cudaStream_t stream) const {
    const int warps = warps_for(dtype_, shape_.d, shape_.dv);
    const size_t bytes = SharedLayout<T>(shape_.dp, shape_.dvp, warps).total;
    // Above 48 KiB a kernel must ask for its shared memory; a host-side attribute, not a stream
    // operation, so it is allowed while a CUDA graph is captured.
    static std::atomic<size_t> granted{48 * 1024};
    if (bytes > granted.load()) {
      check_cuda(cudaFuncSetAttribute(fused_attention<T, M>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)),
                 "fused attention's shared memory");
      granted = bytes;
    }
    const int64_t row_blocks = (shape_.l + kRows - 1) / kRows;
    const int64_t blocks = row_blocks * batches_;
    if (blocks > INT32_MAX) fail(EDGERT_ERR_UNSUPPORTED, "%lld blocks: too many for one launch", static_cast<long long>(blocks));
    fused_attention<T, M><<<static_cast<unsigned>(blocks), warps * 32, bytes, stream>>>(
        static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data), static_cast<const T*>(in[2].data),
        static_cast<const M*>(mask), static_cast<T*>(y), shape_, walk_, row_blocks);
    check_launch("fused_attention");
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32, mask_dtype_ = EDGERT_DTYPE_UNDEFINED;
  AttentionShape shape_{};
  BatchWalk walk_;
  int64_t batches_ = 0;
};

}  // namespace

void register_fused_attention_kernels(KernelRegistry& r) {
  r.add_in_domain<FusedAttentionOp>("edgert", "FusedAttention", "cuda-fused-attention", fused_attention_supports);
}

}  // namespace edgert::cuda
