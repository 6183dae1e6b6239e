#include "sequence_ops.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "error.h"
#include "node_attributes.h"
#include "tensor_extent.h"

namespace edgert {
namespace {

// What went wrong in an op of this file; run_sequence_op turns it into the caller's error.
struct OpFailure {
  edgert_status status;
  std::string message;
};

[[noreturn]] __attribute__((format(printf, 2, 3))) void fail(edgert_status status, const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  throw OpFailure{status, buffer};
}

// The ops' view of one node: its inputs, and its outputs written through the executor.
class SequenceNode {
 public:
  SequenceNode(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values)
      : executor_(executor), node_(node), values_(values) {}

  bool has_input(size_t i) const { return i < node_.inputs.size() && node_.inputs[i] >= 0; }
  const edgert_tensor& input(size_t i) const {
    if (!has_input(i)) fail(EDGERT_ERR_INVALID_ARGUMENT, "input %zu is missing", i);
    return values_[node_.inputs[i]];
  }
  const edgert_sequence& sequence(size_t i) const {
    const edgert_sequence* s = sequence_of(input(i));
    if (!s) fail(EDGERT_ERR_SHAPE, "input %zu is a %s, not a sequence", i, dtype_name(input(i).dtype));
    return *s;
  }
  const edgert_tensor& tensor(size_t i) const {
    const edgert_tensor& t = input(i);
    if (t.dtype == EDGERT_DTYPE_SEQUENCE || t.dtype == EDGERT_DTYPE_UNDEFINED)
      fail(EDGERT_ERR_SHAPE, "input %zu is %s, not a tensor", i, t.dtype == EDGERT_DTYPE_SEQUENCE ? "a sequence" : "empty");
    return t;
  }
  // The element dtype the engine declares for output `i` (0 when the builder did not know it).
  edgert_dtype declared_dtype(size_t i) const {
    return static_cast<edgert_dtype>(executor_.graph().tensors[node_.outputs[i]].dtype);
  }

  void set(size_t i, const edgert_tensor& value) {
    if (i >= node_.outputs.size() || node_.outputs[i] < 0) return;
    edgert_error error{};
    if (executor_.set_value(node_.outputs[i], value, node_.node.name, &error) != EDGERT_OK)
      throw OpFailure{error.status, error.message};
  }
  void adopt(size_t i, OwnedValue value) {
    if (i < node_.outputs.size() && node_.outputs[i] >= 0) executor_.adopt_value(node_.outputs[i], std::move(value));
  }
  int64_t int_attr(const char* name, int64_t fallback) const { return int_attribute(node_, name, fallback); }
  GraphExecutor& executor() { return executor_; }
  const LoadedNode& node() const { return node_; }

