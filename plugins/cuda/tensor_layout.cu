// Ops that move elements without computing on them, on the GPU: Concat, Split, Slice,
// Transpose, Tile, Expand, DepthToSpace, SpaceToDepth (strided copies), Pad (constant, reflect,
// edge, wrap), Gather, and Reshape, Flatten, Squeeze, Unsqueeze (a device copy unless the
// planner ran them in place). Semantics are the CPU plugin's (plugins/cpu/tensor_layout.cpp,
// tensor_shape.cpp, tensor_index.cpp).
//
// Everything moves elements by size (1, 2, 4 or 8 bytes), so one instantiation per size serves
// every dtype. The strided copies are one kernel: prepare describes the op as a walk over the
// destination with a source offset per element (strided_walk.cuh).
//
// Shape-like operands (Reshape's shape, Slice's starts/ends/axes/steps, Split's split, Tile's
// repeats, Expand's shape, Pad's pads and axes, Squeeze/Unsqueeze axes) are read on the host in
// prepare (the kernels' host_inputs bits). Gather reads its indices on the device: an index out
// of range yields zeros (the CPU plugin fails; a device kernel cannot report it).
//
// Layout NHWC: Concat, Split and Slice map the logical axis to the storage axis; the other ops
// here refuse nodes carrying it.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_op.h"
#include "edgert/dtype_info.h"
#include "grid.cuh"
#include "layout.h"
#include "strided_walk.cuh"

namespace edgert::cuda {
namespace {

constexpr unsigned kThreads = 256;

size_t elem_size(edgert_dtype dtype, const char* what) {
  const size_t size = edgert_dtype_size(dtype);
  if (size == 0) fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s, which cannot be moved", what, edgert_dtype_name(dtype));
  return size;
}

// Row-major element strides of a shape.
std::vector<int64_t> dense_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// Operand 0 of the walk is the destination, operand 1 the source.
template <typename E>
__global__ void strided_copy(const E* __restrict__ src, E* __restrict__ dst, int64_t n, StridedWalk<2> walk) {
  grid_stride(n, [&](auto i) {
    int64_t off[2];
    walk.offsets(i, off);
    dst[off[0]] = src[off[1]];
  });
}

// A strided copy prepared once: `count` elements of `elem` bytes, source and destination starting
// `src_offset` / `dst_offset` elements into their tensors.
struct Copy {
  StridedWalk<2> walk;
  int64_t count = 0, src_offset = 0, dst_offset = 0;
  size_t elem = 0;

  static Copy make(const Shape& dims, const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& src_strides,
                   size_t elem, int64_t src_offset = 0, int64_t dst_offset = 0) {
    Copy c;
    c.walk = StridedWalk<2>::make(dims, {dst_strides, src_strides});
    c.count = numel(dims);
    c.elem = elem;
    c.src_offset = src_offset;
    c.dst_offset = dst_offset;
    return c;
  }

  void run(const void* src, void* dst, cudaStream_t stream) const {
    if (count == 0) return;
    const char* s = static_cast<const char*>(src) + src_offset * static_cast<int64_t>(elem);
    char* d = static_cast<char*>(dst) + dst_offset * static_cast<int64_t>(elem);
    if (walk.dense(0) && walk.dense(1)) {
      if (s != d)
        check_cuda(cudaMemcpyAsync(d, s, static_cast<size_t>(count) * elem, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
      return;
    }
    const unsigned blocks = blocks_for(count, kThreads);
    switch (elem) {
      case 1: strided_copy<uint8_t><<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint8_t*>(s), reinterpret_cast<uint8_t*>(d), count, walk); break;
      case 2: strided_copy<uint16_t><<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint16_t*>(s), reinterpret_cast<uint16_t*>(d), count, walk); break;
      case 4: strided_copy<uint32_t><<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint32_t*>(s), reinterpret_cast<uint32_t*>(d), count, walk); break;
      default: strided_copy<uint64_t><<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint64_t*>(s), reinterpret_cast<uint64_t*>(d), count, walk); break;
    }
    check_launch("strided_copy");
  }
};

// Walk dims and strides in the storage order of a tensor of logical `shape`: position p holds
// logical axis logical_axis(p); `strides` are indexed by logical axis.
Shape stored_dims(const Shape& shape, bool nhwc) { return storage_shape(shape, nhwc); }
std::vector<int64_t> stored_order(const std::vector<int64_t>& by_axis, int64_t rank, bool nhwc) {
  std::vector<int64_t> out(by_axis.size());
  for (int64_t p = 0; p < rank; ++p) out[static_cast<size_t>(p)] = by_axis[static_cast<size_t>(logical_axis(p, rank, nhwc))];
  return out;
}

