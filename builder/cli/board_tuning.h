// Tactic timing on the real board, driven from a workstation: `edgert tune --host` and
// `edgert build --tune-on`. The board's own edgert times every tactic (an `edgert build` there
// with a timing cache, its engine discarded unless asked for); its records come back and are
// merged into the workstation's timing cache, where a build for that board finds them.
//
// A record's key must be the one the workstation's build looks up: the board profile's
// fingerprint (the profile file is copied to the board, so both read the same facts), the
// plugin name and version (the board's edgert and plugins must be this edgert's version: checked
// first), the op signature (same model, same passes) and the kernel threads: the board times at
// --threads N when given, else at the profile's cpu.cores, which is also what a workstation
// build for that profile looks up; never this machine's CPU count.
#pragma once

#include <cstdint>
#include <string>

#include "board_profile.h"
#include "remote_shell.h"

namespace edgert::cli {

struct BoardTuning {
  RemoteShell board;
  std::string model;                   // ONNX file here
  config::BoardProfile profile;        // the board's profile (a name or a file, never native)
  std::string timing_cache;            // SQLite timing cache here: created if missing, records merged in
  int32_t threads = 0;                 // 0: profile.cpu_cores
  std::string remote_edgert = "edgert";
  std::string board_engine;            // non-empty: also bring back the engine the board built
  std::string plugin_path;             // plugins here, whose versions the board's must equal
};

struct BoardTuningResult {
  std::string board_edgert;  // "edgert 0.1.0"
  int32_t threads = 0;       // the key's thread count
  size_t records = 0;        // the board's records merged
  size_t new_records = 0;    // of those, keys FILE did not have
};

// A file in /tmp removed when this goes out of scope (the board's cache copy, --tune-on's cache).
class TemporaryFile {
 public:
  TemporaryFile() = default;
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile();
  // Creates an empty file from a mkstemp template ("/tmp/name-XXXXXX"); returns its path.
  const std::string& make(const char* path_template);

 private:
  std::string path_;
};

// Prints each step on stdout; the board's build output passes through. Throws BuildError with a
// message saying what to do when ssh cannot reach the board, the board has no edgert, another
// edgert or plugin version, or is not the profile's architecture, and when the build there fails.
BoardTuningResult tune_on_board(const BoardTuning& request);

}  // namespace edgert::cli
