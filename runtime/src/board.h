// Which board an engine was built for, and whether this machine can run it.
#pragma once

#include <string>
#include <vector>

#include "edgert/types.h"

namespace edgert {

// The hardware facts a profile's fingerprint covers. Two profiles with equal facts may share
// engines; anything else needs a rebuild (kernels and tactics were chosen for those facts).
struct BoardHardware {
  std::string architecture;           // "x86_64", "aarch64"
  std::vector<std::string> cpu_features;  // lower-case ISA extensions: "avx2", "fma", "neon", "dotprod"
  std::string gpu;                    // "none" or e.g. "cuda-sm87-integrated"
};

// Hex XXH64 of the canonical text of `hw` (features sorted, so order in YAML does not matter).
std::string board_fingerprint(const BoardHardware& hw);

std::string host_architecture();
bool host_has_cpu_feature(const std::string& feature);

// Fails with EDGERT_ERR_BOARD naming both boards when this machine cannot run an engine built
// for `board_name` with `hw`, or when `expected_board` (may be empty) names a different board.
edgert_status check_board_compatible(const std::string& board_name, const BoardHardware& hw,
                                     const std::string& fingerprint, const std::string& expected_board,
                                     edgert_error* error);

}  // namespace edgert