int32_t movable_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_UNDEFINED && edgert_dtype_size(in[0].dtype) == 0) return 0;
  return !channels_last(*node);
}

int32_t layout_aware_supports(const edgert_node*, const edgert_tensor* in) {
  return in[0].dtype == EDGERT_DTYPE_UNDEFINED || edgert_dtype_size(in[0].dtype) != 0;
}

// Concat, Split, Slice (layout-aware)

class ConcatOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const Attributes attrs(&node);
    if (node.num_inputs < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least one input");
    if (!attrs.has("axis") && node.opset >= 4) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'axis' is required");
    const size_t elem = elem_size(in[0].dtype, "input 0");
    const int64_t rank = in[0].rank;
    const int64_t axis = normalize_axis(attrs.get_int("axis", 1), rank);
    Shape shape = shape_of(in[0]);
    shape[axis] = 0;
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      if (in[i].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "input %d has dtype %s, input 0 has %s", i, edgert_dtype_name(in[i].dtype),
             edgert_dtype_name(in[0].dtype));
      if (in[i].rank != rank) fail(EDGERT_ERR_SHAPE, "input %d has rank %d, input 0 has %lld", i, in[i].rank, static_cast<long long>(rank));
      for (int64_t a = 0; a < rank; ++a)
        if (a != axis && in[i].dims[a] != in[0].dims[a])
          fail(EDGERT_ERR_SHAPE, "input %d has shape %s, incompatible with input 0's %s off axis %lld", i,
               shape_string(shape_of(in[i])).c_str(), shape_string(shape_of(in[0])).c_str(), static_cast<long long>(axis));
      shape[axis] += in[i].dims[axis];
    }
    set_output(out[0], in[0].dtype, shape);
    const bool nhwc = channels_last(node);
    const std::vector<int64_t> out_strides = storage_strides(shape, nhwc);
    copies_.clear();
    int64_t offset = 0;
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      const Shape part = shape_of(in[i]);
      copies_.push_back(Copy::make(stored_dims(part, nhwc), stored_order(out_strides, rank, nhwc),
                                   stored_order(storage_strides(part, nhwc), rank, nhwc), elem, 0,
                                   offset * out_strides[static_cast<size_t>(axis)]));
      offset += part[axis];
    }
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      const Copy& c = copies_[static_cast<size_t>(i)];
      // The memory planner may have had the input written at its place already.
      if (in[i].data == static_cast<char*>(out[0].data) + c.dst_offset * static_cast<int64_t>(c.elem)) continue;
      c.run(in[i].data, out[0].data, stream);
    }
  }

 private:
  std::vector<Copy> copies_;
};

class SplitOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    const size_t elem = elem_size(in[0].dtype, "input");
    const int64_t rank = in[0].rank;
    const int64_t axis = normalize_axis(attrs.get_int("axis", 0), rank);
    const int64_t dim = in[0].dims[axis];
    const int32_t n = node.num_outputs;
    std::vector<int64_t> sizes;
    if (node.opset < 13 && attrs.has("split")) {
      sizes = attrs.get_ints("split");
    } else if (node.opset >= 13 && node.num_inputs > 1 && is_present(in[1])) {
      info.data_dependent = 1;
      sizes = read_ints(in[1], "split");
    } else if (attrs.has("num_outputs")) {  // opset 18: ceil-sized parts, the last one smaller
      const int64_t parts = attrs.get_int("num_outputs", n);
      const int64_t part = (dim + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(part, dim - i * part)));
    } else {
      if (n <= 0 || dim % n != 0)
        fail(EDGERT_ERR_SHAPE, "axis dim %lld does not split into %d equal parts", static_cast<long long>(dim), n);
      sizes.assign(static_cast<size_t>(n), dim / n);
    }
    if (static_cast<int32_t>(sizes.size()) != n)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "split has %zu sizes for %d outputs", sizes.size(), n);
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "split sizes must not be negative");
      sum += s;
    }
    if (sum != dim)
      fail(EDGERT_ERR_SHAPE, "split sizes add up to %lld, the axis dim is %lld", static_cast<long long>(sum),
           static_cast<long long>(dim));
    const bool nhwc = channels_last(node);
    const Shape in_shape = shape_of(in[0]);
    const std::vector<int64_t> in_strides = storage_strides(in_shape, nhwc);
    copies_.clear();
    Shape shape = in_shape;
    int64_t offset = 0;
    for (int32_t i = 0; i < n; ++i) {
      shape[axis] = sizes[static_cast<size_t>(i)];
      set_output(out[i], in[0].dtype, shape);
      copies_.push_back(Copy::make(stored_dims(shape, nhwc), stored_order(storage_strides(shape, nhwc), rank, nhwc),
                                   stored_order(in_strides, rank, nhwc), elem,
                                   offset * in_strides[static_cast<size_t>(axis)]));
      offset += shape[axis];
    }
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    for (int32_t i = 0; i < node.num_outputs; ++i) copies_[static_cast<size_t>(i)].run(in[0].data, out[i].data, stream);
  }

 private:
  std::vector<Copy> copies_;
};

class SliceOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    const size_t elem = elem_size(in[0].dtype, "data");
    const int64_t rank = in[0].rank;
    std::vector<int64_t> starts, ends, axes, steps;
    if (node.opset < 10) {  // Slice-1: attributes, no steps
      starts = attrs.get_ints("starts");
      ends = attrs.get_ints("ends");
      axes = attrs.get_ints("axes");
    } else {
      info.data_dependent = 1;
      starts = read_ints(in[1], "starts");
      ends = read_ints(in[2], "ends");
      if (node.num_inputs > 3 && is_present(in[3])) axes = read_ints(in[3], "axes");
      if (node.num_inputs > 4 && is_present(in[4])) steps = read_ints(in[4], "steps");
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      fail(EDGERT_ERR_INVALID_ARGUMENT, "starts, ends, axes and steps have %zu, %zu, %zu and %zu entries",
           starts.size(), ends.size(), axes.size(), steps.size());

    const bool nhwc = channels_last(node);
    const Shape in_shape = shape_of(in[0]);
    const std::vector<int64_t> in_strides = storage_strides(in_shape, nhwc);
    std::vector<int64_t> strides = in_strides;
    Shape shape = in_shape;
    int64_t offset = 0;
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t axis = normalize_axis(axes[i], rank, "axes entry");
      if (seen[axis]) fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is sliced twice", static_cast<long long>(axis));
      seen[axis] = true;
      const int64_t dim = in_shape[axis], step = steps[i];
      int64_t start = starts[i], end = ends[i];
      if (step == 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "steps must not be 0");
      // Negative values count from the end; then clamp (INT64_MAX/MIN mean "to the end").
      if (start < 0) start += dim;
      if (end < 0) end += dim;
      if (dim == 0) {
        start = end = 0;
      } else if (step > 0) {
        start = std::clamp<int64_t>(start, 0, dim);
        end = std::clamp<int64_t>(end, 0, dim);
      } else {
        start = std::clamp<int64_t>(start, 0, dim - 1);
        end = std::clamp<int64_t>(end, -1, dim - 1);
      }
      int64_t len = 0;
      if (step > 0 && end > start) len = (end - start + step - 1) / step;
      if (step < 0 && start > end) len = (start - end + (-step) - 1) / (-step);
      shape[axis] = len;
      if (len > 0) offset += start * in_strides[axis];
      strides[axis] = in_strides[axis] * step;
    }
    set_output(out[0], in[0].dtype, shape);
    copy_ = Copy::make(stored_dims(shape, nhwc), stored_order(storage_strides(shape, nhwc), rank, nhwc),
                       stored_order(strides, rank, nhwc), elem, numel(shape) > 0 ? offset : 0);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_.run(in[0].data, out[0].data, stream);
  }

 private:
  Copy copy_;
};

// Strided views of row-major tensors: Transpose, Tile, Expand, DepthToSpace, SpaceToDepth.

class TransposeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const size_t elem = elem_size(in[0].dtype, "data");
    const int64_t rank = in[0].rank;
    std::vector<int64_t> perm = Attributes(&node).get_ints("perm");
    if (perm.empty())
      for (int64_t i = rank; i-- > 0;) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != rank)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "perm has %zu entries, data has rank %lld", perm.size(), static_cast<long long>(rank));
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    const Shape in_shape = shape_of(in[0]);
    const std::vector<int64_t> in_strides = dense_strides(in_shape);
    Shape shape;
    std::vector<int64_t> strides;
    for (int64_t& p : perm) {
      p = normalize_axis(p, rank, "perm entry");
      if (seen[p]) fail(EDGERT_ERR_INVALID_ARGUMENT, "perm repeats axis %lld", static_cast<long long>(p));
      seen[p] = true;
      shape.push_back(in_shape[p]);
      strides.push_back(in_strides[p]);
    }
    set_output(out[0], in[0].dtype, shape);
    copy_ = Copy::make(shape, dense_strides(shape), strides, elem);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_.run(in[0].data, out[0].data, stream);
  }

 private:
  Copy copy_;
};

