// TimingCache: what tactic timing found, kept so later builds skip the measuring. TensorRT's
// timing cache in spirit, stored in SQLite so one file serves many builds and boards.
//
// A record is keyed by everything that decides a kernel's speed: the board (profile
// fingerprint), the plugin and its version, the kernel, the op signature (op, domain, opset,
// input dtypes and shapes, which inputs are constants, attributes) and the thread count the
// kernels were timed with. Weights are not part of the key: timing does not depend on their
// values.
//
// Lookups see records written earlier in the same build (nodes of equal signature are timed
// once); save() writes the records added since open in one transaction.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

struct sqlite3;

namespace edgert::builder {

struct TimingKey {
  std::string board;  // board profile fingerprint
  std::string plugin;
  std::string plugin_version;
  std::string kernel;
  std::string signature;  // op_signature(): canonical text of the node as the kernel sees it
  int32_t threads = 0;    // edgert_plugin_config.num_threads during timing; 0 = plugin default

  bool operator<(const TimingKey& o) const {
    return std::tie(board, plugin, plugin_version, kernel, signature, threads) <
           std::tie(o.board, o.plugin, o.plugin_version, o.kernel, o.signature, o.threads);
  }
};

struct TacticTiming {
  int64_t id = 0;
  std::string name;
  double median_ms = -1;  // < 0: the tactic failed prepare or execute and was not timed
  int32_t runs = 0;       // timed runs behind the median (all rounds); 1 for a tactic cut short as clearly slower
};

struct TimingRecord {
  int64_t chosen = 0;
  std::string chosen_name;
  std::vector<TacticTiming> timings;  // in the order the kernel listed them
};

class TimingCache {
 public:
  // A cache that lives for one build only (no --timing-cache).
  TimingCache();
  // Opens or creates the SQLite file at `path` (rollback journal: one self-contained file). Throws BuildError naming the file
  // when it is not an SQLite database, is corrupt, or is an SQLite file of something else. A
  // file this process may not write is opened read-only (see read_only()).
  static TimingCache open(const std::string& path);

  TimingCache(TimingCache&&) noexcept;
  TimingCache& operator=(TimingCache&&) noexcept;
  ~TimingCache();

  std::optional<TimingRecord> find(const TimingKey& key) const;
  void put(const TimingKey& key, TimingRecord record);
  // Writes the records put since open (one transaction); no-op without a file. Throws BuildError.
  void save();

  // Every record: the file's and those put since (for tools and tests).
  std::vector<std::pair<TimingKey, TimingRecord>> entries() const;
  const std::string& path() const { return path_; }  // empty for an in-memory cache
  bool read_only() const { return read_only_; }       // save() would fail: a shipped, read-only file
  size_t pending() const { return pending_.size(); }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  bool read_only_ = false;
  std::map<TimingKey, TimingRecord> pending_;
};

}  // namespace edgert::builder
