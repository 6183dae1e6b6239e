// Where a source's frame buffers come from: page-aligned host memory here; on a board whose
// engines run on a GPU, host-mapped memory from the GPU plugin's allocator
// (host_mapped_frame_memory.h), so a camera engine's first kernel reads the frame where the
// camera driver (V4L2 USERPTR) or the test pattern wrote it, with no copy. V4L2 MMAP buffers
// belong to the driver and stay as they are: CUDA cannot map them on discrete GPUs, so those
// frames reach the GPU by a copy.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace edgert::daemon {

class FrameMemory {
 public:
  virtual ~FrameMemory() = default;
  static std::shared_ptr<FrameMemory> host();

  // Page-aligned whole pages (what drivers pinning user memory for DMA accept); throws
  // std::runtime_error naming the size when none is left.
  virtual void* allocate(size_t bytes) const;
  virtual void free(void* data) const;
  virtual bool device_mapped() const { return false; }
  virtual std::string describe() const { return "host"; }
};

// `bytes` rounded up to whole pages.
size_t whole_pages(size_t bytes);

}  // namespace edgert::daemon
