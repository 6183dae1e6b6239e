// Reductions on the GPU: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceL2, ReduceSumSquare and ReduceLogSum over any set of axes, float32 and float16,
// accumulating in float. Axes come from the attribute, or from input 1 (read on the host) from
// opset 13 for ReduceSum and 18 for the others; keepdims and noop_with_empty_axes as ONNX says.
// Max and Min propagate NaN (numpy, the CPU plugin).
//
// The output is walked in its storage order with one input offset per kept position; each output
// reduces over the reduced axes (walked in the input's storage order), by one of four kernels:
//   columns  when consecutive outputs read consecutive inputs (the innermost kept axis is the
//            input's innermost: channels-last reductions over H and W) and there are at least
//            4096 outputs: a block takes 32 outputs, one per lane, and its 8 warps (32 when
//            outputs are few) split the reduction;
//   thread   up to kThreadLimit elements per output: one thread each;
//   warp     up to kWarpLimit: one warp per output, lanes along the reduction;
//   block    above: one block of 256 threads per output.
// With layout NHWC a rank-4 input is [N, H, W, C] in memory, and so is a rank-4 output
// (keepdims); an output of lower rank is row-major in its logical dims.
//
// ArgMax and ArgMin (opset 11-13) take the same plan with one reduced axis and write int64
// indices; their kernels are described where they begin below.
#include <string>

#include "activation.cuh"
#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"
#include "layout.h"
#include "reduce.h"

namespace edgert::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kThreadLimit = 16;
constexpr int64_t kWarpLimit = 4096;

__device__ __forceinline__ float initial(ReduceKind k) {
  switch (k) {
    case ReduceKind::Max: return -INFINITY;
    case ReduceKind::Min: return INFINITY;
    case ReduceKind::Prod: return 1.f;
    default: return 0.f;
  }
}

// Folds value v (or another partial result, `partial`) into acc.
__device__ __forceinline__ float combine(ReduceKind k, float acc, float v, bool partial) {
  switch (k) {
    case ReduceKind::Max: return isnan(acc) || isnan(v) ? NAN : fmaxf(acc, v);
    case ReduceKind::Min: return isnan(acc) || isnan(v) ? NAN : fminf(acc, v);
    case ReduceKind::Prod: return acc * v;
    case ReduceKind::L1: return acc + (partial ? v : fabsf(v));
    case ReduceKind::L2:
    case ReduceKind::SumSquare: return acc + (partial ? v : v * v);
    default: return acc + v;
  }
}

__device__ __forceinline__ float finish(ReduceKind k, float acc, int64_t count) {
  switch (k) {
    case ReduceKind::Mean: return acc / static_cast<float>(count);
    case ReduceKind::L2: return sqrtf(acc);
    case ReduceKind::LogSum: return logf(acc);
    default: return acc;
  }
}

// Offset of `index` over dims with strides, divided in I (uint32_t below 2^31 elements).
template <typename I>
__device__ __forceinline__ int64_t offset_of(I index, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t offset = 0;
  for (int a = rank - 1; a >= 0; --a) {
    const I d = static_cast<I>(dims[a]);
    offset += static_cast<int64_t>(index % d) * strides[a];
    index /= d;
  }
  return offset;
}

// Input offset of element j of an output's reduction, in 32-bit arithmetic when the input allows.
__device__ __forceinline__ int64_t reduced_offset(const ReducePlan& p, int64_t j, bool small) {
  return small ? offset_of(static_cast<uint32_t>(j), p.reduced_rank, p.reduced_dims, p.reduced_strides)
               : offset_of(j, p.reduced_rank, p.reduced_dims, p.reduced_strides);
}

template <typename T>
__global__ void reduce_per_thread(const T* __restrict__ x, T* __restrict__ y, ReducePlan p) {
  const bool small = p.count < (int64_t{1} << 31);
  grid_stride(p.outputs, [&](auto o) {
    const int64_t base = offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc = initial(p.kind);
    for (int64_t j = 0; j < p.count; ++j) acc = combine(p.kind, acc, to_float(x[base + reduced_offset(p, j, small)]), false);
    y[o] = from_float<T>(finish(p.kind, acc, p.count));
  });
}

