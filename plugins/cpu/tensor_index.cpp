// Ops that move elements by index tensors: Gather, GatherElements, GatherND, ScatterElements
// (and the deprecated Scatter), ScatterND, Compress, NonZero, OneHot, ReverseSequence.
//
// Elements move by bytes (dtype_size each), so one instantiation serves every dtype; only the
// scatter reductions, NonZero's test and OneHot's index conversion dispatch over types.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernel.h"

namespace edgert::cpu {
namespace {

size_t elem_size(edgert_dtype dtype, const char* what) {
  size_t size = dtype_size(dtype);
  if (size == 0) throw_unsupported_dtype(dtype, what);
  return size;
}

// Row-major element strides of t into strides[0, t.rank): fixed arrays keep execute allocation-free.
void strides_of(const edgert_tensor& t, int64_t* strides) {
  int64_t stride = 1;
  for (int32_t a = t.rank; a-- > 0;) {
    strides[a] = stride;
    stride *= t.dims[a];
  }
}

void require_index_dtype(const edgert_tensor& t, const char* what) {
  if (t.dtype != EDGERT_DTYPE_INT32 && t.dtype != EDGERT_DTYPE_INT64)
    fail(EDGERT_ERR_SHAPE, "%s must be int32 or int64, got %s", what, dtype_name(t.dtype));
}

// Element i of an int32/int64 index tensor (checked by require_index_dtype in prepare).
int64_t index_at(const edgert_tensor& t, int64_t i) {
  return t.dtype == EDGERT_DTYPE_INT32 ? data_as<const int32_t>(t)[i] : data_as<const int64_t>(t)[i];
}

// Resolves a possibly negative index against a dim of size n, failing when out of range.
int64_t resolve_index(int64_t index, int64_t n, const char* what) {
  int64_t resolved = index < 0 ? index + n : index;
  if (resolved < 0 || resolved >= n)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "%s %lld is out of range for a dim of %lld", what,
         static_cast<long long>(index), static_cast<long long>(n));
  return resolved;
}

void copy_input(const edgert_tensor& in, edgert_tensor& out) {
  size_t bytes = static_cast<size_t>(numel(in)) * dtype_size(in.dtype);
  if (bytes && out.data != in.data) std::memcpy(out.data, in.data, bytes);
}

// Advances a row-major multi-index over the dims of t by one.
void advance(int64_t* counter, const edgert_tensor& t) {
  for (int32_t a = t.rank; a-- > 0;) {
    if (++counter[a] < t.dims[a]) return;
    counter[a] = 0;
  }
}

class GatherOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "data");
    require_index_dtype(in[1], "indices");
    axis_ = normalize_axis(Attributes(&node).get_int("axis", 0), in[0].rank);
    Shape shape(in[0].dims, in[0].dims + axis_);
    shape.insert(shape.end(), in[1].dims, in[1].dims + in[1].rank);
    shape.insert(shape.end(), in[0].dims + axis_ + 1, in[0].dims + in[0].rank);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t elem = static_cast<int64_t>(dtype_size(in[0].dtype));
    int64_t outer = 1, inner = elem, n = in[0].dims[axis_], count = numel(in[1]);
    for (int64_t a = 0; a < axis_; ++a) outer *= in[0].dims[a];
    for (int64_t a = axis_ + 1; a < in[0].rank; ++a) inner *= in[0].dims[a];
    if (numel(out[0]) == 0) return;
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < count; ++j, dst += inner) {
        int64_t idx = resolve_index(index_at(in[1], j), n, "index");
        std::memcpy(dst, src + (o * n + idx) * inner, static_cast<size_t>(inner));
      }
  }

 private:
  int64_t axis_ = 0;
};

// GatherElements/ScatterElements: off the axis, indices must stay within data's dims.
void check_element_indices_fit(const edgert_tensor& data, const edgert_tensor& indices, int64_t axis) {
  for (int32_t a = 0; a < data.rank; ++a)
    if (a != axis && indices.dims[a] > data.dims[a])
      fail(EDGERT_ERR_SHAPE, "indices %s exceed data %s on axis %d", shape_string(shape_of(indices)).c_str(),
           shape_string(shape_of(data)).c_str(), a);
}

class GatherElementsOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "data");
    require_index_dtype(in[1], "indices");
    if (in[0].rank != in[1].rank || in[0].rank < 1)
      fail(EDGERT_ERR_SHAPE, "data (rank %d) and indices (rank %d) must have the same rank >= 1", in[0].rank, in[1].rank);
    axis_ = normalize_axis(Attributes(&node).get_int("axis", 0), in[0].rank);
    check_element_indices_fit(in[0], in[1], axis_);
    set_output(out[0], in[0].dtype, shape_of(in[1]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t elem = dtype_size(in[0].dtype);
    int64_t strides[EDGERT_MAX_RANK], counter[EDGERT_MAX_RANK] = {};
    strides_of(in[0], strides);
    int64_t total = numel(in[1]);
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t i = 0; i < total; ++i, advance(counter, in[1])) {
      // The output position, with the axis coordinate replaced by the index.
      int64_t offset = 0;
      for (int32_t a = 0; a < in[1].rank; ++a)
        offset += (a == axis_ ? resolve_index(index_at(in[1], i), in[0].dims[a], "index")
                                                    : counter[a]) * strides[a];
      std::memcpy(dst + i * static_cast<int64_t>(elem), src + offset * static_cast<int64_t>(elem), elem);
    }
  }

 private:
  int64_t axis_ = 0;
};

class GatherNDOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "data");
    if (in[1].dtype != EDGERT_DTYPE_INT64) fail(EDGERT_ERR_SHAPE, "indices must be int64, got %s", dtype_name(in[1].dtype));
    batch_dims_ = Attributes(&node).get_int("batch_dims", 0);
    int32_t r = in[0].rank, q = in[1].rank;
    if (q < 1 || r < 1) fail(EDGERT_ERR_SHAPE, "data and indices must have rank >= 1");
    int64_t k = in[1].dims[q - 1];
    if (batch_dims_ < 0 || batch_dims_ >= std::min(r, q) || batch_dims_ + k > r)
      fail(EDGERT_ERR_SHAPE, "batch_dims %lld and index depth %lld do not fit data rank %d, indices rank %d",
           static_cast<long long>(batch_dims_), static_cast<long long>(k), r, q);
    for (int64_t a = 0; a < batch_dims_; ++a)
      if (in[0].dims[a] != in[1].dims[a]) fail(EDGERT_ERR_SHAPE, "batch dim %lld differs between data and indices", static_cast<long long>(a));
    Shape shape(in[1].dims, in[1].dims + q - 1);
    shape.insert(shape.end(), in[0].dims + batch_dims_ + k, in[0].dims + r);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t elem = static_cast<int64_t>(dtype_size(in[0].dtype));
    int32_t r = in[0].rank, q = in[1].rank;
    int64_t k = in[1].dims[q - 1];
    int64_t strides[EDGERT_MAX_RANK];
    strides_of(in[0], strides);
    int64_t batches = 1, per_batch = 1;  // index tuples per batch
    for (int64_t a = 0; a < batch_dims_; ++a) batches *= in[0].dims[a];
    for (int64_t a = batch_dims_; a < q - 1; ++a) per_batch *= in[1].dims[a];
    int64_t batch_stride = batch_dims_ > 0 ? strides[batch_dims_ - 1] : 0;
    int64_t slice = elem;  // bytes of data.shape[batch_dims + k:] copied per index tuple
    for (int64_t a = batch_dims_ + k; a < r; ++a) slice *= in[0].dims[a];
    if (numel(out[0]) == 0) return;
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    const int64_t* idx = data_as<const int64_t>(in[1]);
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t t = 0; t < per_batch; ++t, idx += k, dst += slice) {
        int64_t offset = b * batch_stride;
        for (int64_t j = 0; j < k; ++j)
          offset += resolve_index(idx[j], in[0].dims[batch_dims_ + j], "index") * strides[batch_dims_ + j];
        std::memcpy(dst, src + offset * elem, static_cast<size_t>(slice));
      }
  }

 private:
  int64_t batch_dims_ = 0;
};

enum class Reduction { None, Add, Mul, Max, Min };

Reduction parse_reduction(const edgert_node& node) {
  std::string r = Attributes(&node).get_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  fail(EDGERT_ERR_UNSUPPORTED, "reduction '%s' is not one of none, add, mul, max, min", r.c_str());
}

int32_t scatter_supports(const edgert_node* node, const edgert_tensor*) {
  std::string r = Attributes(node).get_string("reduction", "none");
  return r == "none" || r == "add" || r == "mul" || r == "max" || r == "min";
}

// Combines `count` elements of `update` into `target` (both typed T) with reduction `red`.
template <typename T>
void reduce_into(T* target, const T* update, int64_t count, Reduction red) {
  using C = compute_t<T>;
  for (int64_t i = 0; i < count; ++i) {
    C a = static_cast<C>(target[i]), b = static_cast<C>(update[i]);
    C r = red == Reduction::Add ? C(a + b) : red == Reduction::Mul ? C(a * b) : red == Reduction::Max ? std::max(a, b) : std::min(a, b);
    target[i] = static_cast<T>(r);
  }
}

