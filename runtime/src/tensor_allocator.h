// Activation memory for one execution context, in one memory space. Blocks are cached by size
// and reused across runs, so a steady stream of same-shaped inputs allocates nothing after the
// first run.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>

#include "edgert/plugin.h"

namespace edgert {

class TensorAllocator {
 public:
  // Host memory (aligned_alloc).
  TensorAllocator() = default;
  // `space` memory of `device` (its allocate/free); device must outlive the allocator.
  TensorAllocator(const edgert_device* device, edgert_memory_space space) : device_(device), space_(space) {}
  ~TensorAllocator();
  TensorAllocator(const TensorAllocator&) = delete;
  TensorAllocator& operator=(const TensorAllocator&) = delete;

  // 64-byte aligned block of at least `bytes` (never null, even for 0); nullptr when out of memory.
  void* allocate(size_t bytes);
  void release(void* block);

  size_t bytes_reserved() const { return reserved_; }
  edgert_memory_space space() const { return space_; }

 private:
  const edgert_device* device_ = nullptr;
  edgert_memory_space space_ = EDGERT_MEMORY_HOST;
  std::multimap<size_t, void*> free_;          // size -> block, for best fit
  std::unordered_map<void*, size_t> sizes_;    // every block ever made
  size_t reserved_ = 0;
};

}  // namespace edgert