template <typename T>
__global__ void __launch_bounds__(kThreads) reduce_per_block(const T* __restrict__ x, T* __restrict__ y, ReducePlan p) {
  __shared__ float scratch[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool small = p.count < (int64_t{1} << 31);
  for (int64_t o = blockIdx.x; o < p.outputs; o += gridDim.x) {
    const int64_t base = offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc = initial(p.kind);
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < p.count; j += blockDim.x)
      acc = combine(p.kind, acc, to_float(x[base + reduced_offset(p, j, small)]), false);
    for (int offset = 16; offset > 0; offset /= 2)
      acc = combine(p.kind, acc, __shfl_xor_sync(0xffffffffu, acc, offset), true);
    __syncthreads();  // the previous output's partials have been read
    if (lane == 0) scratch[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < static_cast<int>(kThreads / 32) ? scratch[lane] : initial(p.kind);
      for (int offset = 16; offset > 0; offset /= 2)
        acc = combine(p.kind, acc, __shfl_xor_sync(0xffffffffu, acc, offset), true);
      if (lane == 0) y[o] = from_float<T>(finish(p.kind, acc, p.count));
    }
  }
}

template <typename T>
__global__ void reduce_per_warp(const T* __restrict__ x, T* __restrict__ y, ReducePlan p) {
  const bool small = p.count < (int64_t{1} << 31);
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; o < p.outputs; o += warps) {
    const int64_t base = offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc = initial(p.kind);
#pragma unroll 4
    for (int64_t j = lane; j < p.count; j += 32)
      acc = combine(p.kind, acc, to_float(x[base + reduced_offset(p, j, small)]), false);
    for (int offset = 16; offset > 0; offset /= 2)
      acc = combine(p.kind, acc, __shfl_xor_sync(0xffffffffu, acc, offset), true);
    if (lane == 0) y[o] = from_float<T>(finish(p.kind, acc, p.count));
  }
}

// 32 consecutive outputs per block, one per lane; warp w of W reduces elements w, w + W, ...
// (W = blockDim.x / 32, up to 32: few outputs take more warps each, so the grid still fills).
template <typename T>
__global__ void __launch_bounds__(1024) reduce_columns(const T* __restrict__ x, T* __restrict__ y, ReducePlan p) {
  __shared__ float partial[32][33];
  const bool small = p.count < (int64_t{1} << 31);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = static_cast<int>(blockDim.x / 32);
  for (int64_t first = blockIdx.x * int64_t{32}; first < p.outputs; first += gridDim.x * int64_t{32}) {
    const int64_t o = first + lane;
    float acc = initial(p.kind);
    if (o < p.outputs) {
      const int64_t base = offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
#pragma unroll 4
      for (int64_t j = warp; j < p.count; j += warps)
        acc = combine(p.kind, acc, to_float(x[base + reduced_offset(p, j, small)]), false);
    }
    partial[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && o < p.outputs) {
      for (int w = 1; w < warps; ++w) acc = combine(p.kind, acc, partial[w][lane], true);
      y[o] = from_float<T>(finish(p.kind, acc, p.count));
    }
    __syncthreads();
  }
}

template <typename T>
void run_plan(const void* x, void* y, const ReducePlan& p, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  // Columns need enough groups of 32 outputs to fill the GPU; with fewer, a warp or block per
  // output (strided reads, but many more of them in flight) was measured faster.
  const int64_t groups = (p.outputs + 31) / 32;
  const bool columns = p.kept_rank > 0 && p.kept_strides[p.kept_rank - 1] == 1 && p.count > 1 && groups >= 128;
  if (columns) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(groups, 65535 * 8));
    const unsigned threads = groups < 512 ? 1024 : kThreads;  // more warps each while the grid is small
    reduce_columns<T><<<blocks, threads, 0, stream>>>(xt, yt, p);
    return check_launch("reduce_columns");
  }
  if (p.count <= kThreadLimit) {
    reduce_per_thread<T><<<blocks_for(p.outputs, kThreads), kThreads, 0, stream>>>(xt, yt, p);
    return check_launch("reduce_per_thread");
  }
  if (p.count <= kWarpLimit) {
    reduce_per_warp<T><<<blocks_for(p.outputs * 32, kThreads), kThreads, 0, stream>>>(xt, yt, p);
    return check_launch("reduce_per_warp");
  }
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.outputs, 65535 * 8));
  reduce_per_block<T><<<blocks, kThreads, 0, stream>>>(xt, yt, p);
  check_launch("reduce_per_block");
}

