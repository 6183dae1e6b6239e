// The values of ONNX node tests beyond tensors: a sequence of tensors (SequenceProto) or an
// optional (OptionalProto), read from the test's .pb files and handed to the runtime as it takes
// them (an edgert_sequence; dtype UNDEFINED for an optional without a value).
#pragma once

#include <string>
#include <vector>

#include "loaded_engine.h"
#include "tensor_compare.h"
#include "tensor_io.h"

namespace edgert::cli {

struct TestValue {
  ValueKind kind = ValueKind::Tensor;
  bool present = true;              // an optional's: whether it holds a value
  bool is_sequence = false;         // what it holds: a sequence, or one tensor
  std::vector<HostTensor> tensors;  // one for a tensor
  edgert_dtype element_dtype = EDGERT_DTYPE_UNDEFINED;

  // The value for the runtime; valid while this TestValue lives and is not changed.
  edgert_tensor view();

 private:
  std::vector<edgert_tensor> item_views_;
  edgert_sequence header_{};
};

// Reads `path` as the kind of value the engine's input or output is.
TestValue read_test_value(const std::string& path, ValueKind kind);

// Empty when `actual` (what the runtime gave) matches `expected`; else what differs.
std::string compare_test_value(const edgert_tensor& actual, const TestValue& expected, const std::string& name,
                               double rtol, double atol);

}  // namespace edgert::cli
