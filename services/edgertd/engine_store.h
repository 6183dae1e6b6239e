// The engine store on the board: STATE_DIR/engines/<sha256>.engine, plus the record of which
// engine each pipeline runs, STATE_DIR/active/<pipeline>.json. Both are written crash-safely:
// a temporary file in the same directory, fsync, rename over the final name, fsync of the
// directory. After a kill -9 or a power cut at any point, a name in the store is either absent
// or the complete file, and an active record names the old or the new engine, never a mix.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace edgert::daemon {

struct ActiveRecord {
  std::string sha256;     // the engine the pipeline runs
  std::string previous;   // the one before it ("" when none): what rollback goes back to
  std::string config_engine;  // the configured engine path when this was written: when the
                              // configuration names another file later, the configuration wins
};

class EngineStore {
 public:
  // Creates the directories when missing and removes temporary files a crash left behind.
  explicit EngineStore(const std::string& state_dir);

  const std::string& directory() const { return engines_dir_; }
  std::string path_of(const std::string& sha256) const { return engines_dir_ + "/" + sha256 + ".engine"; }
  bool contains(const std::string& sha256) const;

  // Copies `source` into the store under its SHA-256 and returns it; a file already there is
  // kept (same name, same bytes). When `expected_sha256` is not empty and the copy's hash
  // differs, nothing is installed and std::runtime_error says both. Hashes what it copies, so
  // a file changing under it cannot be installed under the wrong name.
  // `added` (optional) says whether the file is new to the store, so a refused upload can go.
  std::string install(const std::string& source, const std::string& expected_sha256, bool* added = nullptr);
  // The sha256 of every engine in the store.
  std::vector<std::string> list() const;
  // Deletes an engine from the store (durably); the caller decides that nothing uses it.
  // Throws std::runtime_error.
  void remove(const std::string& sha256);

  std::optional<ActiveRecord> read_active(const std::string& pipeline) const;
  void write_active(const std::string& pipeline, const ActiveRecord& record);

  // Debug hook for crash tests: EDGERTD_DEBUG_CRASH_AT=<point> makes the daemon _exit(137)-like
  // SIGKILL itself at that point ("install-tmp", "install-renamed", "switched", "active-tmp").
  static void crash_point(const char* point);

 private:
  std::string engines_dir_, active_dir_;
};

}  // namespace edgert::daemon
