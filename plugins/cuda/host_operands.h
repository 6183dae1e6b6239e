// Values of small float operands a kernel reads on the host in prepare (its host_inputs bit is
// set, so the tensor arrives in host memory): Resize's scales and roi, Clip's bounds. The
// integer ones (shapes, axes, pads) go through read_ints (op_support.h).
#pragma once

#include <vector>

#include "cuda_op.h"
#include "edgert/dtype_info.h"

namespace edgert::cuda {

// The values as double; fails with EDGERT_ERR_NEEDS_DATA while they are not known (build time,
// a non-constant operand) and names `what` for any dtype other than float32/float16/float64.
inline std::vector<double> read_floats(const edgert_tensor& t, const char* what) {
  if (!t.data && numel(t) > 0) fail(EDGERT_ERR_NEEDS_DATA, "values of %s are not known yet", what);
  std::vector<double> values(static_cast<size_t>(numel(t)));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t.dtype) {
      case EDGERT_DTYPE_FLOAT32: values[i] = static_cast<const float*>(t.data)[i]; break;
      case EDGERT_DTYPE_FLOAT64: values[i] = static_cast<const double*>(t.data)[i]; break;
      case EDGERT_DTYPE_FLOAT16: values[i] = __half2float(static_cast<const __half*>(t.data)[i]); break;
      default: fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s, expected float32, float16 or float64", what,
                     edgert_dtype_name(t.dtype));
    }
  }
  return values;
}

}  // namespace edgert::cuda
