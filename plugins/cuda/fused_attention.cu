// edgert.FusedAttention on the GPU (builder/src/passes/attention_fusion.cpp): for every batch
// matrix
//   O = softmax(((Q * q_scale / q_divisor) Kt) * score_scale / score_divisor + mask) V
// with Q [..., L, D], Kt [..., D, S] (the keys already transposed), V [..., S, Dv], batch dims
// broadcasting as MatMul's, and an optional additive mask broadcasting over the scores [..., L, S].
// With keys_transposed 0 the second input is K [..., S, D]: its tiles load as rows of D
// contiguous elements (16-byte loads where D allows) and the products read them as Kt, so no
// transposed copy of the keys is made in the graph. Operands the builder reads through a Transpose
// (q_perm, k_perm, v_perm, y_perm: attention_operands.h) are read and written by their strides.
// The [L, S] scores never reach global memory
// and the whole attention is one kernel instead of two products, a softmax in float32 with
// float16 casts around it, and the layout changes between.
// Float16 runs on tensor cores (fused_attention_f16.cu: float accumulation, the probabilities
// rounded to float16 for the second product as every fused attention does); float32 here on CUDA
// cores in float, as the unfused graph computes it (no TF32). Scores, maximum, exponentials and
// sums are float in both. fused_attention.cuh has how the work is split between warps.
//
// The float32 kernel: each warp keeps its scores, probabilities and running output in shared
// memory; in the softmax each lane owns half of a query row (the row's maximum and sum are one
// shuffle between two lanes), and a warp loads its value tile with its key tile where shared
// memory allows, so the values' global round trip overlaps the scores and the softmax.
#include <algorithm>
#include <array>
#include <atomic>
#include <cfloat>

#include "attention_operands.h"
#include "cuda_op.h"
#include "fused_attention.cuh"

