// One reading of the daemon's numbers, taken on the loop thread (Daemon::snapshot). The
// control socket's `status` and `stats` and the Prometheus endpoint are all written from it, so
// `edgertctl stats` and a scrape cannot disagree on what a counter means.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline.h"

namespace edgert::daemon {

// Engine changes of one pipeline since the daemon started.
struct SwapCounts {
  uint64_t swaps = 0;      // swap and deploy that switched the engine
  uint64_t rollbacks = 0;  // rollbacks that switched the engine back
  uint64_t refused = 0;    // swaps, deploys and rollbacks refused at any step
};

struct PipelineSnapshot {
  std::string name;
  PipelineStats stats;
  SwapCounts swaps;
};

struct DaemonSnapshot {
  uint64_t memory_budget_bytes = 0;    // 0: no budget
  uint64_t memory_reserved_bytes = 0;  // engines and frame buffers
  uint64_t socket_buffer_bytes = 0;    // what slow socket readers hold right now
  uint64_t memory_used_bytes() const { return memory_reserved_bytes + socket_buffer_bytes; }
  std::vector<PipelineSnapshot> pipelines;  // by name
};

}  // namespace edgert::daemon
