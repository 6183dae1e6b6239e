#include "tensor_allocator.h"

#include <cstdlib>

namespace edgert {

TensorAllocator::~TensorAllocator() {
  for (auto& [block, size] : sizes_) {
    if (device_) device_->free(space_, block);
    else std::free(block);
  }
}

void* TensorAllocator::allocate(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  auto it = free_.lower_bound(rounded);
  // A block more than twice too large would strand memory that a bigger tensor needs later.
  if (it != free_.end() && it->first <= 2 * rounded) {
    void* block = it->second;
    free_.erase(it);
    return block;
  }
  void* block = nullptr;
  if (device_) {
    edgert_error error{};
    if (device_->allocate(space_, rounded, &block, &error) != EDGERT_OK) return nullptr;
  } else {
    block = std::aligned_alloc(64, rounded);
  }
  if (!block) return nullptr;
  sizes_[block] = rounded;
  reserved_ += rounded;
  return block;
}

void TensorAllocator::release(void* block) {
  if (!block) return;
  auto it = sizes_.find(block);
  if (it != sizes_.end()) free_.emplace(it->second, block);
}

}  // namespace edgert
