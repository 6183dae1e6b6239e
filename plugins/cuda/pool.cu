// Pooling on the GPU: MaxPool, AveragePool (1-, 2- and 3-D windows: ranks 3 to 5), and
// GlobalAveragePool / GlobalMaxPool (any rank >= 3). Semantics are the CPU plugin's
// (plugins/cpu/pool.cpp): MaxPool takes the first non-NaN value of the window and then strictly
// greater ones (NaN never wins; lowest() when the window holds none); AveragePool divides by the
// in-bounds count, or with count_include_pad by the window's positions inside the padded input
// (the ceil_mode overhang past the end padding excluded, as ONNX Runtime). MaxPool's Indices
// output is not produced (supports() refuses it).
//
// With layout NHWC a rank-4 X and Y are [N, H, W, C] in memory: the window kernels then run
// threads along C, so a warp's reads of one tap are contiguous.
#include <cfloat>
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
constexpr int kMaxSpatial = 3;

// A window op's geometry over up to three spatial dims, leading dims 1 for 1-D and 2-D pools
// (so one kernel serves them all).
struct PoolGeometry {
  int64_t n = 0, c = 0;
  int64_t in[kMaxSpatial] = {1, 1, 1}, out[kMaxSpatial] = {1, 1, 1};
  int64_t kernel[kMaxSpatial] = {1, 1, 1}, stride[kMaxSpatial] = {1, 1, 1}, dilation[kMaxSpatial] = {1, 1, 1};
  int64_t pad_begin[kMaxSpatial] = {0, 0, 0}, pad_end[kMaxSpatial] = {0, 0, 0};
  bool channels_last = false;  // rank 4 only: [N, H, W, C]
  bool max = true;
  bool count_include_pad = false;
};

std::vector<int64_t> spatial_ints(const Attributes& attrs, const char* name, size_t rank, int64_t fallback) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(rank, fallback));
  if (v.size() != rank)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' has %zu values, expected %zu (one per spatial dim)", name,
         v.size(), rank);
  return v;
}

// kernel_shape, strides, dilations, pads, auto_pad and ceil_mode as the CPU plugin's
// forward_geometry (plugins/cpu/conv.cpp) reads them.
PoolGeometry pool_geometry(const edgert_node& node, const edgert_tensor& x) {
  const Attributes attrs(&node);
  if (x.rank < 3 || x.rank > 2 + kMaxSpatial)
    fail(EDGERT_ERR_UNSUPPORTED, "X has rank %d; the GPU pools take ranks 3 to 5", x.rank);
  const size_t r = static_cast<size_t>(x.rank - 2);
  if (!attrs.has("kernel_shape")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'kernel_shape' is required");
  const std::vector<int64_t> kernel = attrs.get_ints("kernel_shape");
  if (kernel.size() != r)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "kernel_shape has %zu dims, X has %zu spatial dims", kernel.size(), r);
  const std::vector<int64_t> strides = spatial_ints(attrs, "strides", r, 1);
  const std::vector<int64_t> dilations = spatial_ints(attrs, "dilations", r, 1);
  const std::vector<int64_t> pads = attrs.get_ints("pads", std::vector<int64_t>(2 * r, 0));
  if (pads.size() != 2 * r)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'pads' has %zu values, expected %zu", pads.size(), 2 * r);
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    fail(EDGERT_ERR_INVALID_ARGUMENT, "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad.c_str());
  const bool ceil_mode = attrs.get_int("ceil_mode", 0) != 0;

  PoolGeometry g;
  g.n = x.dims[0];
  g.c = x.dims[1];
  const size_t shift = kMaxSpatial - r;  // 1-D and 2-D pools fill the trailing spatial slots
  for (size_t i = 0; i < r; ++i) {
    const size_t d = shift + i;
    if (strides[i] < 1 || dilations[i] < 1 || kernel[i] < 1)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "spatial dim %zu: kernel %lld, stride %lld, dilation %lld must all be >= 1", i,
           static_cast<long long>(kernel[i]), static_cast<long long>(strides[i]), static_cast<long long>(dilations[i]));
    if (pads[i] < 0 || pads[i + r] < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "pads must not be negative");
    const int64_t in = x.dims[2 + i], s = strides[i];
    const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    g.in[d] = in;
    g.kernel[d] = kernel[i];
    g.stride[d] = s;
    g.dilation[d] = dilations[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[d] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (g.out[d] - 1) * s + extent - in);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[d] = total - g.pad_begin[d];
      continue;
    }
    if (auto_pad == "NOTSET") {
      g.pad_begin[d] = pads[i];
      g.pad_end[d] = pads[i + r];
    }
    const int64_t span = in + g.pad_begin[d] + g.pad_end[d] - extent;
    if (span < 0)
      fail(EDGERT_ERR_SHAPE, "spatial dim %zu: padded input %lld is smaller than the dilated kernel %lld", i,
           static_cast<long long>(in + g.pad_begin[d] + g.pad_end[d]), static_cast<long long>(extent));
    if (ceil_mode && auto_pad == "NOTSET") {
      g.out[d] = (span + s - 1) / s + 1;
      if ((g.out[d] - 1) * s >= in + g.pad_begin[d]) --g.out[d];  // the last window starts inside
    } else {
      g.out[d] = span / s + 1;
    }
  }
  g.channels_last = stored_nhwc(x.rank, channels_last(node));
  return g;
}

