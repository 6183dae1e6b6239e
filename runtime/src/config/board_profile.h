// Board profiles: board_profiles/<name>.yaml, the facts the builder tunes for and the daemon
// budgets by. Validated strictly: unknown keys and out-of-range values are errors with a location.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "board.h"

namespace edgert::config {

struct BoardProfile {
  std::string name;
  std::string description;
  std::string source_path;
  BoardHardware hardware;          // architecture, cpu features, gpu: what the fingerprint covers
  int cpu_cores = 1;
  std::string gpu_type = "none";   // none | cuda
  std::string cuda_compute_capability;  // "8.7" when gpu_type == cuda
  bool unified_memory = false;
  int64_t ram_mb = 0;
  int64_t edgertd_budget_mb = 0;   // memory budget of the daemon (its cgroup MemoryMax)
  int64_t zram_mb = 0;
  int swappiness = 60;
  std::string camera_device;       // default V4L2 device, empty when the board has none
  std::string gpio_chip;           // default GPIO chip, empty when none
  // Named line offsets on gpio_chip (e.g. trigger: 17, status_led: 27), in file order.
  std::vector<std::pair<std::string, int>> gpio_lines;
  std::vector<std::string> precisions;  // preferred precisions, best first: fp16, int8, fp32

  std::string fingerprint() const { return board_fingerprint(hardware); }
};

BoardProfile load_board_profile(const std::string& path);

// Resolves `name_or_path`: a path to a .yaml file, or a profile name looked up in
// board_profile_dirs(). An unknown name is a ConfigError listing the names there are (`native`
// is not a file: board_catalog.h resolves it).
std::string find_board_profile(const std::string& name_or_path);

// $EDGERT_BOARD_PROFILES, then the installed and source-tree board_profiles directories.
std::vector<std::string> board_profile_dirs();
// The profile names in those directories (file names without .yaml), sorted, each once.
std::vector<std::string> board_profile_names();

}  // namespace edgert::config
