// Frame buffers in host-mapped memory of the board's GPU plugin (frame_memory.h): on a Jetson
// the DRAM CPU and GPU share, on a discrete GPU pinned host memory the GPU reads over the bus.
#pragma once

#include <memory>
#include <string>

#include "frame_memory.h"

namespace edgert::config {
struct BoardProfile;
}

namespace edgert::daemon {

// Host-mapped memory of the cuda plugin when the board has a CUDA GPU and the plugin allocates
// here, else host memory; `note` says which and, for host memory on a GPU board, why.
std::shared_ptr<FrameMemory> frame_memory_for_board(const config::BoardProfile& board, const std::string& plugin_path,
                                                    std::string* note);

}  // namespace edgert::daemon
