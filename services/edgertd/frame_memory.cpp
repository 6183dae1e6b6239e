#include "frame_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace edgert::daemon {

size_t whole_pages(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

std::shared_ptr<FrameMemory> FrameMemory::host() { return std::make_shared<FrameMemory>(); }

void* FrameMemory::allocate(size_t bytes) const {
  const size_t length = whole_pages(bytes);
  void* data = std::aligned_alloc(static_cast<size_t>(sysconf(_SC_PAGESIZE)), length);
  if (!data) throw std::runtime_error("cannot allocate a " + std::to_string(length) + "-byte frame buffer");
  return data;
}

void FrameMemory::free(void* data) const { std::free(data); }

}  // namespace edgert::daemon
