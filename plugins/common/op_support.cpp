#include "op_support.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "edgert/dtype_info.h"

namespace edgert::plugin {

void fail(edgert_status status, const char* format, ...) {
  char buffer[EDGERT_MESSAGE_CAPACITY];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  throw KernelError(status, buffer);
}

edgert_status set_error(edgert_error* error, edgert_status status, const char* format, ...) {
  if (error) {
    error->status = status;
    va_list args;
    va_start(args, format);
    std::vsnprintf(error->message, sizeof error->message, format, args);
    va_end(args);
  }
  return status;
}

int64_t numel(const edgert_tensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape shape_of(const edgert_tensor& t) { return Shape(t.dims, t.dims + t.rank); }

void set_shape(edgert_tensor& t, const Shape& shape) {
  if (shape.size() > EDGERT_MAX_RANK)
    fail(EDGERT_ERR_UNSUPPORTED, "output rank %zu exceeds the supported maximum %d", shape.size(),
         EDGERT_MAX_RANK);
  for (int64_t d : shape)
    if (d < 0) fail(EDGERT_ERR_SHAPE, "output shape %s has a negative dimension", shape_string(shape).c_str());
  t.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.dims[i] = shape[i];
}

void set_output(edgert_tensor& t, edgert_dtype dtype, const Shape& shape) {
  t.dtype = dtype;
  set_shape(t, shape);
}

bool is_present(const edgert_tensor& t) { return t.dtype != EDGERT_DTYPE_UNDEFINED; }

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "x" : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    fail(EDGERT_ERR_INVALID_ARGUMENT, "%s %lld is out of range for rank %lld", what,
         static_cast<long long>(axis), static_cast<long long>(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> read_ints(const edgert_tensor& t, const char* what) {
  if (!t.data && numel(t) > 0) fail(EDGERT_ERR_NEEDS_DATA, "values of %s are not known yet", what);
  std::vector<int64_t> values(static_cast<size_t>(numel(t)));
  auto copy = [&](auto* p) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(p[i]);
  };
  switch (t.dtype) {
    case EDGERT_DTYPE_INT64: copy(static_cast<const int64_t*>(t.data)); break;
    case EDGERT_DTYPE_INT32: copy(static_cast<const int32_t*>(t.data)); break;
    case EDGERT_DTYPE_INT16: copy(static_cast<const int16_t*>(t.data)); break;
    case EDGERT_DTYPE_INT8: copy(static_cast<const int8_t*>(t.data)); break;
    case EDGERT_DTYPE_UINT64: copy(static_cast<const uint64_t*>(t.data)); break;
    case EDGERT_DTYPE_UINT32: copy(static_cast<const uint32_t*>(t.data)); break;
    case EDGERT_DTYPE_UINT16: copy(static_cast<const uint16_t*>(t.data)); break;
    case EDGERT_DTYPE_UINT8: copy(static_cast<const uint8_t*>(t.data)); break;
    default:
      fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s, which this kernel does not handle", what,
           edgert_dtype_name(t.dtype));
  }
  return values;
}

const edgert_attribute* Attributes::find(const char* name) const {
  for (int32_t i = 0; i < node_->num_attributes; ++i)
    if (std::strcmp(node_->attributes[i].name, name) == 0) return &node_->attributes[i];
  return nullptr;
}

int64_t Attributes::get_int(const char* name, int64_t fallback) const {
  const edgert_attribute* a = find(name);
  if (!a) return fallback;
  if (a->type != EDGERT_ATTR_INT) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be an int", name);
  return a->i;
}

float Attributes::get_float(const char* name, float fallback) const {
  const edgert_attribute* a = find(name);
  if (!a) return fallback;
  if (a->type == EDGERT_ATTR_INT) return static_cast<float>(a->i);
  if (a->type != EDGERT_ATTR_FLOAT) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be a float", name);
  return a->f;
}

std::string Attributes::get_string(const char* name, const std::string& fallback) const {
  const edgert_attribute* a = find(name);
  if (!a) return fallback;
  if (a->type != EDGERT_ATTR_STRING) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be a string", name);
  return std::string(a->s, a->s_len);
}

std::vector<int64_t> Attributes::get_ints(const char* name, const std::vector<int64_t>& fallback) const {
  const edgert_attribute* a = find(name);
  if (!a) return fallback;
  if (a->type == EDGERT_ATTR_INT) return {a->i};
  if (a->type != EDGERT_ATTR_INTS) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be a list of ints", name);
  return std::vector<int64_t>(a->ints, a->ints + a->count);
}

std::vector<float> Attributes::get_floats(const char* name, const std::vector<float>& fallback) const {
  const edgert_attribute* a = find(name);
  if (!a) return fallback;
  if (a->type == EDGERT_ATTR_FLOAT) return {a->f};
  if (a->type != EDGERT_ATTR_FLOATS) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be a list of floats", name);
  return std::vector<float>(a->floats, a->floats + a->count);
}

std::vector<std::string> Attributes::get_strings(const char* name) const {
  const edgert_attribute* a = find(name);
  if (!a) return {};
  if (a->type != EDGERT_ATTR_STRINGS) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be a list of strings", name);
  return std::vector<std::string>(a->strings, a->strings + a->count);
}

const edgert_tensor* Attributes::get_tensor(const char* name) const {
  const edgert_attribute* a = find(name);
  if (!a) return nullptr;
  if (a->type != EDGERT_ATTR_TENSOR) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute '%s' must be a tensor", name);
  return a->tensor;
}

}  // namespace edgert::plugin