// One thread per output element, in storage order.
template <typename T>
__global__ void pool_window(const T* __restrict__ x, T* __restrict__ y, PoolGeometry g, int64_t total) {
  grid_stride(total, [&](auto index) {
    using I = decltype(index);
    int64_t n, c = 0, o[kMaxSpatial];
    I rest = index;
    if (g.channels_last) {
      c = static_cast<int64_t>(rest % static_cast<I>(g.c));
      rest /= static_cast<I>(g.c);
    }
    for (int d = kMaxSpatial - 1; d >= 0; --d) {
      o[d] = static_cast<int64_t>(rest % static_cast<I>(g.out[d]));
      rest /= static_cast<I>(g.out[d]);
    }
    if (!g.channels_last) {
      c = static_cast<int64_t>(rest % static_cast<I>(g.c));
      rest /= static_cast<I>(g.c);
    }
    n = static_cast<int64_t>(rest);
    // Element (z, h, w) of this (n, c) is at base + ((z * in_h) + h) * in_w * col + w * col.
    const int64_t plane = g.in[0] * g.in[1] * g.in[2];
    const int64_t col = g.channels_last ? g.c : 1;
    const int64_t base = g.channels_last ? n * plane * g.c + c : (n * g.c + c) * plane;
    float best = -FLT_MAX, sum = 0.f;
    bool found = false;
    int64_t count = 0;
    for (int64_t kz = 0; kz < g.kernel[0]; ++kz) {
      const int64_t iz = o[0] * g.stride[0] - g.pad_begin[0] + kz * g.dilation[0];
      if (iz < 0 || iz >= g.in[0]) continue;
      for (int64_t ky = 0; ky < g.kernel[1]; ++ky) {
        const int64_t iy = o[1] * g.stride[1] - g.pad_begin[1] + ky * g.dilation[1];
        if (iy < 0 || iy >= g.in[1]) continue;
        for (int64_t kx = 0; kx < g.kernel[2]; ++kx) {
          const int64_t ix = o[2] * g.stride[2] - g.pad_begin[2] + kx * g.dilation[2];
          if (ix < 0 || ix >= g.in[2]) continue;
          const float v = to_float(x[base + ((iz * g.in[1] + iy) * g.in[2] + ix) * col]);
          if (g.max) {
            if (found ? v > best : v == v) {
              best = v;
              found = true;
            }
          } else {
            sum += v;
            ++count;
          }
        }
      }
    }
    float result = best;
    if (!g.max) {
      if (g.count_include_pad) {
        count = 1;
        for (int d = 0; d < kMaxSpatial; ++d) {
          int64_t inside = 0;
          for (int64_t k = 0; k < g.kernel[d]; ++k) {
            const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
            inside += pos >= -g.pad_begin[d] && pos < g.in[d] + g.pad_end[d];
          }
          count *= inside;
        }
      }
      result = count > 0 ? sum / static_cast<float>(count) : 0.f;
    }
    y[index] = from_float<T>(result);
  });
}

