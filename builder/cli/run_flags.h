// The flags `edgert run` and `edgert bench` share on top of EngineLoadFlags: which engine, on
// which inputs, how many untimed and timed runs, and where the per-run timings go. trtexec's
// spellings are accepted beside edgert's own: --loadEngine=FILE for the engine, --shapes=,
// --warmUp=MS, --iterations=, --duration=, --exportTimes=FILE.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace edgert::cli {

struct RunFlags {
  std::string engine, load_engine;
  std::vector<std::string> inputs;  // --input NAME=FILE
  std::vector<std::string> shapes;  // --shapes values (input_shapes.h)
  int iterations = 1;
  int warmup_runs = 0;     // --warmup: untimed runs, counted
  double warmup_ms = 0;    // --warmUp: untimed runs for at least this long (trtexec's meaning)
  double duration_s = 0;   // timed runs go on until both --iterations and --duration are done
  std::string export_times;

  // Registers the flags; `iterations` and `warmup_runs` hold the command's defaults.
  void add_to(CLI::App* command);
  // The positional ENGINE or --loadEngine; throws CLI::RequiredError when neither is given and
  // BuildError when both name different files.
  const std::string& engine_path() const;
  // Calls `run` until both --warmup runs and --warmUp milliseconds are done; returns the count.
  int warm_up(const std::function<void()>& run) const;
  // True while timed runs must go on: fewer than --iterations so far, or under --duration.
  bool more_timed_runs(size_t runs_so_far, double seconds_so_far) const {
    return static_cast<int>(runs_so_far) < iterations || seconds_so_far < duration_s;
  }
};

// One timed run: its start and end in milliseconds since the first timed run started.
struct RunTime {
  double start_ms = 0, end_ms = 0;
};

// --exportTimes FILE: a JSON array with one object per timed run, in trtexec's key names:
// startComputeMs, endComputeMs (since the first timed run started), computeMs and latencyMs
// (equal: a run is synchronous, with no host/device copies or enqueue to tell apart). Throws
// BuildError when the file cannot be written.
void write_export_times(const std::string& path, const std::vector<RunTime>& runs);

}  // namespace edgert::cli