 private:
  GraphExecutor& executor_;
  const LoadedNode& node_;
  const std::vector<edgert_tensor>& values_;
};

int64_t numel(const edgert_tensor& t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= t.dims[d];
  return n;
}

int64_t scalar_int(const edgert_tensor& t, const char* what) {
  if (numel(t) != 1 || t.rank > 1) fail(EDGERT_ERR_SHAPE, "%s must hold one value", what);
  if (t.dtype == EDGERT_DTYPE_INT64) return *static_cast<const int64_t*>(t.data);
  if (t.dtype == EDGERT_DTYPE_INT32) return *static_cast<const int32_t*>(t.data);
  fail(EDGERT_ERR_SHAPE, "%s has dtype %s, expected int32 or int64", what, dtype_name(t.dtype));
}

// A position in a sequence of `count`: negative counts from the back; `end_allowed` lets it be
// `count` (SequenceInsert appends there).
size_t position(int64_t p, size_t count, bool end_allowed) {
  const int64_t n = static_cast<int64_t>(count);
  const int64_t at = p < 0 ? p + n : p;
  if (at < 0 || at > n || (at == n && !end_allowed))
    fail(EDGERT_ERR_SHAPE, "position %lld is outside a sequence of %zu", static_cast<long long>(p), count);
  return static_cast<size_t>(at);
}

size_t bytes_of(const edgert_tensor& t) {
  size_t n = 0;
  if (!tensor_bytes(t, &n)) fail(EDGERT_ERR_SHAPE, "a tensor has an invalid shape %s", shape_text(t.dims, t.rank).c_str());
  return n;
}

void check_element(const OwnedValue& sequence, const edgert_tensor& t) {
  if (sequence.element_dtype != EDGERT_DTYPE_UNDEFINED && t.dtype != sequence.element_dtype)
    fail(EDGERT_ERR_SHAPE, "a %s tensor cannot join a sequence of %s", dtype_name(t.dtype),
         dtype_name(sequence.element_dtype));
}

int32_t normalized_axis(int64_t axis, int32_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    fail(EDGERT_ERR_SHAPE, "%s %lld is out of range for rank %d", what, static_cast<long long>(axis), rank);
  return static_cast<int32_t>(axis < 0 ? axis + rank : axis);
}

void sequence_construct(SequenceNode& op) {
  const size_t n = op.node().inputs.size();
  if (n == 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "SequenceConstruct needs at least one input");
  OwnedValue out = OwnedValue::empty_sequence(op.tensor(0).dtype);
  for (size_t i = 0; i < n; ++i) {
    check_element(out, op.tensor(i));
    out.items.push_back(OwnedValue::copy_of(op.tensor(i)));
  }
  op.adopt(0, std::move(out));
}

void sequence_insert(SequenceNode& op) {
  OwnedValue out = OwnedValue::copy_of(op.input(0));
  op.sequence(0);
  const edgert_tensor& t = op.tensor(1);
  check_element(out, t);
  const size_t at = op.has_input(2) ? position(scalar_int(op.tensor(2), "position"), out.items.size(), true)
                                    : out.items.size();
  out.items.insert(out.items.begin() + static_cast<std::ptrdiff_t>(at), OwnedValue::copy_of(t));
  op.adopt(0, std::move(out));
}

void sequence_erase(SequenceNode& op) {
  OwnedValue out = OwnedValue::copy_of(op.input(0));
  op.sequence(0);
  if (out.items.empty()) fail(EDGERT_ERR_SHAPE, "SequenceErase on an empty sequence");
  const size_t at = op.has_input(1) ? position(scalar_int(op.tensor(1), "position"), out.items.size(), false)
                                    : out.items.size() - 1;
  out.items.erase(out.items.begin() + static_cast<std::ptrdiff_t>(at));
  op.adopt(0, std::move(out));
}

void sequence_at(SequenceNode& op) {
  const edgert_sequence& s = op.sequence(0);
  op.set(0, s.items[position(scalar_int(op.tensor(1), "position"), s.count, false)]);
}

void sequence_length(SequenceNode& op) {
  int64_t length = static_cast<int64_t>(op.sequence(0).count);
  op.set(0, edgert_tensor{EDGERT_DTYPE_INT64, 0, {}, &length});
}

// Pieces along `axis`: split absent (pieces of 1, squeezed unless keepdims), a scalar (pieces of
// that size, the last one shorter) or a 1-D list of sizes.
void split_to_sequence(SequenceNode& op) {
  const edgert_tensor& x = op.tensor(0);
  if (x.rank == 0) fail(EDGERT_ERR_SHAPE, "SplitToSequence needs an input of rank 1 or more");
  const int32_t axis = normalized_axis(op.int_attr("axis", 0), x.rank, "axis");
  const int64_t dim = x.dims[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!op.has_input(1)) {
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze = op.int_attr("keepdims", 1) == 0;
  } else {
    const edgert_tensor& split = op.tensor(1);
    if (split.rank == 0) {
      const int64_t piece = scalar_int(split, "split");
      if (piece <= 0) fail(EDGERT_ERR_SHAPE, "split is %lld, expected > 0", static_cast<long long>(piece));
      for (int64_t at = 0; at < dim; at += piece) sizes.push_back(std::min(piece, dim - at));
    } else {
      if (split.rank != 1) fail(EDGERT_ERR_SHAPE, "split must be a scalar or 1-D");
      int64_t total = 0;
      for (int64_t i = 0; i < split.dims[0]; ++i) {
        const int64_t v = split.dtype == EDGERT_DTYPE_INT64 ? static_cast<const int64_t*>(split.data)[i]
                                                            : static_cast<const int32_t*>(split.data)[i];
        if (v < 0) fail(EDGERT_ERR_SHAPE, "split holds %lld, expected sizes >= 0", static_cast<long long>(v));
        sizes.push_back(v);
        total += v;
      }
      if (total != dim)
        fail(EDGERT_ERR_SHAPE, "split sums to %lld, the axis is %lld long", static_cast<long long>(total),
             static_cast<long long>(dim));
    }
  }
  int64_t outer = 1;
  for (int32_t d = 0; d < axis; ++d) outer *= x.dims[d];
  size_t inner = dtype_size(x.dtype);
  for (int32_t d = axis + 1; d < x.rank; ++d) inner *= static_cast<size_t>(x.dims[d]);
  OwnedValue out = OwnedValue::empty_sequence(x.dtype);
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  int64_t start = 0;
  for (int64_t size : sizes) {
    OwnedValue piece;
    piece.desc = x;
    piece.desc.data = nullptr;
    piece.desc.dims[axis] = size;
    if (squeeze) {
      for (int32_t d = axis; d + 1 < x.rank; ++d) piece.desc.dims[d] = x.dims[d + 1];
      --piece.desc.rank;
    }
    const size_t run = static_cast<size_t>(size) * inner;
    piece.bytes.resize(static_cast<size_t>(outer) * run);
    for (int64_t o = 0; o < outer; ++o)
      if (run) std::memcpy(piece.bytes.data() + o * run, src + (o * dim + start) * inner, run);
    out.items.push_back(std::move(piece));
    start += size;
  }
  op.adopt(0, std::move(out));
}

// Joins the tensors along `axis`, or stacks them along a new one (new_axis = 1).
void concat_from_sequence(SequenceNode& op) {
  const edgert_sequence& s = op.sequence(0);
  if (s.count == 0) fail(EDGERT_ERR_SHAPE, "ConcatFromSequence on an empty sequence");
  const edgert_tensor& first = s.items[0];
  const bool stack = op.int_attr("new_axis", 0) != 0;
  const int32_t rank = first.rank + (stack ? 1 : 0);
  if (rank == 0 || rank > EDGERT_MAX_RANK) fail(EDGERT_ERR_SHAPE, "ConcatFromSequence cannot join rank %d tensors", first.rank);
  const int32_t axis = normalized_axis(op.int_attr("axis", 0), rank, "axis");
  edgert_tensor out{};
  out.dtype = first.dtype;
  out.rank = rank;
  for (int32_t d = 0, k = 0; d < rank; ++d) out.dims[d] = stack && d == axis ? 1 : first.dims[k++];
  out.dims[axis] = 0;
  for (size_t i = 0; i < s.count; ++i) {
    const edgert_tensor& t = s.items[i];
    bool same = t.dtype == first.dtype && t.rank == first.rank;
    for (int32_t d = 0; same && d < first.rank; ++d) same = t.dims[d] == first.dims[d] || (!stack && d == axis);
    if (!same)
      fail(EDGERT_ERR_SHAPE, "tensor %zu is %s %s, tensor 0 is %s %s", i, dtype_name(t.dtype),
           shape_text(t.dims, t.rank).c_str(), dtype_name(first.dtype), shape_text(first.dims, first.rank).c_str());
    out.dims[axis] += stack ? 1 : t.dims[axis];
  }
  int64_t outer = 1;
  for (int32_t d = 0; d < axis; ++d) outer *= out.dims[d];
  size_t inner = dtype_size(out.dtype);
  for (int32_t d = axis + 1; d < rank; ++d) inner *= static_cast<size_t>(out.dims[d]);
  OwnedValue joined;
  joined.desc = out;
  joined.bytes.resize(bytes_of(out));
  size_t offset = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < s.count; ++i) {
      const size_t run = static_cast<size_t>(stack ? 1 : s.items[i].dims[axis]) * inner;
      if (run) std::memcpy(joined.bytes.data() + offset, static_cast<const uint8_t*>(s.items[i].data) + o * run, run);
      offset += run;
    }
  op.set(0, joined.view());
}

// Runs the body once per position of the sequence inputs: the i-th tensor of each sequence input
// and every tensor input as they are; output j collects the body's output j into a sequence.
void sequence_map(SequenceNode& op) {
  const LoadedNode& node = op.node();
  if (node.body_graph < 0) fail(EDGERT_ERR_FORMAT, "SequenceMap lacks its body");
  GraphExecutor& body = op.executor().subgraph(node.body_graph);
  const size_t length = op.sequence(0).count;
  for (size_t k = 1; k < node.inputs.size(); ++k)
    if (sequence_of(op.input(k)) && sequence_of(op.input(k))->count != length)
      fail(EDGERT_ERR_SHAPE, "sequence input %zu holds %zu tensors, input 0 holds %zu", k,
           sequence_of(op.input(k))->count, length);
  std::vector<OwnedValue> outputs;
  for (size_t j = 0; j < node.outputs.size(); ++j) outputs.push_back(OwnedValue::empty_sequence(op.declared_dtype(j)));
  for (size_t i = 0; i < length; ++i) {
    std::vector<edgert_tensor> inputs;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const edgert_sequence* s = sequence_of(op.input(k));
      inputs.push_back(s ? s->items[i] : op.input(k));
    }
    edgert_error error{};
    if (body.run(inputs.data(), inputs.size(), &error) != EDGERT_OK)
      fail(error.status, "iteration %zu: %s", i, error.message);
    for (size_t j = 0; j < outputs.size() && j < body.graph().outputs.size(); ++j) {
      const edgert_tensor& y = body.output(j);
      if (outputs[j].element_dtype == EDGERT_DTYPE_UNDEFINED) outputs[j].element_dtype = y.dtype;
      check_element(outputs[j], y);
      outputs[j].items.push_back(OwnedValue::copy_of(y));
    }
  }
  body.release_activations();
  for (size_t j = 0; j < outputs.size(); ++j) op.adopt(j, std::move(outputs[j]));
}

