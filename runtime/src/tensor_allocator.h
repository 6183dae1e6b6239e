// Activation memory for one execution context. Blocks are cached by size and reused across
// runs, so a steady stream of same-shaped inputs allocates nothing after the first run.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>

namespace edgert {

class TensorAllocator {
 public:
  TensorAllocator() = default;
  ~TensorAllocator();
  TensorAllocator(const TensorAllocator&) = delete;
  TensorAllocator& operator=(const TensorAllocator&) = delete;

  // 64-byte aligned block of at least `bytes` (never null, even for 0); nullptr when out of memory.
  void* allocate(size_t bytes);
  void release(void* block);

  size_t bytes_reserved() const { return reserved_; }

 private:
  std::multimap<size_t, void*> free_;          // size -> block, for best fit
  std::unordered_map<void*, size_t> sizes_;    // every block ever made
  size_t reserved_ = 0;
};

}  // namespace edgert
