#include "test_values.h"

#include <onnx/onnx-data_pb.h>

#include <fstream>
#include <sstream>

#include "build_error.h"

namespace edgert::cli {
namespace {

std::string dir_of(const std::string& path) {
  return path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
}

void read_sequence(const onnx::SequenceProto& proto, const std::string& path, TestValue& v) {
  if (proto.elem_type() != onnx::SequenceProto::TENSOR)
    builder::build_fail(EDGERT_ERR_UNSUPPORTED, "'%s' is a sequence of non-tensors", path.c_str());
  v.is_sequence = true;
  for (int i = 0; i < proto.tensor_values_size(); ++i)
    v.tensors.push_back(host_tensor_from_proto(proto.tensor_values(i), "'" + path + "' tensor " + std::to_string(i),
                                               dir_of(path)));
  if (!v.tensors.empty()) v.element_dtype = v.tensors[0].dtype;
}

template <typename Proto>
Proto parse(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  Proto proto;
  if (!in || !proto.ParseFromIstream(&in))
    builder::build_fail(EDGERT_ERR_FORMAT, "'%s' is not an ONNX %s file", path.c_str(), what);
  return proto;
}

}  // namespace

edgert_tensor TestValue::view() {
  if (!present) return edgert_tensor{};
  if (!is_sequence) return tensors.at(0).view();
  item_views_.clear();
  for (const HostTensor& t : tensors) item_views_.push_back(t.view());
  header_.element_dtype = element_dtype;
  header_.count = item_views_.size();
  header_.items = item_views_.data();
  edgert_tensor t{};
  t.dtype = EDGERT_DTYPE_SEQUENCE;
  t.data = &header_;
  return t;
}

TestValue read_test_value(const std::string& path, ValueKind kind) {
  TestValue v;
  v.kind = kind;
  if (kind == ValueKind::Tensor) {
    v.tensors.push_back(read_tensor_pb(path));
  } else if (kind == ValueKind::Sequence) {
    read_sequence(parse<onnx::SequenceProto>(path, "SequenceProto"), path, v);
  } else {
    const auto proto = parse<onnx::OptionalProto>(path, "OptionalProto");
    if (proto.has_tensor_value()) {
      v.tensors.push_back(host_tensor_from_proto(proto.tensor_value(), "'" + path + "'", dir_of(path)));
    } else if (proto.has_sequence_value()) {
      read_sequence(proto.sequence_value(), path, v);
    } else {
      v.present = false;
    }
  }
  return v;
}

std::string compare_test_value(const edgert_tensor& actual, const TestValue& expected, const std::string& name,
                               double rtol, double atol) {
  if (!expected.present)
    return actual.dtype == EDGERT_DTYPE_UNDEFINED ? "" : "a value, expected an optional without one";
  if (actual.dtype == EDGERT_DTYPE_UNDEFINED) return "no value, expected one";
  if (!expected.is_sequence) {
    if (actual.dtype == EDGERT_DTYPE_SEQUENCE) return "a sequence, expected a tensor";
    Comparison c = compare_tensors(HostTensor::from(actual, name), expected.tensors[0], rtol, atol);
    return c.match ? "" : c.problem;
  }
  const edgert_sequence* s = actual.dtype == EDGERT_DTYPE_SEQUENCE ? static_cast<const edgert_sequence*>(actual.data)
                                                                  : nullptr;
  if (!s) return "a tensor, expected a sequence";
  if (s->count != expected.tensors.size())
    return "a sequence of " + std::to_string(s->count) + " tensors, expected " + std::to_string(expected.tensors.size());
  for (size_t i = 0; i < s->count; ++i) {
    Comparison c = compare_tensors(HostTensor::from(s->items[i], name), expected.tensors[i], rtol, atol);
    if (!c.match) return "tensor " + std::to_string(i) + ": " + c.problem;
  }
  return "";
}

}  // namespace edgert::cli
