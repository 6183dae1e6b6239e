// The shipped board profiles as a whole, and which of them this machine is: `--board native`
// (the builder's and edgertd's default) and `edgert boards`.
#pragma once

#include <string>
#include <vector>

#include "board_profile.h"
#include "host_machine.h"

namespace edgert::config {

struct BoardCatalog {
  std::vector<BoardProfile> profiles;  // by name; a name in an earlier directory hides later ones
  std::vector<std::string> errors;     // files that did not load, "path: message"
  std::vector<std::string> dirs;       // searched, in order
};

// Every *.yaml in the board profile directories (as find_board_profile searches them).
BoardCatalog load_board_catalog();

// Whether engines built for `profile` run on `host`: same architecture and every CPU feature.
// A GPU the host lacks does not stop them (engines with a GPU plugin need it; that plugin says).
bool board_runs_on(const BoardProfile& profile, const HostMachine& host, std::string* why_not);

struct NativeBoard {
  BoardProfile profile;  // cpu_cores is the host's CPU count: what its kernels run with
  bool detected = false; // no shipped profile describes the host: made from what was detected
  std::string reason;    // one line: why this profile
};

// What `--board native` builds for on `host`. A profile is a candidate when engines built for
// it run on the host and its GPU is none or the host's. The best has the host's GPU, then the
// most CPU features, then the nearest core count and RAM. A profile with the host's GPU is
// taken; one without a GPU unless the host has a CPU feature it does not list (its tactics
// would go unused) or an integrated GPU (a Jetson no profile describes); then, as when nothing
// fits, the host's detected profile (detected_board_profile). A discrete GPU no profile has
// does not make a workstation a board of its own: its CPU's profile is taken.
NativeBoard pick_native_board(const std::vector<BoardProfile>& profiles, const HostMachine& host);

// A profile made from `host` alone: named native_board_name(host), its CPU features, CPUs and RAM,
// its GPU when known exactly (a Jetson's), the daemon's budget half of RAM.
BoardProfile detected_board_profile(const HostMachine& host);

struct ResolvedBoard {
  BoardProfile profile;
  bool native = false;  // `native`: this machine; profile.cpu_cores is its default kernel threads
  std::string reason;   // for native: NativeBoard::reason
};

// `native` (this machine, pick_native_board over the catalog), a profile name or a path to a
// YAML file. An unknown name is a ConfigError that lists the profiles there are.
ResolvedBoard resolve_board(const std::string& name_or_path);

}  // namespace edgert::config
