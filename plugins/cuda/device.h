// The CUDA plugin's edgert_device (runtime/include/edgert/plugin.h): memory, copies, streams,
// graphs and timers for the runtime, on the process's current CUDA device.
#pragma once

#include "edgert/plugin.h"

namespace edgert::cuda {

// 0 when no driver or no CUDA device is usable here, else a score above the CPU plugin's.
int32_t device_score();
const edgert_device* device_table();

}  // namespace edgert::cuda