namespace edgert::cuda {
namespace {

// Shared memory of the float32 kernel: the block's Q rows [row_tiles * 16, dp] and the warps'
// maxima and sums [kAttentionWarps, 16], then for each of its warps, from warp0 + warp *
// per_warp: the key tile [kKeyTile, dp] or [dp, kKeyTile], the value tile [kKeyTile, dvp] (the
// key tile's own place when `separate_values` is false), the scores, the probabilities
// [16, kKeyTile] each and the output [16, dvp]. Offsets in bytes, 16-byte aligned.
struct SharedLayout {
  size_t q, stats, warp0, keys, values, scores, probs, out, per_warp, total;
  __host__ __device__ static size_t align(size_t n) { return (n + 15) / 16 * 16; }
  __host__ __device__ SharedLayout(int dp, int dvp, WarpSplit split, bool separate_values) {
    q = 0;
    stats = align(sizeof(float) * split.row_tiles * kQueryTile * dp);
    warp0 = align(stats + sizeof(float) * 2 * kAttentionWarps * kQueryTile);
    const size_t key_elems = static_cast<size_t>(dp) * kKeyTile, value_elems = static_cast<size_t>(kKeyTile) * dvp;
    keys = 0;
    if (separate_values) {
      values = align(sizeof(float) * key_elems);
      scores = align(values + sizeof(float) * value_elems);
    } else {
      values = keys;
      scores = align(sizeof(float) * (key_elems > value_elems ? key_elems : value_elems));
    }
    probs = align(scores + sizeof(float) * kQueryTile * kKeyTile);
    out = align(probs + sizeof(float) * kQueryTile * kKeyTile);
    per_warp = align(out + sizeof(float) * kQueryTile * dvp);
    total = warp0 + split.warps * per_warp;
  }
};

// scores [16, kKeyTile] (float, row stride kKeyTile) = q [16, dp] (row stride dp) x kt [dp, kKeyTile]
// (`k_rows`: the tile holds K [kKeyTile, dp], row-major).
__device__ void warp_scores(const float* q, const float* kt, int dp, bool k_rows, float* scores) {
  const int lane = threadIdx.x % 32;
  // Kt (d, c) in the tile: d * kKeyTile + c, or (K's rows) c * dp + d.
  const int64_t d_step = k_rows ? 1 : kKeyTile, c_step = k_rows ? dp : 1;
  float acc[kQueryTile][2] = {};
  for (int d = 0; d < dp; ++d) {
    const float k0 = kt[d * d_step + lane * c_step], k1 = kt[d * d_step + (lane + 32) * c_step];
#pragma unroll
    for (int r = 0; r < kQueryTile; ++r) {
      const float qv = q[r * dp + d];
      acc[r][0] = fmaf(qv, k0, acc[r][0]);
      acc[r][1] = fmaf(qv, k1, acc[r][1]);
    }
  }
#pragma unroll
  for (int r = 0; r < kQueryTile; ++r) {
    scores[r * kKeyTile + lane] = acc[r][0];
    scores[r * kKeyTile + lane + 32] = acc[r][1];
  }
}

// out [16, dvp] (float, row stride dvp) += p [16, kKeyTile] (row stride kKeyTile) x v [kKeyTile, dvp].
__device__ void warp_accumulate(const float* p, const float* v, int dvp, float* out) {
  const int lane = threadIdx.x % 32;
  for (int c0 = 0; c0 < dvp; c0 += 64) {
    const int c[2] = {c0 + lane, c0 + 32 + lane};
    float acc[kQueryTile][2];
#pragma unroll
    for (int r = 0; r < kQueryTile; ++r)
      for (int h = 0; h < 2; ++h) acc[r][h] = c[h] < dvp ? out[r * dvp + c[h]] : 0.f;
    for (int k = 0; k < kKeyTile; ++k) {
      const float v0 = c[0] < dvp ? v[k * dvp + c[0]] : 0.f, v1 = c[1] < dvp ? v[k * dvp + c[1]] : 0.f;
#pragma unroll
      for (int r = 0; r < kQueryTile; ++r) {
        const float pv = p[r * kKeyTile + k];
        acc[r][0] = fmaf(pv, v0, acc[r][0]);
        acc[r][1] = fmaf(pv, v1, acc[r][1]);
      }
    }
#pragma unroll
    for (int r = 0; r < kQueryTile; ++r)
      for (int h = 0; h < 2; ++h)
        if (c[h] < dvp) out[r * dvp + c[h]] = acc[r][h];
  }
}

// One key tile's step of the online softmax for a warp's 16 queries: lane 2r + h takes half h of
// query r's kKeyTile scores (columns rotated by row so the lanes hit 32 different banks), scales
// them and adds the mask, and with its partner lane finds the tile's maximum and sum; it writes the
// probabilities for the second product and rescales its half of the row's output so far.
// row_max and row_sum are row r's running maximum and sum (the same in both lanes of a row).
template <typename M>
__device__ void online_softmax_step(const float* scores, float* probs, float* out, int dvp, int64_t s0, int64_t s,
                                    const M* mask, int64_t mask_row, int64_t mask_col, int valid_rows,
                                    float score_factor, float& row_max, float& row_sum) {
  constexpr int kHalf = kKeyTile / 2;
  const int lane = threadIdx.x % 32, r = lane >> 1, h = lane & 1;
  float x[kHalf];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const int c = h * kHalf + ((i + r + h * (kHalf / 2)) & (kHalf - 1));
    float value = -INFINITY;
    if (s0 + c < s) {
      value = scores[r * kKeyTile + c] * score_factor;
      if (mask && r < valid_rows) value += to_float(mask[r * mask_row + (s0 + c) * mask_col]);
    }
    x[i] = value;
    m = fmaxf(m, value);
  }
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  const float m_new = fmaxf(row_max, m);
  // A row whose scores are all -inf so far keeps nothing: exponents from 0, not from -inf.
  const float m_safe = m_new == -INFINITY ? 0.f : m_new;
  const float alpha = expf(row_max - m_safe);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const int c = h * kHalf + ((i + r + h * (kHalf / 2)) & (kHalf - 1));
    const float p = expf(x[i] - m_safe);
    sum += p;
    probs[r * kKeyTile + c] = p;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  row_sum = row_sum * alpha + sum;
  row_max = m_new;
  if (alpha == 1.f) return;
  const int half = dvp / 2;  // dvp is a multiple of 16
  const bool rotate = (half & (half - 1)) == 0;
  for (int j = 0; j < half; ++j) {
    const int c = h * half + (rotate ? (j + r + h * (half / 2)) & (half - 1) : j);
    out[r * dvp + c] *= alpha;
  }
}

template <typename M>
__global__ void __launch_bounds__(kAttentionWarps * 32)
    fused_attention_f32(const float* __restrict__ q, const float* __restrict__ kt, const float* __restrict__ v,
                        const M* __restrict__ mask, float* __restrict__ y, AttentionShape sh, BatchWalk walk,
                        int64_t row_blocks) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpSplit split = split_warps(blockDim.x / 32, sh.s);
  const SharedLayout layout(sh.dp, sh.dvp, split, sh.separate_values);
  const int row_tile = warp / split.key_splits, key_split = warp % split.key_splits;
  const int block_rows = split.row_tiles * kQueryTile;
  const float* qs = reinterpret_cast<const float*>(smem + layout.q) + row_tile * kQueryTile * sh.dp;
  float* maxima = reinterpret_cast<float*>(smem + layout.stats);
  float* sums = maxima + kAttentionWarps * kQueryTile;
  unsigned char* mine = smem + layout.warp0 + warp * layout.per_warp;
  float* keys = reinterpret_cast<float*>(mine + layout.keys);
  float* values = reinterpret_cast<float*>(mine + layout.values);
  float* scores = reinterpret_cast<float*>(mine + layout.scores);
  float* probs = reinterpret_cast<float*>(mine + layout.probs);
  float* out = reinterpret_cast<float*>(mine + layout.out);