int32_t tile_supports(const edgert_node* node, const edgert_tensor* in) {
  return node->opset >= 6 && movable_supports(node, in);
}

class TileOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const size_t elem = elem_size(in[0].dtype, "input");
    info.data_dependent = 1;
    const std::vector<int64_t> repeats = read_ints(in[1], "repeats");
    if (static_cast<int32_t>(repeats.size()) != in[0].rank)
      fail(EDGERT_ERR_SHAPE, "repeats has %zu entries, input has rank %d", repeats.size(), in[0].rank);
    // The output is the view [r0, d0, r1, d1, ...] of the input, stride 0 on each r axis.
    const Shape in_shape = shape_of(in[0]);
    const std::vector<int64_t> in_strides = dense_strides(in_shape);
    Shape shape, view;
    std::vector<int64_t> view_strides;
    for (size_t a = 0; a < repeats.size(); ++a) {
      if (repeats[a] < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "repeats must not be negative");
      shape.push_back(in_shape[a] * repeats[a]);
      view.insert(view.end(), {repeats[a], in_shape[a]});
      view_strides.insert(view_strides.end(), {0, in_strides[a]});
    }
    set_output(out[0], in[0].dtype, shape);
    copy_ = Copy::make(view, dense_strides(view), view_strides, elem);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_.run(in[0].data, out[0].data, stream);
  }

 private:
  Copy copy_;
};

class ExpandOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const size_t elem = elem_size(in[0].dtype, "input");
    info.data_dependent = 1;
    const Shape target = read_ints(in[1], "shape");
    const Shape in_shape = shape_of(in[0]);
    // Bidirectional: a 1 in `shape` keeps the input's dim.
    const size_t rank = std::max(in_shape.size(), target.size());
    Shape shape(rank, 1);
    std::vector<int64_t> strides(rank, 0);
    const std::vector<int64_t> in_strides = dense_strides(in_shape);
    for (size_t i = 0; i < rank; ++i) {
      const bool has_in = i + in_shape.size() >= rank, has_target = i + target.size() >= rank;
      const int64_t di = has_in ? in_shape[i + in_shape.size() - rank] : 1;
      const int64_t dt = has_target ? target[i + target.size() - rank] : 1;
      if (di != dt && di != 1 && dt != 1)
        fail(EDGERT_ERR_SHAPE, "input %s cannot be expanded to %s", shape_string(in_shape).c_str(),
             shape_string(target).c_str());
      shape[i] = di == 1 ? dt : di;
      if (has_in && di != 1) strides[i] = in_strides[i + in_shape.size() - rank];
    }
    set_output(out[0], in[0].dtype, shape);
    copy_ = Copy::make(shape, dense_strides(shape), strides, elem);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_.run(in[0].data, out[0].data, stream);
  }

 private:
  Copy copy_;
};

// DepthToSpace and SpaceToDepth: 6-D views of the NCHW input copied into the output.
class SpaceDepthOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    const Attributes attrs(&node);
    const size_t elem = elem_size(in[0].dtype, "input");
    if (in[0].rank != 4) fail(EDGERT_ERR_SHAPE, "input must be 4-D NCHW, got rank %d", in[0].rank);
    const int64_t b = attrs.get_int("blocksize", 0);
    const int64_t n = in[0].dims[0], c = in[0].dims[1], h = in[0].dims[2], w = in[0].dims[3];
    Shape view, shape;
    std::vector<int64_t> strides;
    if (std::string(node.op_type) == "DepthToSpace") {
      const std::string mode = attrs.get_string("mode", "DCR");
      if (mode != "DCR" && mode != "CRD") fail(EDGERT_ERR_INVALID_ARGUMENT, "mode must be DCR or CRD, got '%s'", mode.c_str());
      if (b <= 0 || c % (b * b) != 0)
        fail(EDGERT_ERR_SHAPE, "channels %lld are not divisible by blocksize^2 (blocksize %lld)", static_cast<long long>(c),
             static_cast<long long>(b));
      const int64_t oc = c / (b * b), hw = h * w;
      // DCR reads channel (b1*b + b2)*oc + c, CRD c*b*b + b1*b + b2.
      const int64_t s_c = mode == "DCR" ? hw : b * b * hw, s_b1 = mode == "DCR" ? b * oc * hw : b * hw,
                    s_b2 = mode == "DCR" ? oc * hw : hw;
      view = {n, oc, h, b, w, b};
      strides = {c * hw, s_c, w, s_b1, 1, s_b2};
      shape = {n, oc, h * b, w * b};
    } else {
      if (b <= 0 || h % b != 0 || w % b != 0)
        fail(EDGERT_ERR_SHAPE, "spatial dims %lldx%lld are not divisible by blocksize %lld", static_cast<long long>(h),
             static_cast<long long>(w), static_cast<long long>(b));
      // Output channel (b1*b + b2)*c + ch takes input (ch, y*b + b1, x*b + b2).
      view = {n, b, b, c, h / b, w / b};
      strides = {c * h * w, w, 1, h * w, b * w, b};
      shape = {n, c * b * b, h / b, w / b};
    }
    set_output(out[0], in[0].dtype, shape);
    copy_ = Copy::make(view, dense_strides(view), strides, elem);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_.run(in[0].data, out[0].data, stream);
  }

 private:
  Copy copy_;
};

