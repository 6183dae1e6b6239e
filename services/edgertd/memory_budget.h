// The daemon's memory budget: the smaller of the configured (or board profile's) budget and the
// cgroup limit systemd put on the unit (MemoryMax= -> memory.max). Engines reserve their
// footprint before they are mapped; a load that does not fit is refused with the numbers.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace edgert::daemon {

// memory.max of this process's cgroup (cgroup v2), or 0 when unlimited or unknown.
uint64_t cgroup_memory_limit();

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  // Reserves `bytes` for `owner`; returns "" on success or the refusal message (numbers in MiB).
  std::string reserve(const std::string& owner, uint64_t bytes, const std::string& what);
  void release(const std::string& owner);
  uint64_t used() const;
  uint64_t limit() const { return limit_; }

 private:
  mutable std::mutex mutex_;
  uint64_t limit_;
  std::map<std::string, uint64_t> reserved_;
};

}  // namespace edgert::daemon