  const int b = static_cast<int>(blockIdx.x / static_cast<unsigned>(row_blocks));
  const int64_t block_row0 = static_cast<int64_t>(blockIdx.x % static_cast<unsigned>(row_blocks)) * block_rows;
  const BatchOffsets at = batch_offsets(walk, b);
  const int64_t row0 = block_row0 + row_tile * kQueryTile;
  const float* kb = kt + at.k;
  const float* vb = v + at.v;
  const M* mb = mask ? mask + at.mask + row0 * sh.mask_row : nullptr;
  const int rows = static_cast<int>(max(int64_t{0}, min(static_cast<int64_t>(kQueryTile), sh.l - row0)));

  load_tile(q + at.q + block_row0 * sh.q_row, sh.q_row, block_rows, sh.dp, sh.l - block_row0, sh.d,
            reinterpret_cast<float*>(smem + layout.q), sh.dp, sh.q_factor, threadIdx.x, blockDim.x);
  for (int i = lane; i < kQueryTile * sh.dvp; i += 32) out[i] = 0.f;
  // Lanes 2r and 2r + 1 keep row r's running maximum and sum.
  float row_max = -INFINITY, row_sum = 0.f;
  __syncthreads();  // Q is loaded

  const int64_t first = rows > 0 ? key_split * kKeyTile : sh.s;  // a tile past the queries does nothing
  for (int64_t s0 = first; s0 < sh.s; s0 += split.key_splits * kKeyTile) {
    if (sh.k_rows) load_tile(kb + s0 * sh.k_row, sh.k_row, kKeyTile, sh.dp, sh.s - s0, sh.d, keys, sh.dp, 1.f, lane, 32);
    else load_tile(kb + s0, sh.k_row, sh.dp, kKeyTile, sh.d, sh.s - s0, keys, kKeyTile, 1.f, lane, 32);
    if (sh.separate_values)
      load_tile(vb + s0 * sh.v_row, sh.v_row, kKeyTile, sh.dvp, sh.s - s0, sh.dv, values, sh.dvp, 1.f, lane, 32);
    __syncwarp();
    warp_scores(qs, keys, sh.dp, sh.k_rows, scores);
    __syncwarp();
    online_softmax_step<M>(scores, probs, out, sh.dvp, s0, sh.s, mb, sh.mask_row, sh.mask_col, rows,
                           sh.score_factor, row_max, row_sum);
    if (!sh.separate_values) {
      __syncwarp();  // the key tile is read: the value tile takes its place
      load_tile(vb + s0 * sh.v_row, sh.v_row, kKeyTile, sh.dvp, sh.s - s0, sh.dv, values, sh.dvp, 1.f, lane, 32);
    }
    __syncwarp();
    warp_accumulate(probs, values, sh.dvp, out);
    __syncwarp();
  }
  if ((lane & 1) == 0) {
    maxima[warp * kQueryTile + lane / 2] = row_max;
    sums[warp * kQueryTile + lane / 2] = row_sum;
  }
  __syncthreads();
  const auto partial = [&](int w) {
    return reinterpret_cast<const float*>(smem + layout.warp0 + w * layout.per_warp + layout.out);
  };
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(block_rows), sh.l - block_row0));
  merge_and_store(maxima, sums, partial, sh.dvp, split, valid_rows, static_cast<int>(sh.dv),
                  y + at.y + block_row0 * sh.y_row, sh.y_row);
}

