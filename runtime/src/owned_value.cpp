#include "owned_value.h"

#include "tensor_extent.h"

namespace edgert {

OwnedValue OwnedValue::copy_of(const edgert_tensor& value) {
  OwnedValue v;
  v.desc = value;
  v.desc.data = nullptr;
  if (const edgert_sequence* sequence = sequence_of(value)) {
    v.element_dtype = sequence->element_dtype;
    v.items.reserve(sequence->count);
    for (size_t i = 0; i < sequence->count; ++i) v.items.push_back(copy_of(sequence->items[i]));
    return v;
  }
  size_t n = 0;
  if (value.dtype != EDGERT_DTYPE_UNDEFINED && tensor_bytes(value, &n) && n && value.data) {
    const uint8_t* p = static_cast<const uint8_t*>(value.data);
    v.bytes.assign(p, p + n);
  }
  return v;
}

OwnedValue OwnedValue::empty_sequence(edgert_dtype element_dtype) {
  OwnedValue v;
  v.desc.dtype = EDGERT_DTYPE_SEQUENCE;
  v.element_dtype = element_dtype;
  return v;
}

edgert_tensor OwnedValue::view() {
  edgert_tensor t = desc;
  if (!is_sequence()) {
    t.data = bytes.empty() ? nullptr : bytes.data();
    return t;
  }
  item_views_.clear();
  for (OwnedValue& item : items) item_views_.push_back(item.view());
  header_.element_dtype = element_dtype;
  header_.count = item_views_.size();
  header_.items = item_views_.data();
  t.rank = 0;
  t.data = &header_;
  return t;
}

}  // namespace edgert