// MaxPool also takes uint8 (an INT8 network's pools: the maximum of bytes is a byte).
bool pool_dtype(const edgert_node* node, edgert_dtype dtype) {
  return is_float(dtype) || (dtype == EDGERT_DTYPE_UINT8 && std::string(node->op_type) == "MaxPool");
}

// MaxPool of channels-last uint8 with C a multiple of 4 (an INT8 network's stem pool): a thread
// per 4 channels of an output pixel (many threads: the loads' latency hides behind the others),
// 4-byte loads, bytewise maxima (__vmaxu4). Windows are 2-D (in[0] and out[0] of the geometry
// are 1).
__global__ void max_pool_u8x4(const uint32_t* __restrict__ x, uint32_t* __restrict__ y, PoolGeometry g, int64_t total) {
  grid_stride(total, [&](auto index) {
    using I = decltype(index);
    const I groups = static_cast<I>(g.c / 4);
    const int64_t c4 = static_cast<int64_t>(index % groups);
    I rest = index / groups;
    const int64_t ox = static_cast<int64_t>(rest % static_cast<I>(g.out[2]));
    rest /= static_cast<I>(g.out[2]);
    const int64_t oy = static_cast<int64_t>(rest % static_cast<I>(g.out[1]));
    const int64_t n = static_cast<int64_t>(rest / static_cast<I>(g.out[1]));
    uint32_t best = 0;  // uint8's lowest: what an empty window gives
    for (int64_t ky = 0; ky < g.kernel[1]; ++ky) {
      const int64_t iy = oy * g.stride[1] - g.pad_begin[1] + ky * g.dilation[1];
      if (iy < 0 || iy >= g.in[1]) continue;
      for (int64_t kx = 0; kx < g.kernel[2]; ++kx) {
        const int64_t ix = ox * g.stride[2] - g.pad_begin[2] + kx * g.dilation[2];
        if (ix < 0 || ix >= g.in[2]) continue;
        best = __vmaxu4(best, x[((n * g.in[1] + iy) * g.in[2] + ix) * groups + c4]);
      }
    }
    y[index] = best;
  });
}

int32_t pool_supports(const edgert_node* node, const edgert_tensor* in) {
  if (node->num_outputs != 1) return 0;  // MaxPool's Indices
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !pool_dtype(node, in[0].dtype)) return 0;
  if (in[0].rank >= 0 && (in[0].rank < 3 || in[0].rank > 2 + kMaxSpatial)) return 0;
  const std::vector<int64_t> kernel = Attributes(node).get_ints("kernel_shape");
  return !kernel.empty() && kernel.size() <= static_cast<size_t>(kMaxSpatial);
}

class PoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (!pool_dtype(&node, in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s; the GPU pools take float32 and float16 (MaxPool uint8 too)",
           edgert_dtype_name(in[0].dtype));
    if (node.num_outputs > 1) fail(EDGERT_ERR_UNSUPPORTED, "MaxPool's Indices output is not produced on the GPU");
    dtype_ = in[0].dtype;
    g_ = pool_geometry(node, in[0]);
    g_.max = std::string(node.op_type) == "MaxPool";
    g_.count_include_pad = Attributes(&node).get_int("count_include_pad", 0) != 0;
    Shape shape = {g_.n, g_.c};
    for (int d = kMaxSpatial - (in[0].rank - 2); d < kMaxSpatial; ++d) shape.push_back(g_.out[d]);
    set_output(out[0], dtype_, shape);
    total_ = numel(shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (total_ == 0) return;
    const unsigned blocks = blocks_for(total_, kThreads);
    if (dtype_ == EDGERT_DTYPE_UINT8 && g_.max && g_.channels_last && g_.c % 4 == 0 && g_.in[0] == 1 &&
        reinterpret_cast<uintptr_t>(in[0].data) % 4 == 0 && reinterpret_cast<uintptr_t>(out[0].data) % 4 == 0) {
      const int64_t words = total_ / 4;
      max_pool_u8x4<<<blocks_for(words, kThreads), kThreads, 0, stream>>>(
          static_cast<const uint32_t*>(in[0].data), static_cast<uint32_t*>(out[0].data), g_, words);
    } else if (dtype_ == EDGERT_DTYPE_UINT8)
      pool_window<uint8_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(in[0].data),
                                                            static_cast<uint8_t*>(out[0].data), g_, total_);
    else if (dtype_ == EDGERT_DTYPE_FLOAT16)
      pool_window<__half><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(in[0].data),
                                                          static_cast<__half*>(out[0].data), g_, total_);
    else
      pool_window<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(in[0].data),
                                                         static_cast<float*>(out[0].data), g_, total_);
    check_launch("pool_window");
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  PoolGeometry g_;
  int64_t total_ = 0;
};

int32_t global_pool_supports(const edgert_node*, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && !is_float(in[0].dtype)) return 0;
  return in[0].rank < 0 || in[0].rank >= 3;
}

// Global pools are reductions over the spatial dims (reduce.h): NCHW planes are contiguous
// rows; channels-last, consecutive channels are consecutive outputs (the columns kernel).
class GlobalPoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const edgert_tensor& x = in[0];
    if (!is_float(x.dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s; the GPU pools take float32 and float16", edgert_dtype_name(x.dtype));
    if (x.rank < 3) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected >= 3 ([N, C, spatial...])", x.rank);
    dtype_ = x.dtype;
    const int64_t n = x.dims[0], c = x.dims[1];
    int64_t size = 1;
    for (int i = 2; i < x.rank; ++i) size *= x.dims[i];
    ReducePlan p;
    p.kind = std::string(node.op_type) == "GlobalMaxPool" ? ReduceKind::Max : ReduceKind::Mean;
    if (stored_nhwc(x.rank, channels_last(node))) {
      p.kept_rank = 2;
      p.kept_dims[0] = n;
      p.kept_strides[0] = size * c;
      p.kept_dims[1] = c;
      p.kept_strides[1] = 1;
      p.reduced_strides[0] = c;
    } else {
      p.kept_rank = 1;
      p.kept_dims[0] = n * c;
      p.kept_strides[0] = size;
      p.reduced_strides[0] = 1;
    }
    p.reduced_rank = 1;
    p.reduced_dims[0] = size;
    p.outputs = n * c;
    p.count = size;
    plan_ = p;
    Shape shape(static_cast<size_t>(x.rank), 1);
    shape[0] = n;
    shape[1] = c;
    set_output(out[0], dtype_, shape);  // [N, C, 1, 1]: the same bytes in both layouts
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    launch_reduce(in[0].data, out[0].data, dtype_, plan_, stream);
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  ReducePlan plan_;
};

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r.add<PoolOp>("MaxPool", "cuda-max-pool", pool_supports);
  r.add<PoolOp>("AveragePool", "cuda-average-pool", pool_supports);
  r.add<GlobalPoolOp>("GlobalAveragePool", "cuda-global-average-pool", global_pool_supports);
  r.add<GlobalPoolOp>("GlobalMaxPool", "cuda-global-max-pool", global_pool_supports);
}

}  // namespace edgert::cuda
