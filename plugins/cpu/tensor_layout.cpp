// Ops that rearrange elements without computing on them: Transpose, Concat, Split, Slice, Tile,
// Pad, DepthToSpace, SpaceToDepth, Trilu.
//
// Everything moves bytes (dtype_size per element), so one instantiation serves every dtype.
// Transpose, Slice, Tile, DepthToSpace and SpaceToDepth are all "copy a strided view of the
// input into a dense output", done by copy_view(). Transpose and Pad also have a tactic that
// copies whole rows and tiles instead of single elements (fast/transpose_tiled.h,
// fast/pad_rows.h).
#include <algorithm>
#include <cstring>

#include "fast/pad_rows.h"
#include "fast/transpose_tiled.h"
#include "kernel.h"

namespace edgert::cpu {
namespace {

size_t elem_size(edgert_dtype dtype, const char* what) {
  size_t size = dtype_size(dtype);
  if (size == 0) throw_unsupported_dtype(dtype, what);
  return size;
}

// Row-major element strides of a shape.
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// Fills dense `dst` by walking `shape` row-major over a view of `src` whose per-axis strides
// (in elements, may be 0 or negative) are `strides`. Any rank: Tile and DepthToSpace use views
// of twice or 1.5 times the tensor's rank (at most 2 * EDGERT_MAX_RANK).
void copy_view(void* dst_data, const void* src_data, const Shape& view_shape, const std::vector<int64_t>& view_strides,
               size_t elem) {
  int64_t total = numel(view_shape);
  if (total == 0) return;
  // Merge neighbouring axes the source walks contiguously (and drop size-1 axes): the channel
  // shuffle Transpose of ShuffleNet then copies whole planes instead of single rows.
  // Fixed arrays: execute() must not allocate.
  int64_t shape[2 * EDGERT_MAX_RANK], strides[2 * EDGERT_MAX_RANK];
  size_t rank = 0;
  for (size_t a = 0; a < view_shape.size(); ++a) {
    if (view_shape[a] == 1) continue;
    if (rank > 0 && strides[rank - 1] == view_strides[a] * view_shape[a]) {
      shape[rank - 1] *= view_shape[a];
      strides[rank - 1] = view_strides[a];
      continue;
    }
    shape[rank] = view_shape[a];
    strides[rank] = view_strides[a];
    ++rank;
  }
  char* dst = static_cast<char*>(dst_data);
  const char* src = static_cast<const char*>(src_data);
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  int64_t counter[2 * EDGERT_MAX_RANK] = {};  // views have at most twice the tensor rank
  int64_t offset = 0;
  for (int64_t done = 0; done < total; done += inner) {
    const char* s = src + offset * static_cast<int64_t>(elem);
    if (inner_stride == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * elem);
      dst += inner * static_cast<int64_t>(elem);
    } else {
      for (int64_t j = 0; j < inner; ++j, dst += elem) std::memcpy(dst, s + j * inner_stride * static_cast<int64_t>(elem), elem);
    }
    for (size_t a = rank - 1; a-- > 0;) {  // advance the outer axes like an odometer
      offset += strides[a];
      if (++counter[a] < shape[a]) break;
      offset -= strides[a] * shape[a];
      counter[a] = 0;
    }
  }
}

class TransposeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "data");
    int64_t rank = in[0].rank;
    std::vector<int64_t> perm = Attributes(&node).get_ints("perm");
    if (perm.empty())  // default: reverse the axes
      for (int64_t i = rank; i-- > 0;) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != rank)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "perm has %zu entries, data has rank %lld", perm.size(), static_cast<long long>(rank));
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    Shape in_shape = shape_of(in[0]), shape;
    std::vector<int64_t> in_strides = strides_of(in_shape);
    strides_.clear();
    for (int64_t& p : perm) {
      p = normalize_axis(p, rank, "perm entry");
      if (seen[p]) fail(EDGERT_ERR_INVALID_ARGUMENT, "perm repeats axis %lld", static_cast<long long>(p));
      seen[p] = true;
      shape.push_back(in_shape[p]);
      strides_.push_back(in_strides[p]);
    }
    set_output(out[0], in[0].dtype, shape);
    shape_ = shape;
    tiled_ = tactic() == kTransposeTiledTactic && tiled_transpose_.prepare(shape, strides_, dtype_size(in[0].dtype));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (tiled_) return tiled_transpose_.execute(in[0].data, out[0].data);
    copy_view(out[0].data, in[0].data, shape_, strides_, dtype_size(in[0].dtype));
  }

 private:
  Shape shape_;
  std::vector<int64_t> strides_;
  bool tiled_ = false;  // the xx-transpose-tiled tactic
  FastTranspose tiled_transpose_;
};

class ConcatOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    if (node.num_inputs < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least one input");
    if (!attrs.has("axis") && node.opset >= 4) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'axis' is required");
    elem_size(in[0].dtype, "input 0");
    int64_t rank = in[0].rank;
    axis_ = normalize_axis(attrs.get_int("axis", 1), rank);  // Concat-1 defaulted to 1
    Shape shape = shape_of(in[0]);
    shape[axis_] = 0;
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      if (in[i].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "input %d has dtype %s, input 0 has %s", i, dtype_name(in[i].dtype), dtype_name(in[0].dtype));
      if (in[i].rank != rank) fail(EDGERT_ERR_SHAPE, "input %d has rank %d, input 0 has %lld", i, in[i].rank, static_cast<long long>(rank));
      for (int64_t a = 0; a < rank; ++a)
        if (a != axis_ && in[i].dims[a] != in[0].dims[a])
          fail(EDGERT_ERR_SHAPE, "input %d has shape %s, incompatible with input 0's %s off axis %lld", i,
               shape_string(shape_of(in[i])).c_str(), shape_string(shape_of(in[0])).c_str(), static_cast<long long>(axis_));
      shape[axis_] += in[i].dims[axis_];
    }
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t elem = dtype_size(in[0].dtype);
    int64_t outer = 1, inner = static_cast<int64_t>(elem);
    for (int64_t a = 0; a < axis_; ++a) outer *= out[0].dims[a];
    for (int64_t a = axis_ + 1; a < out[0].rank; ++a) inner *= out[0].dims[a];
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t o = 0; o < outer; ++o)
      for (int32_t i = 0; i < node.num_inputs; ++i) {
        int64_t chunk = in[i].dims[axis_] * inner;
        if (chunk == 0) continue;  // zero-size inputs may have null data
        const char* src = static_cast<const char*>(in[i].data) + o * chunk;
        // The builder's memory plan may have had the input written at its place already.
        if (src != dst) std::memcpy(dst, src, static_cast<size_t>(chunk));
        dst += chunk;
      }
  }

 private:
  int64_t axis_ = 0;
};

class SplitOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    elem_size(in[0].dtype, "input");
    axis_ = normalize_axis(attrs.get_int("axis", 0), in[0].rank);
    int64_t dim = in[0].dims[axis_];
    int32_t n = node.num_outputs;
    std::vector<int64_t> sizes;
    if (node.opset < 13 && attrs.has("split")) {
      sizes = attrs.get_ints("split");
    } else if (node.opset >= 13 && node.num_inputs > 1 && is_present(in[1])) {
      info.data_dependent = 1;
      sizes = read_ints(in[1], "split");
    } else if (attrs.has("num_outputs")) {  // opset 18: ceil-sized parts, the last one smaller
      int64_t parts = attrs.get_int("num_outputs", n);
      int64_t part = (dim + parts - 1) / parts;
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
      fail(EDGERT_ERR_SHAPE, "split sizes add up to %lld, the axis dim is %lld", static_cast<long long>(sum), static_cast<long long>(dim));
    Shape shape = shape_of(in[0]);
    for (int32_t i = 0; i < n; ++i) {
      shape[axis_] = sizes[i];
      set_output(out[i], in[0].dtype, shape);
    }
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t elem = dtype_size(in[0].dtype);
    int64_t outer = 1, inner = static_cast<int64_t>(elem);
    for (int64_t a = 0; a < axis_; ++a) outer *= in[0].dims[a];
    for (int64_t a = axis_ + 1; a < in[0].rank; ++a) inner *= in[0].dims[a];
    const char* src = static_cast<const char*>(in[0].data);
    for (int64_t o = 0; o < outer; ++o)
      for (int32_t i = 0; i < node.num_outputs; ++i) {
        int64_t chunk = out[i].dims[axis_] * inner;
        if (chunk == 0) continue;
        std::memcpy(static_cast<char*>(out[i].data) + o * chunk, src, static_cast<size_t>(chunk));
        src += chunk;
      }
  }

 private:
  int64_t axis_ = 0;
};

class SliceOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    elem_size(in[0].dtype, "data");
    int64_t rank = in[0].rank;
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

    Shape in_shape = shape_of(in[0]), shape = in_shape;
    std::vector<int64_t> in_strides = strides_of(in_shape);
    strides_ = in_strides;
    offset_ = 0;
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t axis = normalize_axis(axes[i], rank, "axes entry");
      if (seen[axis]) fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is sliced twice", static_cast<long long>(axis));
      seen[axis] = true;
      int64_t dim = in_shape[axis], step = steps[i], start = starts[i], end = ends[i];
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
      if (len > 0) offset_ += start * in_strides[axis];
      strides_[axis] = in_strides[axis] * step;
    }
    set_output(out[0], in[0].dtype, shape);
    shape_ = shape;
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (numel(shape_) == 0) return;
    size_t elem = dtype_size(in[0].dtype);
    copy_view(out[0].data, static_cast<const char*>(in[0].data) + offset_ * static_cast<int64_t>(elem), shape_,
              strides_, elem);
  }

 private:
  Shape shape_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
};

int32_t tile_supports(const edgert_node* node, const edgert_tensor*) {
  return node->opset >= 6;  // Tile-1 took tiles and axis inputs
}

int32_t pad_supports(const edgert_node* node, const edgert_tensor*) {
  std::string mode = Attributes(node).get_string("mode", "constant");
  return mode == "constant" || mode == "reflect" || mode == "edge" || mode == "wrap";
}

class TileOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    elem_size(in[0].dtype, "input");
    info.data_dependent = 1;
    std::vector<int64_t> repeats = read_ints(in[1], "repeats");
    if (static_cast<int32_t>(repeats.size()) != in[0].rank)
      fail(EDGERT_ERR_SHAPE, "repeats has %zu entries, input has rank %d", repeats.size(), in[0].rank);
    // The output is a view [r0, d0, r1, d1, ...] of the input with stride 0 on each r axis.
    Shape in_shape = shape_of(in[0]), shape;
    std::vector<int64_t> in_strides = strides_of(in_shape);
    view_shape_.clear();
    view_strides_.clear();
    for (size_t a = 0; a < repeats.size(); ++a) {
      if (repeats[a] < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "repeats must not be negative");
      shape.push_back(in_shape[a] * repeats[a]);
      view_shape_.insert(view_shape_.end(), {repeats[a], in_shape[a]});
      view_strides_.insert(view_strides_.end(), {0, in_strides[a]});
    }
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_view(out[0].data, in[0].data, view_shape_, view_strides_, dtype_size(in[0].dtype));
  }

 private:
  Shape view_shape_;
  std::vector<int64_t> view_strides_;
};

class PadOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    const size_t elem = elem_size(in[0].dtype, "data");
    int64_t rank = in[0].rank;
    std::string mode = attrs.get_string("mode", "constant");
    if (mode == "constant") mode_ = PadMode::Constant;
    else if (mode == "reflect") mode_ = PadMode::Reflect;
    else if (mode == "edge") mode_ = PadMode::Edge;
    else if (mode == "wrap") mode_ = PadMode::Wrap;
    else fail(EDGERT_ERR_UNSUPPORTED, "mode '%s' is not one of constant, reflect, edge, wrap", mode.c_str());

    std::vector<int64_t> pads;
    std::memset(value_, 0, sizeof value_);
    if (node.opset < 11) {  // pads and value were attributes ("paddings" in Pad-1)
      pads = attrs.get_ints(node.opset < 2 ? "paddings" : "pads");
      float value = attrs.get_float("value", 0.0f);
      dispatch(in[0].dtype, kAll, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T v = static_cast<T>(static_cast<compute_t<T>>(value));
        std::memcpy(value_, &v, sizeof v);
      }, "data");
    } else {
      info.data_dependent = 1;
      pads = read_ints(in[1], "pads");
      if (node.num_inputs > 3 && is_present(in[3])) {  // opset 18 axes: pads cover only these axes
        std::vector<int64_t> axes = read_ints(in[3], "axes");
        if (pads.size() != 2 * axes.size())
          fail(EDGERT_ERR_SHAPE, "pads has %zu entries for %zu axes", pads.size(), axes.size());
        std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
        for (size_t i = 0; i < axes.size(); ++i) {
          int64_t a = normalize_axis(axes[i], rank, "axes entry");
          full[a] = pads[i];
          full[a + rank] = pads[i + axes.size()];
        }
        pads = full;
      }
      // constant_value's bytes are read at execute: it does not decide shapes
      has_value_input_ = node.num_inputs > 2 && is_present(in[2]) && numel(in[2]) > 0;
      if (has_value_input_ && in[2].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "constant_value has dtype %s, data has %s", dtype_name(in[2].dtype), dtype_name(in[0].dtype));
    }
    if (static_cast<int64_t>(pads.size()) != 2 * rank)
      fail(EDGERT_ERR_SHAPE, "pads has %zu entries, expected %lld for rank %lld", pads.size(),
           static_cast<long long>(2 * rank), static_cast<long long>(rank));
    begin_.assign(pads.begin(), pads.begin() + rank);
    Shape shape = shape_of(in[0]);
    for (int64_t a = 0; a < rank; ++a) {
      if (mode_ != PadMode::Constant && shape[a] == 0 && (pads[a] > 0 || pads[a + rank] > 0))
        fail(EDGERT_ERR_SHAPE, "mode '%s' cannot pad axis %lld of size 0", mode.c_str(), static_cast<long long>(a));
      shape[a] += pads[a] + pads[a + rank];
      if (shape[a] < 0) fail(EDGERT_ERR_SHAPE, "pads crop axis %lld below zero", static_cast<long long>(a));
    }
    set_output(out[0], in[0].dtype, shape);
    by_rows_ = tactic() == kPadRowsTactic;
    if (by_rows_) rows_pad_.prepare(mode_, shape_of(in[0]), pads, elem);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t elem = dtype_size(in[0].dtype);
    int64_t total = numel(out[0]);
    if (total == 0) return;
    unsigned char value[sizeof value_];
    std::memcpy(value, value_, sizeof value);
    if (has_value_input_) std::memcpy(value, in[2].data, elem);
    if (by_rows_) return rows_pad_.execute(in[0].data, out[0].data, value);
    int32_t rank = out[0].rank;
    const int64_t* in_shape = in[0].dims;
    int64_t in_strides[EDGERT_MAX_RANK], counter[EDGERT_MAX_RANK] = {};
    int64_t stride = 1;
    for (int32_t a = rank; a-- > 0;) {
      in_strides[a] = stride;
      stride *= in_shape[a];
    }
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t i = 0; i < total; ++i, dst += elem) {
      // Map each output coordinate back to the input; constant mode writes the value when
      // any coordinate falls outside.
      int64_t offset = 0;
      bool outside = false;
      for (int32_t a = 0; a < rank; ++a) {
        int64_t n = in_shape[a], x = counter[a] - begin_[a];
        if (x < 0 || x >= n) {
          switch (mode_) {
            case PadMode::Constant: outside = true; break;
            case PadMode::Edge: x = x < 0 ? 0 : n - 1; break;
            case PadMode::Wrap: x = ((x % n) + n) % n; break;
            case PadMode::Reflect:
              if (n == 1) {
                x = 0;
              } else {  // reflect without repeating the edge, period 2(n-1)
                int64_t period = 2 * (n - 1);
                x = ((x % period) + period) % period;
                if (x >= n) x = period - x;
              }
              break;
          }
        }
        offset += x * in_strides[a];
      }
      std::memcpy(dst, outside ? reinterpret_cast<const char*>(value) : src + offset * static_cast<int64_t>(elem), elem);
      for (int32_t a = rank; a-- > 0;) {
        if (++counter[a] < out[0].dims[a]) break;
        counter[a] = 0;
      }
    }
  }

 private:
  PadMode mode_ = PadMode::Constant;
  std::vector<int64_t> begin_;
  unsigned char value_[16];
  bool has_value_input_ = false;
  bool by_rows_ = false;  // the xx-pad-rows tactic
  FastPad rows_pad_;
};

// DepthToSpace and SpaceToDepth: a 6-D view of the NCHW input copied into the output.
class DepthToSpaceOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    elem_size(in[0].dtype, "input");
    if (in[0].rank != 4) fail(EDGERT_ERR_SHAPE, "input must be 4-D NCHW, got rank %d", in[0].rank);
    int64_t b = attrs.get_int("blocksize", 0);
    std::string mode = attrs.get_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") fail(EDGERT_ERR_INVALID_ARGUMENT, "mode must be DCR or CRD, got '%s'", mode.c_str());
    int64_t n = in[0].dims[0], c = in[0].dims[1], h = in[0].dims[2], w = in[0].dims[3];
    if (b <= 0 || c % (b * b) != 0)
      fail(EDGERT_ERR_SHAPE, "channels %lld are not divisible by blocksize^2 (blocksize %lld)", static_cast<long long>(c),
           static_cast<long long>(b));
    int64_t oc = c / (b * b);
    // Strides of the channel split: DCR reads channel (b1*b + b2)*oc + c, CRD c*b*b + b1*b + b2.
    int64_t hw = h * w, s_c, s_b1, s_b2;
    if (mode == "DCR") {
      s_b1 = b * oc * hw, s_b2 = oc * hw, s_c = hw;
    } else {
      s_c = b * b * hw, s_b1 = b * hw, s_b2 = hw;
    }
    view_shape_ = {n, oc, h, b, w, b};
    view_strides_ = {c * hw, s_c, w, s_b1, 1, s_b2};
    set_output(out[0], in[0].dtype, {n, oc, h * b, w * b});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_view(out[0].data, in[0].data, view_shape_, view_strides_, dtype_size(in[0].dtype));
  }

 private:
  Shape view_shape_;
  std::vector<int64_t> view_strides_;
};

class SpaceToDepthOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "input");
    if (in[0].rank != 4) fail(EDGERT_ERR_SHAPE, "input must be 4-D NCHW, got rank %d", in[0].rank);
    int64_t b = Attributes(&node).get_int("blocksize", 0);
    int64_t n = in[0].dims[0], c = in[0].dims[1], h = in[0].dims[2], w = in[0].dims[3];
    if (b <= 0 || h % b != 0 || w % b != 0)
      fail(EDGERT_ERR_SHAPE, "spatial dims %lldx%lld are not divisible by blocksize %lld", static_cast<long long>(h),
           static_cast<long long>(w), static_cast<long long>(b));
    // Output channel (b1*b + b2)*c + ch takes input (ch, y*b + b1, x*b + b2).
    view_shape_ = {n, b, b, c, h / b, w / b};
    view_strides_ = {c * h * w, w, 1, h * w, b * w, b};
    set_output(out[0], in[0].dtype, {n, c * b * b, h / b, w / b});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_view(out[0].data, in[0].data, view_shape_, view_strides_, dtype_size(in[0].dtype));
  }

 private:
  Shape view_shape_;
  std::vector<int64_t> view_strides_;
};

class TriluOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "input");
    if (in[0].rank < 2) fail(EDGERT_ERR_SHAPE, "input must have rank >= 2, got %d", in[0].rank);
    upper_ = Attributes(&node).get_int("upper", 1) != 0;
    has_k_ = node.num_inputs > 1 && is_present(in[1]);
    if (has_k_ && (numel(in[1]) != 1 || in[1].dtype != EDGERT_DTYPE_INT64))
      fail(EDGERT_ERR_SHAPE, "k must be an int64 scalar, got %s of %lld elements", dtype_name(in[1].dtype),
           static_cast<long long>(numel(in[1])));
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t total = numel(in[0]);
    if (total == 0) return;
    int64_t k = has_k_ ? *data_as<const int64_t>(in[1]) : 0;  // a value, not a shape: read it here
    size_t elem = dtype_size(in[0].dtype);
    int64_t rows = in[0].dims[in[0].rank - 2], cols = in[0].dims[in[0].rank - 1];
    int64_t row_bytes = cols * static_cast<int64_t>(elem);
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t r = 0; r < total / cols; ++r, src += row_bytes, dst += row_bytes) {
      int64_t i = r % rows;
      // upper keeps j >= i + k, lower keeps j <= i + k: [keep_begin, keep_end) of each row
      int64_t keep_begin = upper_ ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      int64_t keep_end = upper_ ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      std::memset(dst, 0, static_cast<size_t>(row_bytes));
      if (keep_end > keep_begin)
        std::memcpy(dst + keep_begin * static_cast<int64_t>(elem), src + keep_begin * static_cast<int64_t>(elem),
                    static_cast<size_t>((keep_end - keep_begin)) * elem);
    }
  }

 private:
  bool upper_ = true;
  bool has_k_ = false;
};

}  // namespace

void register_tensor_layout_kernels(KernelRegistry& r) {
  r.add<TransposeOp>("Transpose", "ref-transpose", nullptr, transpose_tactics);
  r.add<ConcatOp>("Concat", "ref-concat");
  r.add<SplitOp>("Split", "ref-split");
  r.add<SliceOp>("Slice", "ref-slice");
  r.add<TileOp>("Tile", "ref-tile", tile_supports);
  r.add<PadOp>("Pad", "ref-pad", pad_supports, pad_tactics);
  r.add<DepthToSpaceOp>("DepthToSpace", "ref-depth-to-space");
  r.add<SpaceToDepthOp>("SpaceToDepth", "ref-space-to-depth");
  r.add<TriluOp>("Trilu", "ref-trilu");
}

}  // namespace edgert::cpu
