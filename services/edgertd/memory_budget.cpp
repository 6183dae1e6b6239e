#include "memory_budget.h"

#include <cstdio>
#include <fstream>

namespace edgert::daemon {

uint64_t cgroup_memory_limit() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cgroup, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return 0;
  std::ifstream max("/sys/fs/cgroup" + path + "/memory.max");
  std::string value;
  if (!(max >> value) || value == "max") return 0;
  return std::stoull(value);
}

std::string MemoryBudget::reserve(const std::string& owner, uint64_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t used = 0;
  for (const auto& [name, b] : reserved_)
    if (name != owner) used += b;
  if (limit_ && used + bytes > limit_) {
    char message[512];
    std::snprintf(message, sizeof message,
                  "%s needs %.1f MiB but the memory budget is %.1f MiB with %.1f MiB in use (%.1f MiB free)",
                  what.c_str(), bytes / 1048576.0, limit_ / 1048576.0, used / 1048576.0,
                  (limit_ - used) / 1048576.0);
    return message;
  }
  reserved_[owner] = bytes;
  return "";
}

void MemoryBudget::release(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  reserved_.erase(owner);
}

uint64_t MemoryBudget::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t used = 0;
  for (const auto& [name, b] : reserved_) used += b;
  return used;
}

}  // namespace edgert::daemon
