// Hot swap's records in the state database (tables engines and deployments of schema v1):
// what is installed, and every deploy, swap, rollback and unload with the step it reached.
// Loop thread only, like SqliteStore; every failure throws std::runtime_error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "sqlite_store.h"

namespace edgert::daemon {

struct InstalledEngine {
  std::string sha256, path, board, signer;  // signer "" when unsigned
  uint64_t size = 0;
};

class DeploymentLog {
 public:
  explicit DeploymentLog(SqliteStore& store) : store_(store) {}

  void add_engine(const InstalledEngine& engine);  // keeps the first installed_at of a hash
  nlohmann::json engines() const;                  // newest first

  // A new deployments row in state 'in_progress'; returns its id.
  int64_t begin(const std::string& pipeline, const std::string& sha256, const std::string& previous,
                const std::string& kind);
  void step(int64_t id, const std::string& step, const std::string& message);
  // state: active | failed | interrupted | superseded | unloaded
  void finish(int64_t id, const std::string& state, const std::string& step, const std::string& message);
  // The previously active row of `pipeline` becomes 'superseded'.
  void supersede_active(const std::string& pipeline, int64_t except_id);
  // Rows a crash left 'in_progress' become 'interrupted'; returns how many.
  int close_interrupted();
  nlohmann::json history(const std::string& pipeline, int limit) const;  // newest first

 private:
  SqliteStore& store_;
};

}  // namespace edgert::daemon
