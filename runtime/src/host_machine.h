// What this machine is, as board profiles describe boards: architecture, CPU ISA features,
// CPUs, memory and GPU. Read from cpuid / getauxval, sysconf and a few files; no CUDA is linked
// or loaded (the GPU is recognised from the driver's and the board's files).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "board.h"

namespace edgert {

struct HostMachine {
  BoardHardware hardware;   // architecture, the known CPU features present, gpu ("none" when absent)
  int cpu_count = 1;        // kernel threads a plugin starts by default: the CPUs this process may use
  int64_t ram_mb = 0;       // MemTotal; 0 when /proc/meminfo cannot be read
  std::string gpu_model;    // for people: "NVIDIA Jetson (nvidia,tegra234)", "NVIDIA GeForce RTX 3060"; empty: none
  std::string gpu_source;   // the file the GPU was recognised from
  // The GPU is known precisely enough for a board fingerprint: a Jetson's integrated GPU, whose
  // SoC gives the compute capability ("cuda-sm8.7-unified"), or a discrete GPU of a model whose
  // compute capability edgert knows ("cuda-sm9.0" for an H100). Other discrete GPUs are seen
  // ("cuda-discrete"), but their compute capability would need CUDA, never loaded here.
  bool gpu_exact = false;
  bool gpu_integrated() const {
    const std::string& g = hardware.gpu;
    return gpu_exact && g.size() > 8 && g.compare(g.size() - 8, 8, "-unified") == 0;
  }
};

// The ISA features board profiles may list for `architecture`, in increasing capability.
const std::vector<std::string>& known_cpu_features(const std::string& architecture);

// Detects this machine. `root` prefixes the files read (/proc/meminfo, /proc/driver/nvidia,
// /dev/nvidia0, /proc/device-tree/compatible, /etc/nv_tegra_release) so tests can stage a fake
// board; CPU features and CPUs always come from the running machine.
HostMachine detect_host_machine(const std::string& root = "");

// This machine, detected once per process (detect_host_machine("")).
const HostMachine& this_host_machine();

// The name of a profile made from `host` alone: "native-<arch>-<best ISA>[-<gpu>]" (the GPU when
// known exactly), e.g. "native-x86_64-avx512", "native-aarch64-dotprod-cuda-sm8.7-unified".
std::string native_board_name(const HostMachine& host);

// Kernel threads a plugin uses by default here: $EDGERT_CPU_THREADS when set, else the CPUs in
// this process's affinity mask (as the CPU plugin's thread pool counts them).
int default_kernel_threads();

}  // namespace edgert
