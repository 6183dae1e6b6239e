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
  std::string gpu;                    // "none" or e.g. "cuda-sm8.7-unified" (board_profile.cpp)
};

// Hex XXH64 of the canonical text of `hw` (features sorted, so order in YAML does not matter).
std::string board_fingerprint(const BoardHardware& hw);

std::string host_architecture();
bool host_has_cpu_feature(const std::string& feature);

// Fails with EDGERT_ERR_BOARD naming both boards when this machine cannot run an engine built
// for `board_name` with `hw` (other architecture, a CPU feature missing), when `fingerprint` is
// not that of `hw` (a damaged or forged record), or when `expected_board` (may be empty) names a
// different board. The message calls this machine `expected_board`, else `host_board`, else
// native_board_name() of this machine. A GPU in `hw` is not checked here: an engine needs a GPU only
// through a GPU plugin, whose score() says whether it runs here.
edgert_status check_board_compatible(const std::string& board_name, const BoardHardware& hw,
                                     const std::string& fingerprint, const std::string& expected_board,
                                     const std::string& host_board, edgert_error* error);

}  // namespace edgert