ReduceKind reduce_kind(const std::string& op) {
  if (op == "ReduceSum") return ReduceKind::Sum;
  if (op == "ReduceMean") return ReduceKind::Mean;
  if (op == "ReduceMax") return ReduceKind::Max;
  if (op == "ReduceMin") return ReduceKind::Min;
  if (op == "ReduceProd") return ReduceKind::Prod;
  if (op == "ReduceL1") return ReduceKind::L1;
  if (op == "ReduceL2") return ReduceKind::L2;
  if (op == "ReduceSumSquare") return ReduceKind::SumSquare;
  if (op == "ReduceLogSum") return ReduceKind::LogSum;
  fail(EDGERT_ERR_UNSUPPORTED, "'%s' is not a reduction of this kernel", op.c_str());
}

// Axes come from input 1 from opset 13 (ReduceSum) or 18 (the others).
bool axes_from_input(const edgert_node& node) {
  return (std::string(node.op_type) == "ReduceSum" && node.opset >= 13) || node.opset >= 18;
}

int32_t reduce_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[0].dtype)) return 0;
  return in[0].rank <= EDGERT_MAX_RANK;
}

class ReduceOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "data is %s; the GPU kernel takes float32 and float16", edgert_dtype_name(in[0].dtype));
    dtype_ = in[0].dtype;
    const bool keepdims = attrs.get_int("keepdims", 1) != 0;
    const bool noop_with_empty_axes = attrs.get_int("noop_with_empty_axes", 0) != 0;
    std::vector<int64_t> axes;
    if (!axes_from_input(node)) {
      axes = attrs.get_ints("axes");
    } else if (node.num_inputs > 1 && is_present(in[1])) {
      info.data_dependent = 1;  // the output shape follows the values of axes
      axes = read_ints(in[1], "axes");
    }
    const int rank = in[0].rank;
    bool reduced[EDGERT_MAX_RANK] = {};
    identity_ = axes.empty() && noop_with_empty_axes;
    if (axes.empty()) {
      if (!identity_)
        for (int i = 0; i < rank; ++i) reduced[i] = true;
    } else {
      for (int64_t a : axes) reduced[normalize_axis(a, rank, "axes entry")] = true;
    }
    const Shape in_shape = shape_of(in[0]);
    Shape out_shape;
    std::vector<int64_t> out_axis_of;  // output logical axis -> input logical axis
    for (int i = 0; i < rank; ++i) {
      if (reduced[i] && !keepdims) continue;
      out_shape.push_back(reduced[i] ? 1 : in_shape[static_cast<size_t>(i)]);
      out_axis_of.push_back(i);
    }
    if (identity_) out_shape = in_shape;
    set_output(out[0], dtype_, out_shape);
    bytes_ = static_cast<size_t>(numel(in_shape)) * edgert_dtype_size(dtype_);
    if (identity_) return;

    const bool nhwc = channels_last(node);
    const std::vector<int64_t> in_strides = storage_strides(in_shape, nhwc);
    ReducePlan p;
    p.kind = reduce_kind(node.op_type);
    const int64_t out_rank = static_cast<int64_t>(out_shape.size());
    for (int64_t pos = 0; pos < out_rank; ++pos) {
      const int64_t axis = out_axis_of[static_cast<size_t>(logical_axis(pos, out_rank, nhwc))];
      if (reduced[axis] || in_shape[static_cast<size_t>(axis)] == 1) continue;  // adds nothing to offsets
      p.kept_dims[p.kept_rank] = in_shape[static_cast<size_t>(axis)];
      p.kept_strides[p.kept_rank++] = in_strides[static_cast<size_t>(axis)];
    }
    for (int pos = 0; pos < rank; ++pos) {
      const int64_t axis = logical_axis(pos, rank, nhwc);
      if (!reduced[axis] || in_shape[static_cast<size_t>(axis)] == 1) continue;
      p.reduced_dims[p.reduced_rank] = in_shape[static_cast<size_t>(axis)];
      p.reduced_strides[p.reduced_rank++] = in_strides[static_cast<size_t>(axis)];
    }
    p.outputs = numel(out_shape);
    p.count = 1;
    for (int a = 0; a < p.reduced_rank; ++a) p.count *= p.reduced_dims[a];
    plan_ = p;
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (identity_) {
      if (bytes_ && out[0].data != in[0].data)
        check_cuda(cudaMemcpyAsync(out[0].data, in[0].data, bytes_, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
      return;
    }
    launch_reduce(in[0].data, out[0].data, dtype_, plan_, stream);
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  bool identity_ = false;
  size_t bytes_ = 0;
  ReducePlan plan_;
};

// ArgMax and ArgMin: the plan's one reduced axis, walked by one of three kernels:
//   thread  rows up to kArgThreadLimit, or strided rows (the axis is not innermost in storage)
//           with at least kArgManyOutputs of them: one thread per output walks the axis with
//           its stride while neighbouring threads read neighbouring elements (coalesced: a
//           segmenter's class map, ArgMax over axis 1 of [N, C, H, W]);
//   warp    contiguous rows up to kArgWarpLimit: one warp per output, lanes along the row;
//   block   above (a classifier's 1000 logits): one block of kThreads per output.
// Every thread scans its elements in index order as the CPU reference does; the partial results
// then combine in a total order (ranks_before), so the grouping never changes the answer.
constexpr int64_t kArgThreadLimit = 32;
constexpr int64_t kArgWarpLimit = 256;
constexpr int64_t kArgManyOutputs = 2048;

struct ArgCandidate {
  float value;
  int64_t index;  // along the axis; -1: no element seen yet
};

// Folds element j, later than every element `best` has seen, into it: the CPU reference's scan.
// The first NaN wins and stays (numpy); equal values keep the first index unless select_last.
__device__ __forceinline__ void fold(ArgCandidate& best, float v, int64_t j, bool arg_max, bool select_last) {
  if (best.index >= 0 && isnan(best.value)) return;
  if (best.index < 0 || isnan(v) || (arg_max ? v > best.value : v < best.value) || (select_last && v == best.value))
    best = {v, j};
}

// Whether candidate a, from any part of the axis, ranks before b: a NaN before every number
// and the first NaN before later ones, then the larger (smaller) value, then the first index
// (the last with select_last). fold's answer for the whole axis is the candidate that ranks first.
__device__ __forceinline__ bool ranks_before(ArgCandidate a, ArgCandidate b, bool arg_max, bool select_last) {
  if (a.index < 0 || b.index < 0) return a.index >= 0 && b.index < 0;
  const bool a_nan = isnan(a.value), b_nan = isnan(b.value);
  if (a_nan || b_nan) return a_nan && b_nan ? a.index < b.index : a_nan;
  if (a.value != b.value) return arg_max ? a.value > b.value : a.value < b.value;
  return select_last ? a.index > b.index : a.index < b.index;
}

// The warp's first-ranking candidate, in every lane.
__device__ __forceinline__ ArgCandidate warp_best(ArgCandidate c, bool arg_max, bool select_last) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const long long index = __shfl_xor_sync(0xffffffffu, static_cast<long long>(c.index), offset);
    const ArgCandidate other{__shfl_xor_sync(0xffffffffu, c.value, offset), static_cast<int64_t>(index)};
    if (ranks_before(other, c, arg_max, select_last)) c = other;
  }
  return c;
}