// Pad

enum class PadMode : int { Constant, Reflect, Edge, Wrap };

struct PadShape {
  int rank = 0;
  int64_t out[EDGERT_MAX_RANK] = {}, in[EDGERT_MAX_RANK] = {}, in_strides[EDGERT_MAX_RANK] = {};
  int64_t begin[EDGERT_MAX_RANK] = {};
  PadMode mode = PadMode::Constant;
};

// `value` (device) overrides `fallback` (the attribute's value, or 0) when given.
template <typename E>
__global__ void pad_kernel(const E* __restrict__ x, E* __restrict__ y, int64_t total, PadShape p, const E* value,
                           E fallback) {
  const E constant = value ? *value : fallback;
  grid_stride(total, [&](auto i) {
    using I = decltype(i);
    I rest = i;
    int64_t offset = 0;
    bool outside = false;
    for (int a = p.rank - 1; a >= 0; --a) {
      const I dim = static_cast<I>(p.out[a]);
      const int64_t coord = static_cast<int64_t>(rest % dim);
      rest /= dim;
      const int64_t n = p.in[a];
      int64_t v = coord - p.begin[a];
      if (v < 0 || v >= n) {
        switch (p.mode) {
          case PadMode::Constant: outside = true; break;
          case PadMode::Edge: v = v < 0 ? 0 : n - 1; break;
          case PadMode::Wrap: v = ((v % n) + n) % n; break;
          case PadMode::Reflect:
            if (n == 1) {
              v = 0;
            } else {  // reflect without repeating the edge, period 2(n-1)
              const int64_t period = 2 * (n - 1);
              v = ((v % period) + period) % period;
              if (v >= n) v = period - v;
            }
            break;
        }
      }
      offset += v * p.in_strides[a];
    }
    y[i] = outside ? constant : x[offset];
  });
}

int32_t pad_supports(const edgert_node* node, const edgert_tensor* in) {
  const std::string mode = Attributes(node).get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") return 0;
  return movable_supports(node, in);
}

class PadOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const Attributes attrs(&node);
    elem_ = elem_size(in[0].dtype, "data");
    const int64_t rank = in[0].rank;
    const std::string mode = attrs.get_string("mode", "constant");
    if (mode == "constant") p_.mode = PadMode::Constant;
    else if (mode == "reflect") p_.mode = PadMode::Reflect;
    else if (mode == "edge") p_.mode = PadMode::Edge;
    else if (mode == "wrap") p_.mode = PadMode::Wrap;
    else fail(EDGERT_ERR_UNSUPPORTED, "mode '%s' is not one of constant, reflect, edge, wrap", mode.c_str());

    std::vector<int64_t> pads;
    fallback_ = 0;
    has_value_input_ = false;
    if (node.opset < 11) {  // pads and value were attributes ("paddings" in Pad-1)
      pads = attrs.get_ints(node.opset < 2 ? "paddings" : "pads");
      const float value = attrs.get_float("value", 0.0f);
      switch (in[0].dtype) {
        case EDGERT_DTYPE_FLOAT32: std::memcpy(&fallback_, &value, sizeof value); break;
        case EDGERT_DTYPE_FLOAT16: {
          const __half h = __float2half_rn(value);
          std::memcpy(&fallback_, &h, sizeof h);
          break;
        }
        default:
          if (value != 0.0f) fail(EDGERT_ERR_UNSUPPORTED, "a non-zero pad value for %s data", edgert_dtype_name(in[0].dtype));
      }
    } else {
      info.data_dependent = 1;
      pads = read_ints(in[1], "pads");
      if (node.num_inputs > 3 && is_present(in[3])) {  // opset 18 axes: pads cover only these axes
        const std::vector<int64_t> axes = read_ints(in[3], "axes");
        if (pads.size() != 2 * axes.size())
          fail(EDGERT_ERR_SHAPE, "pads has %zu entries for %zu axes", pads.size(), axes.size());
        std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
        for (size_t i = 0; i < axes.size(); ++i) {
          const int64_t a = normalize_axis(axes[i], rank, "axes entry");
          full[a] = pads[i];
          full[a + rank] = pads[i + axes.size()];
        }
        pads = full;
      }
      has_value_input_ = node.num_inputs > 2 && is_present(in[2]) && numel(in[2]) > 0;
      if (has_value_input_ && in[2].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "constant_value has dtype %s, data has %s", edgert_dtype_name(in[2].dtype),
             edgert_dtype_name(in[0].dtype));
    }
    if (static_cast<int64_t>(pads.size()) != 2 * rank)
      fail(EDGERT_ERR_SHAPE, "pads has %zu entries, expected %lld for rank %lld", pads.size(),
           static_cast<long long>(2 * rank), static_cast<long long>(rank));
    Shape shape = shape_of(in[0]);
    const std::vector<int64_t> in_strides = dense_strides(shape);
    p_.rank = static_cast<int>(rank);
    for (int64_t a = 0; a < rank; ++a) {
      if (p_.mode != PadMode::Constant && shape[a] == 0 && (pads[a] > 0 || pads[a + rank] > 0))
        fail(EDGERT_ERR_SHAPE, "mode '%s' cannot pad axis %lld of size 0", mode.c_str(), static_cast<long long>(a));
      p_.in[a] = shape[a];
      p_.in_strides[a] = in_strides[a];
      p_.begin[a] = pads[a];
      shape[a] += pads[a] + pads[a + rank];
      if (shape[a] < 0) fail(EDGERT_ERR_SHAPE, "pads crop axis %lld below zero", static_cast<long long>(a));
      p_.out[a] = shape[a];
    }
    set_output(out[0], in[0].dtype, shape);
    total_ = numel(shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (total_ == 0) return;
    const void* value = has_value_input_ ? in[2].data : nullptr;
    const unsigned blocks = blocks_for(total_, kThreads);
    switch (elem_) {
      case 1: launch<uint8_t>(in[0].data, out[0].data, value, blocks, stream); break;
      case 2: launch<uint16_t>(in[0].data, out[0].data, value, blocks, stream); break;
      case 4: launch<uint32_t>(in[0].data, out[0].data, value, blocks, stream); break;
      default: launch<uint64_t>(in[0].data, out[0].data, value, blocks, stream); break;
    }
    check_launch("pad_kernel");
  }

 private:
  template <typename E>
  void launch(const void* x, void* y, const void* value, unsigned blocks, cudaStream_t stream) const {
    E fallback;
    std::memcpy(&fallback, &fallback_, sizeof fallback);
    pad_kernel<E><<<blocks, kThreads, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y), total_, p_,
                                                   static_cast<const E*>(value), fallback);
  }

  PadShape p_;
  size_t elem_ = 4;
  uint64_t fallback_ = 0;  // the attribute's value in the data's dtype (opset < 11)
  bool has_value_input_ = false;
  int64_t total_ = 0;
};

// Gather (indices on the device)

template <typename E>
__global__ void gather_kernel(const E* __restrict__ data, const void* __restrict__ indices, bool indices_int32,
                              E* __restrict__ y, int64_t total, int64_t count, int64_t n, int64_t inner) {
  grid_stride(total, [&](auto i) {
    using I = decltype(i);
    const I r = i % static_cast<I>(inner), rest = i / static_cast<I>(inner);
    const I j = rest % static_cast<I>(count), o = rest / static_cast<I>(count);
    int64_t index = indices_int32 ? static_cast<const int32_t*>(indices)[j] : static_cast<const int64_t*>(indices)[j];
    if (index < 0) index += n;
    y[i] = index >= 0 && index < n ? data[(static_cast<int64_t>(o) * n + index) * inner + r] : E(0);
  });
}

int32_t gather_supports(const edgert_node* node, const edgert_tensor* in) {
  if (in[1].dtype != EDGERT_DTYPE_UNDEFINED && in[1].dtype != EDGERT_DTYPE_INT32 && in[1].dtype != EDGERT_DTYPE_INT64)
    return 0;
  return movable_supports(node, in);
}

class GatherOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    elem_ = elem_size(in[0].dtype, "data");
    if (in[1].dtype != EDGERT_DTYPE_INT32 && in[1].dtype != EDGERT_DTYPE_INT64)
      fail(EDGERT_ERR_SHAPE, "indices must be int32 or int64, got %s", edgert_dtype_name(in[1].dtype));
    const int64_t axis = normalize_axis(Attributes(&node).get_int("axis", 0), in[0].rank);
    Shape shape(in[0].dims, in[0].dims + axis);
    shape.insert(shape.end(), in[1].dims, in[1].dims + in[1].rank);
    shape.insert(shape.end(), in[0].dims + axis + 1, in[0].dims + in[0].rank);
    set_output(out[0], in[0].dtype, shape);
    n_ = in[0].dims[axis];
    count_ = numel(in[1]);
    inner_ = 1;
    for (int64_t a = axis + 1; a < in[0].rank; ++a) inner_ *= in[0].dims[a];
    total_ = numel(shape);
    int32_ = in[1].dtype == EDGERT_DTYPE_INT32;
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    if (total_ == 0) return;
    const unsigned blocks = blocks_for(total_, kThreads);
    switch (elem_) {
      case 1: launch<uint8_t>(in, out, blocks, stream); break;
      case 2: launch<uint16_t>(in, out, blocks, stream); break;
      case 4: launch<uint32_t>(in, out, blocks, stream); break;
      default: launch<uint64_t>(in, out, blocks, stream); break;
    }
    check_launch("gather_kernel");
  }

 private:
  template <typename E>
  void launch(const edgert_tensor* in, edgert_tensor* out, unsigned blocks, cudaStream_t stream) const {
    gather_kernel<E><<<blocks, kThreads, 0, stream>>>(static_cast<const E*>(in[0].data), in[1].data, int32_,
                                                      static_cast<E*>(out[0].data), total_, count_, n_, inner_);
  }

  size_t elem_ = 4;
  bool int32_ = false;
  int64_t n_ = 0, count_ = 0, inner_ = 1, total_ = 0;
};

// Reshape, Flatten, Squeeze, Unsqueeze: new dims, same bytes.

void copy_bytes(const edgert_tensor& in, edgert_tensor& out, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(numel(in)) * edgert_dtype_size(in.dtype);
  if (bytes == 0 || out.data == in.data) return;
  check_cuda(cudaMemcpyAsync(out.data, in.data, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
}

class ReshapeLikeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    elem_size(in[0].dtype, "data");
    const std::string op = node.op_type;
    Shape shape;
    if (op == "Reshape") shape = reshape(node, in, info);
    else if (op == "Flatten") shape = flatten(node, in[0]);
    else if (op == "Squeeze") shape = squeeze(node, in, info);
    else shape = unsqueeze(node, in, info);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*, cudaStream_t stream) override {
    copy_bytes(in[0], out[0], stream);
  }

 private:
  static Shape reshape(const edgert_node& node, const edgert_tensor* in, edgert_prepare_info& info) {
    const Attributes attrs(&node);
    std::vector<int64_t> shape;
    if (node.opset < 5) {  // Reshape-1 took the shape as an attribute
      shape = attrs.get_ints("shape");
    } else {
      info.data_dependent = 1;
      if (node.num_inputs < 2 || in[1].rank != 1) fail(EDGERT_ERR_SHAPE, "shape input must be a 1-D tensor");
      shape = read_ints(in[1], "shape");
    }
    const bool allowzero = attrs.get_int("allowzero", 0) != 0;
    const int64_t total = numel(in[0]);
    int64_t known = 1, inferred = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowzero) {  // 0 copies the input's dim at the same position
        if (static_cast<int32_t>(i) >= in[0].rank)
          fail(EDGERT_ERR_SHAPE, "shape[%zu] = 0 copies a dim the rank-%d input does not have", i, in[0].rank);
        shape[i] = in[0].dims[i];
      } else if (shape[i] == -1) {
        if (inferred >= 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "shape has more than one -1");
        inferred = static_cast<int64_t>(i);
        continue;
      } else if (shape[i] < 0) {
        fail(EDGERT_ERR_INVALID_ARGUMENT, "shape[%zu] = %lld is negative", i, static_cast<long long>(shape[i]));
      }
      known *= shape[i];
    }
    if (inferred >= 0) {
      if (known == 0 || total % known != 0)
        fail(EDGERT_ERR_SHAPE, "cannot infer the -1 in shape %s for %lld elements", shape_string(shape).c_str(),
             static_cast<long long>(total));
      shape[static_cast<size_t>(inferred)] = total / known;
    }
    if (numel(shape) != total)
      fail(EDGERT_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s", shape_string(shape_of(in[0])).c_str(),
           static_cast<long long>(total), shape_string(shape).c_str());
    return shape;
  }

  static Shape flatten(const edgert_node& node, const edgert_tensor& x) {
    const int64_t rank = x.rank;
    int64_t axis = Attributes(&node).get_int("axis", 1);
    if (axis < -rank || axis > rank)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is out of range [-%lld, %lld]", static_cast<long long>(axis),
           static_cast<long long>(rank), static_cast<long long>(rank));
    if (axis < 0) axis += rank;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= x.dims[i];
    return {outer, inner};
  }

  // Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input (on the host) from 13 on.
  static bool read_axes(const edgert_node& node, const edgert_tensor* in, edgert_prepare_info& info,
                        std::vector<int64_t>& axes) {
    if (node.opset < 13) {
      const Attributes attrs(&node);
      if (!attrs.has("axes")) return false;
      axes = attrs.get_ints("axes");
      return true;
    }
    if (node.num_inputs < 2 || !is_present(in[1])) return false;
    info.data_dependent = 1;
    axes = read_ints(in[1], "axes");
    return true;
  }

  static Shape squeeze(const edgert_node& node, const edgert_tensor* in, edgert_prepare_info& info) {
    const int64_t rank = in[0].rank;
    std::vector<int64_t> axes;
    std::vector<bool> drop(static_cast<size_t>(rank), false);
    if (read_axes(node, in, info, axes) && !axes.empty()) {
      for (int64_t a : axes) {
        a = normalize_axis(a, rank, "axes entry");
        if (in[0].dims[a] != 1)
          fail(EDGERT_ERR_SHAPE, "cannot squeeze axis %lld of shape %s: its dim is not 1", static_cast<long long>(a),
               shape_string(shape_of(in[0])).c_str());
        drop[static_cast<size_t>(a)] = true;
      }
    } else {  // no axes: drop every dim of 1
      for (int64_t a = 0; a < rank; ++a) drop[static_cast<size_t>(a)] = in[0].dims[a] == 1;
    }
    Shape shape;
    for (int64_t a = 0; a < rank; ++a)
      if (!drop[static_cast<size_t>(a)]) shape.push_back(in[0].dims[a]);
    return shape;
  }

  static Shape unsqueeze(const edgert_node& node, const edgert_tensor* in, edgert_prepare_info& info) {
    std::vector<int64_t> axes;
    if (!read_axes(node, in, info, axes)) fail(EDGERT_ERR_INVALID_ARGUMENT, "axes are required");
    const int64_t out_rank = in[0].rank + static_cast<int64_t>(axes.size());
    if (out_rank > EDGERT_MAX_RANK)
      fail(EDGERT_ERR_UNSUPPORTED, "output rank %lld exceeds %d", static_cast<long long>(out_rank), EDGERT_MAX_RANK);
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int64_t a : axes) {
      a = normalize_axis(a, out_rank, "axes entry");  // axes refer to the output's rank
      if (inserted[static_cast<size_t>(a)]) fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is repeated", static_cast<long long>(a));
      inserted[static_cast<size_t>(a)] = true;
    }
    Shape shape;
    int32_t next = 0;
    for (int64_t a = 0; a < out_rank; ++a) shape.push_back(inserted[static_cast<size_t>(a)] ? 1 : in[0].dims[next++]);
    return shape;
  }
};

}  // namespace