const edgert_tensor* mask_input(const edgert_node& node, const edgert_tensor* in) {
  return node.num_inputs > 3 && is_present(in[3]) ? &in[3] : nullptr;
}

// A launch's warps, their split of the work and shared memory: four warps where their shared
// memory fits every board (float32: each loading its value tile beside its key tile where that
// fits too), else fewer warps or (float32) one place for both tiles. `bytes` is above
// kMaxSharedBytes where not even one warp fits.
struct LaunchPlan {
  WarpSplit split;
  bool separate_values;
  size_t bytes;
};

LaunchPlan plan_launch(edgert_dtype dtype, int64_t d, int64_t dv, int64_t s, bool k_rows) {
  const int dp = static_cast<int>((d + 15) / 16 * 16), dvp = static_cast<int>((dv + 15) / 16 * 16);
  LaunchPlan plan{};
  for (int warps = kAttentionWarps; warps >= 1; warps /= 2)
    for (bool separate : {true, false}) {
      plan = {split_warps(warps, s), separate, 0};
      plan.bytes = dtype == EDGERT_DTYPE_FLOAT16 ? fused_attention_f16_shared_bytes(dp, plan.split, k_rows)
                                                 : SharedLayout(dp, dvp, plan.split, separate).total;
      if (plan.bytes <= kMaxSharedBytes) return plan;
    }
  return plan;
}

