// Ops that produce or reinterpret shapes: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
// Expand, ConstantOfShape, Range, EyeLike.
//
// Data movement is done by bytes (dtype_size per element), so one instantiation serves every
// dtype; only ops that must make up values (Range, EyeLike) dispatch over types.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "broadcast.h"
#include "kernel.h"

namespace edgert::cpu {
namespace {

// Bytes per element, refusing dtypes that cannot be moved by bytes (strings, undefined).
size_t elem_size(edgert_dtype dtype, const char* what) {
  size_t size = dtype_size(dtype);
  if (size == 0) throw_unsupported_dtype(dtype, what);
  return size;
}

// Copies input 0 to output 0 unchanged: the ops that only reinterpret the shape.
void copy_data(const edgert_tensor& in, edgert_tensor& out) {
  size_t bytes = static_cast<size_t>(numel(in)) * dtype_size(in.dtype);
  if (bytes && out.data != in.data) std::memcpy(out.data, in.data, bytes);
}

class ShapeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    // Opset 15 selects a range of dims; out-of-range start/end clamp like Python slicing.
    Attributes attrs(&node);
    int64_t rank = in[0].rank;
    start_ = attrs.get_int("start", 0);
    end_ = attrs.get_int("end", rank);
    if (start_ < 0) start_ += rank;
    if (end_ < 0) end_ += rank;
    start_ = std::clamp<int64_t>(start_, 0, rank);
    end_ = std::clamp<int64_t>(end_, 0, rank);
    set_output(out[0], EDGERT_DTYPE_INT64, {std::max<int64_t>(end_ - start_, 0)});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t* o = data_as<int64_t>(out[0]);
    for (int64_t i = start_; i < end_; ++i) o[i - start_] = in[0].dims[i];
  }

 private:
  int64_t start_ = 0, end_ = 0;
};

class SizeOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor*, edgert_tensor* out, edgert_prepare_info&) override {
    set_output(out[0], EDGERT_DTYPE_INT64, {});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    *data_as<int64_t>(out[0]) = numel(in[0]);
  }
};

class ReshapeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    elem_size(in[0].dtype, "data");
    std::vector<int64_t> shape;
    if (node.opset < 5) {  // Reshape-1 took the shape as an attribute
      shape = attrs.get_ints("shape");
    } else {
      info.data_dependent = 1;
      if (node.num_inputs < 2 || in[1].rank != 1)
        fail(EDGERT_ERR_SHAPE, "shape input must be a 1-D tensor");
      shape = read_ints(in[1], "shape");
    }
    bool allowzero = attrs.get_int("allowzero", 0) != 0;
    int64_t total = numel(in[0]), known = 1;
    int64_t inferred = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowzero) {
        // 0 copies the input's dim at the same position
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
        fail(EDGERT_ERR_SHAPE, "cannot infer the -1 in shape %s for %lld elements",
             shape_string(shape).c_str(), static_cast<long long>(total));
      shape[inferred] = total / known;
    }
    if (numel(shape) != total)
      fail(EDGERT_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s", shape_string(shape_of(in[0])).c_str(),
           static_cast<long long>(total), shape_string(shape).c_str());
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_data(in[0], out[0]);
  }
};

class FlattenOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "input");
    int64_t rank = in[0].rank;
    int64_t axis = Attributes(&node).get_int("axis", 1);
    if (axis < -rank || axis > rank)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is out of range [-%lld, %lld]", static_cast<long long>(axis),
           static_cast<long long>(rank), static_cast<long long>(rank));
    if (axis < 0) axis += rank;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= in[0].dims[i];
    set_output(out[0], in[0].dtype, {outer, inner});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_data(in[0], out[0]);
  }
};

// Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from 13 on.
bool read_axes(const edgert_node& node, const edgert_tensor* in, edgert_prepare_info& info,
               std::vector<int64_t>& axes) {
  if (node.opset < 13) {
    Attributes attrs(&node);
    if (!attrs.has("axes")) return false;
    axes = attrs.get_ints("axes");
    return true;
  }
  if (node.num_inputs < 2 || !is_present(in[1])) return false;
  info.data_dependent = 1;
  axes = read_ints(in[1], "axes");
  return true;
}

class SqueezeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    elem_size(in[0].dtype, "data");
    int64_t rank = in[0].rank;
    std::vector<int64_t> axes;
    std::vector<bool> drop(static_cast<size_t>(rank), false);
    // Empty axes squeeze every dim of 1, as when absent (ONNX Runtime does the same).
    if (read_axes(node, in, info, axes) && !axes.empty()) {
      for (int64_t a : axes) {
        a = normalize_axis(a, rank, "axes entry");
        if (in[0].dims[a] != 1)
          fail(EDGERT_ERR_SHAPE, "cannot squeeze axis %lld of shape %s: its dim is not 1",
               static_cast<long long>(a), shape_string(shape_of(in[0])).c_str());
        drop[a] = true;
      }
    } else {  // no axes: drop every dim of 1
      for (int64_t a = 0; a < rank; ++a) drop[a] = in[0].dims[a] == 1;
    }
    Shape shape;
    for (int64_t a = 0; a < rank; ++a)
      if (!drop[a]) shape.push_back(in[0].dims[a]);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_data(in[0], out[0]);
  }
};

class UnsqueezeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    elem_size(in[0].dtype, "data");
    std::vector<int64_t> axes;
    if (!read_axes(node, in, info, axes)) fail(EDGERT_ERR_INVALID_ARGUMENT, "axes are required");
    int64_t out_rank = in[0].rank + static_cast<int64_t>(axes.size());
    if (out_rank > EDGERT_MAX_RANK)
      fail(EDGERT_ERR_UNSUPPORTED, "output rank %lld exceeds %d", static_cast<long long>(out_rank), EDGERT_MAX_RANK);
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int64_t a : axes) {
      a = normalize_axis(a, out_rank, "axes entry");  // axes refer to the output's rank
      if (inserted[a]) fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is repeated", static_cast<long long>(a));
      inserted[a] = true;
    }
    Shape shape;
    int32_t next = 0;
    for (int64_t a = 0; a < out_rank; ++a) shape.push_back(inserted[a] ? 1 : in[0].dims[next++]);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_data(in[0], out[0]);
  }
};

class ExpandOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    elem_size(in[0].dtype, "input");
    info.data_dependent = 1;
    std::vector<int64_t> shape = read_ints(in[1], "shape");
    // Bidirectional: a 1 in `shape` keeps the input's dim (unlike plain broadcasting to shape).
    set_output(out[0], in[0].dtype, broadcast_shapes({shape_of(in[0]), shape}));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t size = dtype_size(in[0].dtype);
    Shape so = shape_of(out[0]), si = shape_of(in[0]);
    if (numel(so) == 0) return;
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    for (BroadcastIterator it(so, {si}); !it.done(); it.next())
      std::memcpy(dst + it.index() * size, src + it.offset(0) * size, size);
  }
};

class ConstantOfShapeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    info.data_dependent = 1;
    const edgert_tensor* value = Attributes(&node).get_tensor("value");
    dtype_ = EDGERT_DTYPE_FLOAT32;  // default: a float 0
    std::memset(value_, 0, sizeof value_);
    if (value) {
      if (numel(*value) != 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "value must hold one element, it holds %lld",
                                   static_cast<long long>(numel(*value)));
      dtype_ = value->dtype;
      if (!value->data) fail(EDGERT_ERR_INVALID_ARGUMENT, "value attribute has no data");
      std::memcpy(value_, value->data, elem_size(dtype_, "value"));
    }
    if (in[0].rank != 1) fail(EDGERT_ERR_SHAPE, "input must be a 1-D shape, got rank %d", in[0].rank);
    set_output(out[0], dtype_, read_ints(in[0], "shape"));
  }
  void execute(const edgert_node&, const edgert_tensor*, edgert_tensor* out, void*) override {
    size_t size = dtype_size(dtype_);
    char* dst = static_cast<char*>(out[0].data);
    int64_t n = numel(out[0]);
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * size, value_, size);
  }

 private:
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  unsigned char value_[16];
};