__device__ __forceinline__ int64_t axis_stride(const ReducePlan& p) {
  return p.reduced_rank ? p.reduced_strides[0] : 0;
}

template <typename T>
__global__ void arg_per_thread(const T* __restrict__ x, int64_t* __restrict__ y, ReducePlan p, bool arg_max,
                               bool select_last) {
  const int64_t stride = axis_stride(p);
  grid_stride(p.outputs, [&](auto o) {
    const T* row = x + offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
    ArgCandidate best{0.f, -1};
#pragma unroll 4
    for (int64_t j = 0; j < p.count; ++j) fold(best, to_float(row[j * stride]), j, arg_max, select_last);
    y[o] = best.index;
  });
}

template <typename T>
__global__ void arg_per_warp(const T* __restrict__ x, int64_t* __restrict__ y, ReducePlan p, bool arg_max,
                             bool select_last) {
  const int64_t stride = axis_stride(p);
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; o < p.outputs; o += warps) {
    const T* row = x + offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
    ArgCandidate best{0.f, -1};
#pragma unroll 4
    for (int64_t j = lane; j < p.count; j += 32) fold(best, to_float(row[j * stride]), j, arg_max, select_last);
    best = warp_best(best, arg_max, select_last);
    if (lane == 0) y[o] = best.index;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    arg_per_block(const T* __restrict__ x, int64_t* __restrict__ y, ReducePlan p, bool arg_max, bool select_last) {
  __shared__ float values[kThreads / 32];
  __shared__ int64_t indices[kThreads / 32];
  const int64_t stride = axis_stride(p);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t o = blockIdx.x; o < p.outputs; o += gridDim.x) {
    const T* row = x + offset_of(o, p.kept_rank, p.kept_dims, p.kept_strides);
    ArgCandidate best{0.f, -1};
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < p.count; j += blockDim.x)
      fold(best, to_float(row[j * stride]), j, arg_max, select_last);
    best = warp_best(best, arg_max, select_last);
    __syncthreads();  // the previous output's partials have been read
    if (lane == 0) {
      values[warp] = best.value;
      indices[warp] = best.index;
    }
    __syncthreads();
    if (warp == 0) {
      best = lane < static_cast<int>(kThreads / 32) ? ArgCandidate{values[lane], indices[lane]} : ArgCandidate{0.f, -1};
      best = warp_best(best, arg_max, select_last);
      if (lane == 0) y[o] = best.index;
    }
  }
}

