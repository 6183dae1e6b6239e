// A value the runtime owns outside the arena and the allocators: a tensor's bytes, a sequence of
// such tensors, or nothing (an optional without a value, dtype UNDEFINED). Control-flow ops
// carry values between subgraph runs in it, and the sequence ops make their outputs in it.
#pragma once

#include <cstdint>
#include <vector>

#include "edgert/plugin.h"

namespace edgert {

struct OwnedValue {
  edgert_tensor desc{};        // a tensor's dtype and shape; dtype SEQUENCE or UNDEFINED otherwise
  std::vector<uint8_t> bytes;  // a tensor's data
  edgert_dtype element_dtype = EDGERT_DTYPE_UNDEFINED;  // a sequence's
  std::vector<OwnedValue> items;                        // a sequence's tensors

  // A deep copy: a sequence's tensors are copied too.
  static OwnedValue copy_of(const edgert_tensor& value);
  static OwnedValue empty_sequence(edgert_dtype element_dtype);

  bool is_sequence() const { return desc.dtype == EDGERT_DTYPE_SEQUENCE; }
  // The value as the executor and kernels see it. A sequence's view points into this object:
  // it stays valid while the object is neither moved nor changed.
  edgert_tensor view();

 private:
  std::vector<edgert_tensor> item_views_;
  edgert_sequence header_{};
};

// The sequence a value of dtype SEQUENCE carries; null for any other value.
inline const edgert_sequence* sequence_of(const edgert_tensor& value) {
  return value.dtype == EDGERT_DTYPE_SEQUENCE ? static_cast<const edgert_sequence*>(value.data) : nullptr;
}

}  // namespace edgert
