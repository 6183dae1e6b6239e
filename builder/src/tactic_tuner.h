// TacticTuner: picks, for a node whose kernel lists several tactics, the one that runs fastest
// on this machine, and remembers the answer in a TimingCache.
//
// Timing runs the kernel on the node's real constants (weights) and seeded random data for the
// other inputs, at the node's static shape: every candidate is prepared, warmed up, and then
// the candidates take turns, one run each per round, until each has enough runs to fill a few
// milliseconds (bounded in count and time); each keeps the median of its runs. Taking turns
// puts a burst of other load on all candidates alike. A tactic whose warm-up run (the faster
// of two when it is not far behind) is already several times slower than the best warm-up so
// far is not measured further.
//
// Nodes whose input shapes are not static (dynamic dimensions, values that decide shapes) or
// whose outputs are data-dependent are not timed: they take the kernel's first-listed tactic
// (its own best guess). When the board being built for is not this machine nothing is timed:
// the cache's record for that board decides, else the first-listed tactic. Only tactics the
// board can run are candidates (tactic_isa_requirements). A cache record naming a tactic the
// kernel no longer lists is timed again.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir.h"
#include "plugin_loader.h"
#include "timing_cache.h"

namespace edgert::builder {

enum class TacticPolicy {
  kTune,   // time candidates (or take the cache's answer)
  kFirst,  // the kernel's first-listed tactic, no timing, no cache
};

struct TunerOptions {
  TacticPolicy policy = TacticPolicy::kTune;
  // False when building for another board: only cache records of `board_fingerprint` count.
  bool time_here = true;
  std::string board_fingerprint;
  // The board's CPU features: a tactic whose name ends in an ISA the board lacks ("-avx512" on
  // an AVX2 board) is never chosen, even when this machine runs it fastest.
  std::vector<std::string> board_cpu_features;
  int32_t threads = 0;           // what plugins were configured with; part of the cache key
  TimingCache* cache = nullptr;  // required; borrowed for the tuner's lifetime
  double target_ms = 5;          // aim for this much measured time per tactic ...
  int32_t min_runs = 5;          // ... and at least this many runs (fewer only when over budget_ms)
  int32_t max_runs = 100;
  double budget_ms = 250;        // stop measuring a tactic after this much time (>= 1 run)
  double prune_factor = 3;       // a warm-up this many times the best median so far ends a tactic
  double tie_margin = 0.03;      // a later-listed tactic must be this much faster to win
  double spin_up_ms = 50;        // untimed work before a build's first timing (cores leave idle)
  // Memory the candidates of one node may hold prepared at once, to take turns: estimated as
  // twice the node's constant inputs per candidate (kernels pack weights, Winograd several
  // times over); a node over it is timed one candidate after the other.
  size_t together_bytes = size_t{512} << 20;
  std::function<void(const std::string&)> log;  // verbose build log; may be empty
};

struct TunerStats {
  int32_t nodes = 0;          // nodes whose kernel listed more than one tactic
  int32_t hits = 0;           // answered by the cache (including records timed earlier in this build)
  int32_t misses = 0;         // not in the cache
  int32_t timed = 0;          // misses measured here
  int32_t first_listed = 0;   // took the first-listed tactic (policy, shapes, foreign board, miss)
  double timing_seconds = 0;  // wall time spent measuring
};

class TacticTuner {
 public:
  explicit TacticTuner(TunerOptions options);

  // Sets node.tactic and node.tactic_name for `kernel` of `plugin`. Throws BuildError only for
  // a kernel that lists no tactics through a non-null tactics function.
  void choose(const Graph& graph, Node& node, const LoadedPlugin& plugin, const edgert_kernel& kernel);

  const TunerStats& stats() const { return stats_; }

 private:
  TunerOptions options_;
  TunerStats stats_;
};

// The CPU features a tactic needs, read from the ISA its name ends with (kernel names say
// dtype-op-tile-isa): "-avx512" -> avx512f, "-avx2" -> avx2 and fma, "-neon" -> neon; none for
// "-portable", "reference" and names without a known ISA.
std::vector<std::string> tactic_isa_requirements(const std::string& tactic_name);

// Canonical text of what a kernel sees of `node`: op, domain, opset, every input's dtype and
// shape and whether it is a constant, the number of outputs, attributes sorted by name. Equal
// signatures mean equal work for a kernel, whatever the weights.
std::string op_signature(const Graph& graph, const Node& node);

}  // namespace edgert::builder
