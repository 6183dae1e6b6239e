// Comparing an output against a reference the way the ONNX backend tests do (numpy's
// assert_allclose: |a - b| <= atol + rtol * |b|, NaN equal to NaN), plus the error figures
// `edgert compare` reports.
#pragma once

#include <string>

#include "tensor_io.h"

namespace edgert::cli {

struct Comparison {
  bool match = false;
  double max_abs_error = 0;
  double relative_l2_error = 0;  // ||a - b|| / ||b||
  double cosine_similarity = 1;
  std::string problem;           // why it does not match (dtype, shape, values)
};

Comparison compare_tensors(const HostTensor& actual, const HostTensor& expected, double rtol, double atol);

// Element `i` of `t` as a double, whatever its dtype.
double element_as_double(const HostTensor& t, int64_t i);

}  // namespace edgert::cli
