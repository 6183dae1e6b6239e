// The daemon's state database: events, per-minute pipeline metrics, and the engine/deployment
// records that hot-swap uses. One SQLite file in WAL mode with synchronous=NORMAL, so a commit
// appends to the WAL without an fsync (a power cut may lose the last commits, never corrupt
// the file), and readers (edgertctl status) do not block the daemon's writes.
//
// Not thread-safe: one SqliteStore per thread (the daemon uses it from the loop thread only).
// Every failure throws std::runtime_error naming the database path and sqlite3_errmsg; a full
// disk (SQLITE_FULL) is one of those, and the store stays usable afterwards, so callers on the
// loop catch, report and carry on.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace edgert::daemon {

// All times are CLOCK_REALTIME nanoseconds since the Unix epoch: rows must stay comparable
// across reboots, which CLOCK_MONOTONIC (Result::capture_ns) is not.
uint64_t realtime_now_ns();

struct EventRecord {
  int64_t id = 0;          // assigned by the database; ignored by record_event
  uint64_t time_ns = 0;
  std::string pipeline;    // empty for daemon-wide events
  std::string kind;        // short machine-readable tag: "first_result", "pipeline_error", ...
  std::string message;     // one line for humans
  nlohmann::json details;  // stored as JSON text; null when there is nothing more to say
};

struct LatencyQuantiles {
  double p50_us = 0;
  double p99_us = 0;
};

// One pipeline's aggregate over one wall-clock minute. A minute can have two rows when the
// daemon restarted inside it (each covers its own part), so readers sum frames and drops.
struct MinuteMetrics {
  std::string pipeline;
  uint64_t minute_start_ns = 0;  // a multiple of 60 s
  uint64_t frames = 0;
  uint64_t drops = 0;            // frames lost before a result (sequence gaps)
  double fps = 0;                // frames per second over the part of the minute observed
  LatencyQuantiles queue, preprocess, inference, postprocess, total;
};

struct SqliteStoreOptions {
  int busy_timeout_ms = 5000;  // how long a write waits for another connection's lock
  // Upper bound on the database file, so a flood of events cannot fill the disk; writes past it
  // fail with SQLITE_FULL like a full disk does. 0 means SQLite's own limit.
  uint64_t max_size_bytes = 0;
};

class SqliteStore {
 public:
  // Opens or creates the database at `path` and migrates it to the current schema. The parent
  // directory must exist and be writable (SQLite creates -wal and -shm files next to it).
  explicit SqliteStore(const std::string& path, const SqliteStoreOptions& options = {});
  ~SqliteStore();
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  static constexpr int kSchemaVersion = 1;
  int schema_version() const;  // the newest migration recorded in the file

  const std::string& path() const { return path_; }
  // For features with their own tables (hot-swap: engines, deployments). Owned by the store and
  // valid while it lives; same thread only.
  sqlite3* handle() const { return db_; }

  int64_t record_event(const EventRecord& event);  // returns the new row id
  void record_minute_metrics(const MinuteMetrics& metrics);

  // Deletes events and metrics older than `retention` before `now_ns`. Engines and deployments
  // are kept: they are the audit trail of what ran and are few.
  void prune(std::chrono::seconds retention, uint64_t now_ns = realtime_now_ns());

  std::vector<EventRecord> recent_events(int limit) const;  // newest first
  std::vector<MinuteMetrics> metrics_for(const std::string& pipeline, uint64_t since_ns) const;  // oldest first

 private:
  struct StatementDeleter {
    void operator()(sqlite3_stmt* statement) const;
  };
  using Statement = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

  Statement prepare(const char* sql) const;
  void exec(const char* sql, const char* what);
  [[noreturn]] void fail(const std::string& what) const;
  void migrate();

  std::string path_;
  sqlite3* db_ = nullptr;
  Statement insert_event_, insert_metrics_, delete_events_, delete_metrics_;
};

}  // namespace edgert::daemon