bool keys_as_rows(const edgert_node& node) { return Attributes(&node).get_int("keys_transposed", 1) == 0; }

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
  return plan_launch(dtype, d, dv, 1, keys_as_rows(*node)).bytes <= kMaxSharedBytes;
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
    const plugin::AttentionOperands ops = plugin::attention_operands(node, in);
    shape_.k_rows = !ops.keys_transposed;
    shape_.l = ops.l;
    shape_.d = ops.d;
    shape_.s = ops.s;
    shape_.dv = ops.dv;
    shape_.q_row = ops.q.row_stride();
    shape_.k_row = ops.keys.row_stride();
    shape_.v_row = ops.v.row_stride();
    shape_.y_row = ops.y.row_stride();
    offsets_ = {ops.q.offset, ops.keys.offset, ops.v.offset};
    plan_ = plan_launch(dtype_, shape_.d, shape_.dv, shape_.s, shape_.k_rows);
    shape_.separate_values = plan_.separate_values;
    if (shape_.d > kMaxHeadDim || shape_.dv > kMaxHeadDim || plan_.bytes > kMaxSharedBytes)
      fail(EDGERT_ERR_UNSUPPORTED, "head sizes D %lld and Dv %lld in %s: more shared memory than the GPU kernel takes",
           static_cast<long long>(shape_.d), static_cast<long long>(shape_.dv), edgert_dtype_name(dtype_));
    shape_.dp = static_cast<int>((shape_.d + 15) / 16 * 16);
    shape_.dvp = static_cast<int>((shape_.dv + 15) / 16 * 16);

    const Shape& batch = ops.batch;
    const size_t rank = batch.size();
    if (rank > static_cast<size_t>(kMaxBatchRank))
      fail(EDGERT_ERR_UNSUPPORTED, "%zu batch dims: the GPU kernel takes up to %d", rank, kMaxBatchRank);
    walk_ = BatchWalk{};
    walk_.rank = static_cast<int>(rank);
    batches_ = numel(batch);
    for (size_t i = 0; i < rank; ++i) {
      walk_.dims[i] = batch[i];
      walk_.q[i] = ops.q.batch[i];
      walk_.k[i] = ops.keys.batch[i];
      walk_.v[i] = ops.v.batch[i];
      walk_.y[i] = ops.y.batch[i];
    }

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
    shape_.q_factor = a.get_float("q_scale", 1.0f) / a.get_float("q_divisor", 1.0f);
    shape_.score_factor = a.get_float("score_scale", 1.0f) / a.get_float("score_divisor", 1.0f);
    set_output(out[0], dtype_, ops.y_shape);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (batches_ * shape_.l * shape_.dv == 0) return;
    const void* mask = mask_dtype_ == EDGERT_DTYPE_UNDEFINED ? nullptr : mask_input(node, in)->data;
    if (dtype_ == EDGERT_DTYPE_FLOAT16) {
      if (mask_dtype_ == EDGERT_DTYPE_FLOAT32) run_f16(in, static_cast<const float*>(mask), out[0].data, stream);
      else run_f16(in, static_cast<const __half*>(mask), out[0].data, stream);
    } else {
      if (mask_dtype_ == EDGERT_DTYPE_FLOAT16) run_f32(in, static_cast<const __half*>(mask), out[0].data, stream);
      else run_f32(in, static_cast<const float*>(mask), out[0].data, stream);
    }
  }

 private:
  int64_t row_blocks() const {
    const int64_t block_rows = static_cast<int64_t>(plan_.split.row_tiles) * kQueryTile;
    return (shape_.l + block_rows - 1) / block_rows;
  }

  // Input i where its operand starts (q_select, k_select, v_select: one index of an axis).
  template <typename T>
  const T* operand(const edgert_tensor* in, int i) const {
    return static_cast<const T*>(in[i].data) + offsets_[static_cast<size_t>(i)];
  }

  template <typename M>
  void run_f16(const edgert_tensor* in, const M* mask, void* y, cudaStream_t stream) const {
    launch_fused_attention_f16(operand<__half>(in, 0), operand<__half>(in, 1), operand<__half>(in, 2), mask, static_cast<__half*>(y), shape_, walk_,
                               plan_.split, plan_.bytes, row_blocks(), batches_, stream);
  }

  template <typename M>
  void run_f32(const edgert_tensor* in, const M* mask, void* y, cudaStream_t stream) const {
    static std::atomic<size_t> granted{48 * 1024};
    grant_shared_memory(fused_attention_f32<M>, plan_.bytes, granted);
    fused_attention_f32<M><<<attention_blocks(row_blocks(), batches_), plan_.split.warps * 32, plan_.bytes, stream>>>(
        operand<float>(in, 0), operand<float>(in, 1), operand<float>(in, 2), mask, static_cast<float*>(y), shape_, walk_, row_blocks());
    check_launch("fused_attention_f32");
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32, mask_dtype_ = EDGERT_DTYPE_UNDEFINED;
  AttentionShape shape_{};
  LaunchPlan plan_{};
  BatchWalk walk_;
  std::array<int64_t, 3> offsets_{};  // elements from Q's, the keys' and V's inputs to their operands
  int64_t batches_ = 0;
};

}  // namespace

void register_fused_attention_kernels(KernelRegistry& r) {
  r.add_in_domain<FusedAttentionOp>("edgert", "FusedAttention", "cuda-fused-attention", fused_attention_supports);
}

}  // namespace edgert::cuda
