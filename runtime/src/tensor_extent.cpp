#include "tensor_extent.h"

#include "error.h"

namespace edgert {

std::string shape_text(const int64_t* dims, int32_t rank) {
  std::string s = "[";
  for (int32_t d = 0; d < rank; ++d) s += (d ? "x" : "") + (dims[d] < 0 ? std::string("?") : std::to_string(dims[d]));
  return s + "]";
}

bool tensor_bytes(const edgert_tensor& t, size_t* bytes) {
  uint64_t total = dtype_size(t.dtype);
  for (int32_t d = 0; d < t.rank; ++d)
    if (t.dims[d] < 0 || __builtin_mul_overflow(total, static_cast<uint64_t>(t.dims[d]), &total)) return false;
  *bytes = total;
  return true;
}

}  // namespace edgert
