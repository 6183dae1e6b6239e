#include "host_mapped_frame_memory.h"

#include <stdexcept>

#include "board_profile.h"
#include "edgert/edgert.h"

namespace edgert::daemon {
namespace {

class HostMappedMemory final : public FrameMemory {
 public:
  HostMappedMemory(std::string plugin, std::string plugin_path)
      : plugin_(std::move(plugin)), plugin_path_(std::move(plugin_path)) {}

  void* allocate(size_t bytes) const override {
    const size_t length = whole_pages(bytes);
    void* data = nullptr;
    edgert_error error{};
    if (edgert_device_allocate(path(), plugin_.c_str(), EDGERT_MEMORY_UNIFIED, length, &data, &error) != EDGERT_OK)
      throw std::runtime_error("cannot allocate a " + std::to_string(length) + "-byte frame buffer in " + describe() +
                               " memory: " + error.message);
    return data;
  }
  void free(void* data) const override { edgert_device_free(path(), plugin_.c_str(), EDGERT_MEMORY_UNIFIED, data); }
  bool device_mapped() const override { return true; }
  std::string describe() const override { return "host-mapped (" + plugin_ + ")"; }

 private:
  const char* path() const { return plugin_path_.empty() ? nullptr : plugin_path_.c_str(); }
  std::string plugin_, plugin_path_;
};

}  // namespace

std::shared_ptr<FrameMemory> frame_memory_for_board(const config::BoardProfile& board, const std::string& plugin_path,
                                                    std::string* note) {
  if (board.gpu_type != "cuda") {
    *note = "host (board " + board.name + " has no GPU)";
    return FrameMemory::host();
  }
  auto memory = std::make_shared<HostMappedMemory>("cuda", plugin_path);
  try {
    memory->free(memory->allocate(1));  // a page tells whether the plugin allocates here
  } catch (const std::exception& e) {
    *note = std::string("host (") + e.what() + ")";
    return FrameMemory::host();
  }
  *note = memory->describe();
  return memory;
}

}  // namespace edgert::daemon