// Writes `count` elements at `src` into `dst`: a copy without reduction, else typed arithmetic.
void scatter_into(char* dst, const char* src, int64_t count, edgert_dtype dtype, Reduction red) {
  if (red == Reduction::None) {
    std::memcpy(dst, src, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  dispatch(dtype, kNumeric, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_into<T>(reinterpret_cast<T*>(dst), reinterpret_cast<const T*>(src), count, red);
  }, "data");
}

// ScatterElements and the deprecated Scatter (opset 9-10, no reduction).
class ScatterElementsOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "data");
    require_index_dtype(in[1], "indices");
    reduction_ = parse_reduction(node);
    if (reduction_ != Reduction::None) dispatch(in[0].dtype, kNumeric, [](auto) {}, "data");
    if (in[2].dtype != in[0].dtype)
      fail(EDGERT_ERR_SHAPE, "updates has dtype %s, data has %s", dtype_name(in[2].dtype), dtype_name(in[0].dtype));
    if (shape_of(in[1]) != shape_of(in[2]))
      fail(EDGERT_ERR_SHAPE, "indices %s and updates %s must have the same shape", shape_string(shape_of(in[1])).c_str(),
           shape_string(shape_of(in[2])).c_str());
    if (in[1].rank != in[0].rank || in[0].rank < 1)
      fail(EDGERT_ERR_SHAPE, "data (rank %d) and indices (rank %d) must have the same rank >= 1", in[0].rank, in[1].rank);
    axis_ = normalize_axis(Attributes(&node).get_int("axis", 0), in[0].rank);
    check_element_indices_fit(in[0], in[1], axis_);
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_input(in[0], out[0]);
    int64_t elem = static_cast<int64_t>(dtype_size(in[0].dtype));
    int64_t strides[EDGERT_MAX_RANK], counter[EDGERT_MAX_RANK] = {};
    strides_of(in[0], strides);
    int64_t total = numel(in[1]);
    const char* upd = static_cast<const char*>(in[2].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t i = 0; i < total; ++i, advance(counter, in[1])) {
      int64_t offset = 0;
      for (int32_t a = 0; a < in[1].rank; ++a)
        offset += (a == axis_ ? resolve_index(index_at(in[1], i), in[0].dims[a], "index")
                                                    : counter[a]) * strides[a];
      scatter_into(dst + offset * elem, upd + i * elem, 1, in[0].dtype, reduction_);
    }
  }

 private:
  int64_t axis_ = 0;
  Reduction reduction_ = Reduction::None;
};

class ScatterNDOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    elem_size(in[0].dtype, "data");
    if (in[1].dtype != EDGERT_DTYPE_INT64) fail(EDGERT_ERR_SHAPE, "indices must be int64, got %s", dtype_name(in[1].dtype));
    reduction_ = parse_reduction(node);
    if (reduction_ != Reduction::None) dispatch(in[0].dtype, kNumeric, [](auto) {}, "data");
    if (in[2].dtype != in[0].dtype)
      fail(EDGERT_ERR_SHAPE, "updates has dtype %s, data has %s", dtype_name(in[2].dtype), dtype_name(in[0].dtype));
    int32_t r = in[0].rank, q = in[1].rank;
    if (q < 1) fail(EDGERT_ERR_SHAPE, "indices must have rank >= 1");
    int64_t k = in[1].dims[q - 1];
    if (k > r) fail(EDGERT_ERR_SHAPE, "index depth %lld exceeds data rank %d", static_cast<long long>(k), r);
    // updates = indices.shape[:-1] + data.shape[k:]
    Shape expected(in[1].dims, in[1].dims + q - 1);
    expected.insert(expected.end(), in[0].dims + k, in[0].dims + r);
    if (shape_of(in[2]) != expected)
      fail(EDGERT_ERR_SHAPE, "updates has shape %s, expected %s", shape_string(shape_of(in[2])).c_str(),
           shape_string(expected).c_str());
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_input(in[0], out[0]);
    int64_t elem = static_cast<int64_t>(dtype_size(in[0].dtype));
    int32_t r = in[0].rank, q = in[1].rank;
    int64_t k = in[1].dims[q - 1];
    int64_t strides[EDGERT_MAX_RANK];
    strides_of(in[0], strides);
    int64_t slice = 1;
    for (int64_t a = k; a < r; ++a) slice *= in[0].dims[a];
    int64_t tuples = numel(in[1]) / std::max<int64_t>(k, 1);
    if (k == 0) tuples = numel(in[2]) / std::max<int64_t>(slice, 1);
    const int64_t* idx = data_as<const int64_t>(in[1]);
    const char* upd = static_cast<const char*>(in[2].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t t = 0; t < tuples; ++t, idx += k, upd += slice * elem) {
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) offset += resolve_index(idx[j], in[0].dims[j], "index") * strides[j];
      scatter_into(dst + offset * elem, upd, slice, in[0].dtype, reduction_);
    }
  }

 private:
  Reduction reduction_ = Reduction::None;
};

class CompressOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    elem_size(in[0].dtype, "input");
    if (in[1].dtype != EDGERT_DTYPE_BOOL || in[1].rank != 1)
      fail(EDGERT_ERR_SHAPE, "condition must be a 1-D bool tensor, got %s rank %d", dtype_name(in[1].dtype), in[1].rank);
    info.data_dependent = 1;
    Attributes attrs(&node);
    has_axis_ = attrs.has("axis");
    Shape shape;
    int64_t dim;
    if (has_axis_) {
      axis_ = normalize_axis(attrs.get_int("axis", 0), in[0].rank);
      shape = shape_of(in[0]);
      dim = shape[axis_];
    } else {  // no axis: works on the flattened input
      axis_ = 0;
      dim = numel(in[0]);
      shape = {dim};
    }
    // A shorter condition selects among the first entries only; extra entries are ignored.
    int64_t len = std::min(in[1].dims[0], dim);
    if (len > 0 && !in[1].data) fail(EDGERT_ERR_NEEDS_DATA, "values of condition are not known yet");
    const bool* cond = data_as<const bool>(in[1]);
    shape[axis_] = std::count(cond, cond + len, true);
    set_output(out[0], in[0].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t elem = static_cast<int64_t>(dtype_size(in[0].dtype));
    int64_t outer = 1, inner = elem, dim = numel(in[0]);
    if (has_axis_) {
      dim = in[0].dims[axis_];
      for (int64_t a = 0; a < axis_; ++a) outer *= in[0].dims[a];
      for (int64_t a = axis_ + 1; a < in[0].rank; ++a) inner *= in[0].dims[a];
    }
    if (numel(out[0]) == 0) return;
    const bool* cond = data_as<const bool>(in[1]);
    int64_t len = std::min(in[1].dims[0], dim);
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < len; ++j)
        if (cond[j]) {
          std::memcpy(dst, src + (o * dim + j) * inner, static_cast<size_t>(inner));
          dst += inner;
        }
  }

 private:
  bool has_axis_ = false;
  int64_t axis_ = 0;
};

// Calls fn(i) for each flat index i whose element of t is not zero (-0.0 counts as zero).
template <typename Fn>
void for_each_nonzero(const edgert_tensor& t, Fn&& fn) {
  dispatch(t.dtype, kAll, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = data_as<const T>(t);
    int64_t n = numel(t);
    for (int64_t i = 0; i < n; ++i)
      if (static_cast<compute_t<T>>(p[i]) != compute_t<T>(0)) fn(i);
  }, "input");
}

class NonZeroOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    info.data_dependent = 1;
    if (!in[0].data && numel(in[0]) > 0) fail(EDGERT_ERR_NEEDS_DATA, "values of the input are not known yet");
    int64_t count = 0;
    for_each_nonzero(in[0], [&](int64_t) { ++count; });
    // A scalar counts as a 1-D tensor of one element, as in ONNX Runtime.
    set_output(out[0], EDGERT_DTYPE_INT64, {std::max<int64_t>(in[0].rank, 1), count});
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t count = out[0].dims[1];
    if (count == 0) return;
    int64_t* o = data_as<int64_t>(out[0]);
    const int64_t* shape = in[0].dims;
    int32_t rank = in[0].rank;
    int64_t column = 0;
    for_each_nonzero(in[0], [&](int64_t i) {
      // Row a of the output holds coordinate a of each hit.
      for (int32_t a = rank; a-- > 0;) {
        o[a * count + column] = i % shape[a];
        i /= shape[a];
      }
      if (rank == 0) o[column] = 0;
      ++column;
    });
  }
};

class OneHotOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    info.data_dependent = 1;
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "indices");
    elem_size(in[2].dtype, "values");
    if (numel(in[2]) != 2) fail(EDGERT_ERR_SHAPE, "values must hold [off, on], it holds %lld elements",
                                static_cast<long long>(numel(in[2])));
    double depth = read_scalar(in[1], "depth");
    depth_ = static_cast<int64_t>(depth);
    if (depth_ < 1) fail(EDGERT_ERR_INVALID_ARGUMENT, "depth must be positive, got %g", depth);
    int64_t rank = in[0].rank;
    axis_ = normalize_axis(Attributes(&node).get_int("axis", -1), rank + 1);
    Shape shape = shape_of(in[0]);
    shape.insert(shape.begin() + axis_, depth_);
    set_output(out[0], in[2].dtype, shape);
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t elem = static_cast<int64_t>(dtype_size(in[2].dtype));
    int64_t total = numel(out[0]);
    const char* off = static_cast<const char*>(in[2].data);
    const char* on = off + elem;
    char* dst = static_cast<char*>(out[0].data);
    for (int64_t i = 0; i < total; ++i) std::memcpy(dst + i * elem, off, static_cast<size_t>(elem));
    int64_t inner = 1;  // indices elements after the inserted axis
    for (int64_t a = axis_; a < in[0].rank; ++a) inner *= in[0].dims[a];
    int64_t count = numel(in[0]);
    dispatch(in[0].dtype, kNumeric, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* idx = data_as<const T>(in[0]);
      for (int64_t p = 0; p < count; ++p) {
        int64_t v = static_cast<int64_t>(static_cast<compute_t<T>>(idx[p]));
        if (v < 0) v += depth_;  // negative indices count from the end; out of range stays "off"
        if (v < 0 || v >= depth_) continue;
        int64_t o = p / inner, i = p % inner;
        std::memcpy(dst + ((o * depth_ + v) * inner + i) * elem, on, static_cast<size_t>(elem));
      }
    }, "indices");
  }

 private:
  int64_t depth_ = 0;
  int64_t axis_ = 0;
};

class ReverseSequenceOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    elem_size(in[0].dtype, "input");
    require_index_dtype(in[1], "sequence_lens");
    if (in[0].rank < 2) fail(EDGERT_ERR_SHAPE, "input must have rank >= 2, got %d", in[0].rank);
    batch_axis_ = attrs.get_int("batch_axis", 1);
    time_axis_ = attrs.get_int("time_axis", 0);
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0)))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "batch_axis and time_axis must be 0 and 1 in some order, got %lld and %lld",
           static_cast<long long>(batch_axis_), static_cast<long long>(time_axis_));
    if (in[1].rank != 1 || in[1].dims[0] != in[0].dims[batch_axis_])
      fail(EDGERT_ERR_SHAPE, "sequence_lens must be 1-D of the batch size %lld", static_cast<long long>(in[0].dims[batch_axis_]));
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    int64_t elem = static_cast<int64_t>(dtype_size(in[0].dtype));
    int64_t inner = elem;  // bytes of one (batch, time) slab: the axes after the first two
    for (int32_t a = 2; a < in[0].rank; ++a) inner *= in[0].dims[a];
    int64_t batches = in[0].dims[batch_axis_], steps = in[0].dims[time_axis_];
    int64_t s_batch = batch_axis_ == 0 ? steps : 1, s_time = time_axis_ == 0 ? batches : 1;
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    if (numel(out[0]) == 0) return;
    for (int64_t b = 0; b < batches; ++b) {
      int64_t len = std::clamp<int64_t>(index_at(in[1], b), 0, steps);
      for (int64_t t = 0; t < steps; ++t) {
        int64_t from = t < len ? len - 1 - t : t;  // the first len steps reversed, the rest kept
        std::memcpy(dst + (b * s_batch + t * s_time) * inner, src + (b * s_batch + from * s_time) * inner,
                    static_cast<size_t>(inner));
      }
    }
  }

 private:
  int64_t batch_axis_ = 1, time_axis_ = 0;
};

}  // namespace

void register_tensor_index_kernels(KernelRegistry& r) {
  r.add<GatherOp>("Gather", "ref-gather");
  r.add<GatherElementsOp>("GatherElements", "ref-gather-elements");
  r.add<GatherNDOp>("GatherND", "ref-gather-nd");
  r.add<ScatterElementsOp>("ScatterElements", "ref-scatter-elements", scatter_supports);
  r.add<ScatterElementsOp>("Scatter", "ref-scatter", scatter_supports);
  r.add<ScatterNDOp>("ScatterND", "ref-scatter-nd", scatter_supports);
  r.add<CompressOp>("Compress", "ref-compress");
  r.add<NonZeroOp>("NonZero", "ref-nonzero");
  r.add<OneHotOp>("OneHot", "ref-one-hot");
  r.add<ReverseSequenceOp>("ReverseSequence", "ref-reverse-sequence");
}

}  // namespace edgert::cpu