template <typename T>
void run_arg(const void* x, int64_t* y, const ReducePlan& p, bool arg_max, bool select_last, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const bool contiguous = p.reduced_rank == 1 && p.reduced_strides[0] == 1;
  if (p.count <= kArgThreadLimit || (!contiguous && p.outputs >= kArgManyOutputs)) {
    arg_per_thread<T><<<blocks_for(p.outputs, kThreads), kThreads, 0, stream>>>(xt, y, p, arg_max, select_last);
    return check_launch("arg_per_thread");
  }
  if (p.count <= kArgWarpLimit) {
    arg_per_warp<T><<<blocks_for(p.outputs * 32, kThreads), kThreads, 0, stream>>>(xt, y, p, arg_max, select_last);
    return check_launch("arg_per_warp");
  }
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.outputs, 65535 * 8));
  arg_per_block<T><<<blocks, kThreads, 0, stream>>>(xt, y, p, arg_max, select_last);
  check_launch("arg_per_block");
}

// The int64 output is not an activation the builder's layout pass stores channels-last (it
// does so for float rank-4 values only), so it is row-major. Under layout NHWC the kernel takes
// only nodes whose row-major output has the channels-last bytes too: keepdims 0 (rank 3) or the
// reduced axis C ([N, 1, H, W]); the builder reformats the input of the others to NCHW.
bool arg_output_layout_ok(int64_t rank, bool nhwc, bool keepdims, int64_t axis) {
  return !stored_nhwc(rank, nhwc) || !keepdims || axis == 1 || axis == -3;
}

int32_t arg_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[0].dtype)) return 0;
  if (in[0].rank > EDGERT_MAX_RANK) return 0;
  const Attributes attrs(node);
  return arg_output_layout_ok(in[0].rank, channels_last(*node), attrs.get_int("keepdims", 1) != 0,
                              attrs.get_int("axis", 0));
}

class ArgOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const Attributes attrs(&node);
    if (!is_float(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "data is %s; the GPU kernel takes float32 and float16", edgert_dtype_name(in[0].dtype));
    dtype_ = in[0].dtype;
    arg_max_ = std::string(node.op_type) == "ArgMax";
    select_last_ = attrs.get_int("select_last_index", 0) != 0;
    const bool keepdims = attrs.get_int("keepdims", 1) != 0;
    const int64_t rank = in[0].rank;
    const int64_t axis = normalize_axis(attrs.get_int("axis", 0), rank);
    const bool nhwc = channels_last(node);
    if (!arg_output_layout_ok(rank, nhwc, keepdims, axis))
      fail(EDGERT_ERR_UNSUPPORTED,
           "layout NHWC with keepdims over axis %lld: the int64 output is row-major, so the GPU kernel takes NHWC "
           "only for keepdims 0 or axis 1 (reformat the input to NCHW)",
           static_cast<long long>(axis));
    const Shape in_shape = shape_of(in[0]);
    const std::vector<int64_t> strides = storage_strides(in_shape, nhwc);
    // Kept axes in the output's row-major order, neighbours that are contiguous in the input merged.
    ReducePlan p;
    p.outputs = 1;
    for (int64_t a = 0; a < rank; ++a) {
      const int64_t dim = in_shape[static_cast<size_t>(a)], stride = strides[static_cast<size_t>(a)];
      if (a == axis) continue;
      p.outputs *= dim;
      if (dim == 1) continue;  // adds nothing to offsets
      if (p.kept_rank > 0 && p.kept_strides[p.kept_rank - 1] == dim * stride) {
        p.kept_dims[p.kept_rank - 1] *= dim;
        p.kept_strides[p.kept_rank - 1] = stride;
        continue;
      }
      p.kept_dims[p.kept_rank] = dim;
      p.kept_strides[p.kept_rank++] = stride;
    }
    p.count = in_shape[static_cast<size_t>(axis)];
    if (p.count == 0 && p.outputs > 0)
      fail(EDGERT_ERR_SHAPE, "cannot take an arg%s over an empty axis %lld", arg_max_ ? "max" : "min",
           static_cast<long long>(axis));
    if (p.count > 1) {
      p.reduced_dims[0] = p.count;
      p.reduced_strides[0] = strides[static_cast<size_t>(axis)];
      p.reduced_rank = 1;
    }
    plan_ = p;
    Shape out_shape = in_shape;
    if (keepdims) out_shape[static_cast<size_t>(axis)] = 1;
    else out_shape.erase(out_shape.begin() + axis);
    set_output(out[0], EDGERT_DTYPE_INT64, out_shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (plan_.outputs == 0) return;
    int64_t* y = static_cast<int64_t*>(out[0].data);
    if (dtype_ == EDGERT_DTYPE_FLOAT16) run_arg<__half>(in[0].data, y, plan_, arg_max_, select_last_, stream);
    else run_arg<float>(in[0].data, y, plan_, arg_max_, select_last_, stream);
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  bool arg_max_ = true, select_last_ = false;
  ReducePlan plan_;
};

}  // namespace

void launch_reduce(const void* x, void* y, edgert_dtype dtype, const ReducePlan& plan, cudaStream_t stream) {
  if (plan.outputs == 0) return;
  if (dtype == EDGERT_DTYPE_FLOAT16) run_plan<__half>(x, y, plan, stream);
  else if (dtype == EDGERT_DTYPE_FLOAT32) run_plan<float>(x, y, plan, stream);
  else fail(EDGERT_ERR_UNSUPPORTED, "a reduction of %s tensors (float32 and float16 only)", edgert_dtype_name(dtype));
}

void register_reduce_kernels(KernelRegistry& r) {
  static const char* const kReductions[][2] = {
      {"ReduceSum", "cuda-reduce-sum"},   {"ReduceMean", "cuda-reduce-mean"},   {"ReduceMax", "cuda-reduce-max"},
      {"ReduceMin", "cuda-reduce-min"},   {"ReduceProd", "cuda-reduce-prod"},   {"ReduceL1", "cuda-reduce-l1"},
      {"ReduceL2", "cuda-reduce-l2"},     {"ReduceSumSquare", "cuda-reduce-sum-square"},
      {"ReduceLogSum", "cuda-reduce-log-sum"}};
  for (const auto& [op, name] : kReductions) r.add<ReduceOp>(op, name, reduce_supports, nullptr, 1u << 1);
  r.add<ArgOp>("ArgMax", "cuda-arg-max", arg_supports);
  r.add<ArgOp>("ArgMin", "cuda-arg-min", arg_supports);
}

}  // namespace edgert::cuda