void run(SequenceNode& op, const std::string& type) {
  if (type == "SequenceEmpty") {
    op.adopt(0, OwnedValue::empty_sequence(static_cast<edgert_dtype>(op.int_attr("dtype", EDGERT_DTYPE_FLOAT32))));
  } else if (type == "SequenceConstruct") {
    sequence_construct(op);
  } else if (type == "SequenceInsert") {
    sequence_insert(op);
  } else if (type == "SequenceErase") {
    sequence_erase(op);
  } else if (type == "SequenceAt") {
    sequence_at(op);
  } else if (type == "SequenceLength") {
    sequence_length(op);
  } else if (type == "SplitToSequence") {
    split_to_sequence(op);
  } else if (type == "ConcatFromSequence") {
    concat_from_sequence(op);
  } else if (type == "SequenceMap") {
    sequence_map(op);
  } else if (type == "Optional") {
    op.set(0, op.has_input(0) ? op.input(0) : edgert_tensor{});
  } else if (type == "OptionalHasElement") {
    uint8_t has = op.has_input(0) && op.input(0).dtype != EDGERT_DTYPE_UNDEFINED;
    op.set(0, edgert_tensor{EDGERT_DTYPE_BOOL, 0, {}, &has});
  } else if (type == "OptionalGetElement") {
    if (op.input(0).dtype == EDGERT_DTYPE_UNDEFINED) fail(EDGERT_ERR_INVALID_ARGUMENT, "the optional input has no value");
    op.set(0, op.input(0));
  } else if (type == "Identity") {
    op.set(0, op.input(0));
  } else {
    fail(EDGERT_ERR_UNSUPPORTED, "no sequence op '%s'", type.c_str());
  }
}

}  // namespace

edgert_status run_sequence_op(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                              edgert_error* error) {
  SequenceNode op(executor, node, values);
  try {
    run(op, node.node.op_type);
  } catch (const OpFailure& failure) {
    return set_error(error, failure.status, "node '%s' (%s): %s", node.node.name, node.node.op_type,
                     failure.message.c_str());
  }
  return EDGERT_OK;
}

}  // namespace edgert