void register_tensor_layout_kernels(KernelRegistry& r) {
  constexpr uint64_t kInput1 = 1u << 1;
  r.add<ConcatOp>("Concat", "cuda-concat", layout_aware_supports);
  r.add<SplitOp>("Split", "cuda-split", layout_aware_supports, nullptr, kInput1);
  r.add<SliceOp>("Slice", "cuda-slice", layout_aware_supports, nullptr, 0x1eu);  // starts, ends, axes, steps
  r.add<TransposeOp>("Transpose", "cuda-transpose", movable_supports);
  r.add<TileOp>("Tile", "cuda-tile", tile_supports, nullptr, kInput1);
  r.add<ExpandOp>("Expand", "cuda-expand", movable_supports, nullptr, kInput1);
  r.add<SpaceDepthOp>("DepthToSpace", "cuda-depth-to-space", movable_supports);
  r.add<SpaceDepthOp>("SpaceToDepth", "cuda-space-to-depth", movable_supports);
  r.add<PadOp>("Pad", "cuda-pad", pad_supports, nullptr, kInput1 | (1u << 3));  // pads, axes
  r.add<GatherOp>("Gather", "cuda-gather", gather_supports);
  r.add<ReshapeLikeOp>("Reshape", "cuda-reshape", movable_supports, nullptr, kInput1);
  r.add<ReshapeLikeOp>("Flatten", "cuda-flatten", movable_supports);
  r.add<ReshapeLikeOp>("Squeeze", "cuda-squeeze", movable_supports, nullptr, kInput1);
  r.add<ReshapeLikeOp>("Unsqueeze", "cuda-unsqueeze", movable_supports, nullptr, kInput1);
}

}  // namespace edgert::cuda