constexpr unsigned kRangeTypes = kFloats | kSigned;

class RangeOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    info.data_dependent = 1;
    for (int i = 1; i < 3; ++i)
      if (in[i].dtype != in[0].dtype)
        fail(EDGERT_ERR_SHAPE, "input %d has dtype %s, start has %s", i, dtype_name(in[i].dtype), dtype_name(in[0].dtype));
    int64_t n = dispatch(in[0].dtype, kRangeTypes, [&](auto tag) -> int64_t {
      using T = typename decltype(tag)::type;
      if constexpr (is_float_like_v<T>) {
        double start = read_scalar(in[0], "start"), limit = read_scalar(in[1], "limit"),
               delta = read_scalar(in[2], "delta");
        if (delta == 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "delta must not be 0");
        return static_cast<int64_t>(std::max(std::ceil((limit - start) / delta), 0.0));
      } else {  // exact integer ceil((limit - start) / delta)
        int64_t start = read_ints(in[0], "start").at(0), limit = read_ints(in[1], "limit").at(0),
                delta = read_ints(in[2], "delta").at(0);
        if (delta == 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "delta must not be 0");
        int64_t span = limit - start;
        int64_t q = span / delta;
        if (span % delta != 0 && ((span < 0) == (delta < 0))) ++q;
        return std::max<int64_t>(q, 0);
      }
    }, "start");
    set_output(out[0], in[0].dtype, {n});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(in[0].dtype, kRangeTypes, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      C value = static_cast<C>(*data_as<T>(in[0]));
      C delta = static_cast<C>(*data_as<T>(in[2]));
      T* o = data_as<T>(out[0]);
      int64_t n = numel(out[0]);
      // Accumulate like the ONNX function body and ONNX Runtime do.
      for (int64_t i = 0; i < n; ++i, value += delta) o[i] = static_cast<T>(value);
    });
  }
};

class EyeLikeOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    if (in[0].rank != 2) fail(EDGERT_ERR_SHAPE, "input must be 2-D, got rank %d", in[0].rank);
    edgert_dtype dtype = static_cast<edgert_dtype>(attrs.get_int("dtype", in[0].dtype));
    dispatch(dtype, kAll, [](auto) {}, "output");
    k_ = attrs.get_int("k", 0);
    set_output(out[0], dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor*, edgert_tensor* out, void*) override {
    int64_t rows = out[0].dims[0], cols = out[0].dims[1];
    if (rows * cols == 0) return;
    std::memset(out[0].data, 0, static_cast<size_t>(rows * cols) * dtype_size(out[0].dtype));
    dispatch(out[0].dtype, kAll, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* o = data_as<T>(out[0]);
      for (int64_t i = 0; i < rows; ++i) {
        int64_t j = i + k_;
        if (j >= 0 && j < cols) o[i * cols + j] = static_cast<T>(compute_t<T>(1));
      }
    });
  }

 private:
  int64_t k_ = 0;
};

}  // namespace

void register_tensor_shape_kernels(KernelRegistry& r) {
  r.add<ShapeOp>("Shape", "ref-shape");
  r.add<SizeOp>("Size", "ref-size");
  r.add<ReshapeOp>("Reshape", "ref-reshape");
  r.add<FlattenOp>("Flatten", "ref-flatten");
  r.add<SqueezeOp>("Squeeze", "ref-squeeze");
  r.add<UnsqueezeOp>("Unsqueeze", "ref-unsqueeze");
  r.add<ExpandOp>("Expand", "ref-expand");
  r.add<ConstantOfShapeOp>("ConstantOfShape", "ref-constant-of-shape");
  r.add<RangeOp>("Range", "ref-range");
  r.add<EyeLikeOp>("EyeLike", "ref-eye-like");
}

}  // namespace edgert::cpu
