#include "timing_cache.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "build_error.h"

namespace edgert::builder {
namespace {

// The file says what it is in `meta`, so another program's SQLite file is refused, not altered.
constexpr const char* kFormat = "edgert-timing-cache";
constexpr int kFormatVersion = 1;

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS timings("
    "  board TEXT NOT NULL, plugin TEXT NOT NULL, plugin_version TEXT NOT NULL, kernel TEXT NOT NULL,"
    "  signature TEXT NOT NULL, threads INTEGER NOT NULL,"
    "  chosen_tactic INTEGER NOT NULL, chosen_name TEXT NOT NULL,"
    "  tactics TEXT NOT NULL,"  // JSON: [{"id", "name", "median_ms", "runs"}] in listed order
    "  updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    "  PRIMARY KEY(board, plugin, plugin_version, kernel, signature, threads));";

[[noreturn]] void fail_on(sqlite3* db, const std::string& path, const char* doing) {
  int code = sqlite3_errcode(db);
  std::string why = sqlite3_errmsg(db);
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
    build_fail(EDGERT_ERR_FORMAT,
               "timing cache '%s' is not a usable SQLite database (%s) while %s: give --timing-cache a new "
               "file name, remove the file if it is a damaged cache, or pass --ignore-timing-cache-errors to "
               "build without it",
               path.c_str(), why.c_str(), doing);
  build_fail(EDGERT_ERR_IO, "timing cache '%s': %s while %s", path.c_str(), why.c_str(), doing);
}

class Statement {
 public:
  Statement(sqlite3* db, const char* sql, const std::string& path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail_on(db, path, "reading it");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() { return stmt_; }
  void bind(int i, const std::string& s) { sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT); }
  void bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Parameters ?1..?6: the columns that make up a record's key, in table order.
void bind_key(Statement& statement, const TimingKey& key) {
  statement.bind(1, key.board);
  statement.bind(2, key.plugin);
  statement.bind(3, key.plugin_version);
  statement.bind(4, key.kernel);
  statement.bind(5, key.signature);
  statement.bind(6, static_cast<int64_t>(key.threads));
}

std::string column_text(sqlite3_stmt* stmt, int i) {
  const unsigned char* s = sqlite3_column_text(stmt, i);
  return s ? reinterpret_cast<const char*>(s) : "";
}

std::string timings_json(const std::vector<TacticTiming>& timings) {
  nlohmann::json j = nlohmann::json::array();
  for (const TacticTiming& t : timings)
    j.push_back({{"id", t.id}, {"name", t.name}, {"median_ms", t.median_ms}, {"runs", t.runs}});
  return j.dump();
}

std::vector<TacticTiming> timings_from_json(const std::string& text) {
  std::vector<TacticTiming> timings;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return timings;
  for (const auto& t : j) {
    if (!t.is_object()) continue;
    TacticTiming timing;
    timing.id = t.value("id", int64_t{0});
    timing.name = t.value("name", std::string());
    timing.median_ms = t.value("median_ms", -1.0);
    timing.runs = t.value("runs", 0);
    timings.push_back(std::move(timing));
  }
  return timings;
}

void exec(sqlite3* db, const std::string& path, const char* sql, const char* doing) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail_on(db, path, doing);
}

// A file with tables but no edgert meta row is somebody else's database: refuse to touch it.
void check_or_initialize(sqlite3* db, const std::string& path) {
  std::vector<std::string> tables;
  {
    Statement list(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", path);
    int rc;
    while ((rc = sqlite3_step(list.get())) == SQLITE_ROW) tables.push_back(column_text(list.get(), 0));
    if (rc != SQLITE_DONE) fail_on(db, path, "reading its tables");
  }
  if (tables.empty()) {
    exec(db, path, "BEGIN IMMEDIATE", "creating it");
    exec(db, path, kSchema, "creating it");
    Statement meta(db, "INSERT OR REPLACE INTO meta(key, value) VALUES ('format', ?1), ('format_version', ?2)", path);
    meta.bind(1, std::string(kFormat));
    meta.bind(2, std::to_string(kFormatVersion));
    if (sqlite3_step(meta.get()) != SQLITE_DONE) fail_on(db, path, "creating it");
    exec(db, path, "COMMIT", "creating it");
    return;
  }
  std::string format, version;
  bool has_meta = false;
  for (const std::string& t : tables) has_meta = has_meta || t == "meta";
  if (has_meta) {
    Statement meta(db, "SELECT key, value FROM meta WHERE key IN ('format', 'format_version')", path);
    while (sqlite3_step(meta.get()) == SQLITE_ROW)
      (column_text(meta.get(), 0) == "format" ? format : version) = column_text(meta.get(), 1);
  }
  if (format != kFormat) {
    std::string names;
    for (const std::string& t : tables) names += (names.empty() ? "" : ", ") + t;
    build_fail(EDGERT_ERR_FORMAT,
               "'%s' is an SQLite database but not an edgert timing cache (tables: %s); give --timing-cache a "
               "new file name, or pass --ignore-timing-cache-errors to build without a cache",
               path.c_str(), names.c_str());
  }
  if (version != std::to_string(kFormatVersion))
    build_fail(EDGERT_ERR_VERSION,
               "timing cache '%s' has format version %s; this edgert reads version %d; delete it to start a new "
               "cache",
               path.c_str(), version.empty() ? "(none)" : version.c_str(), kFormatVersion);
}

}  // namespace

TimingCache::TimingCache() = default;
TimingCache::TimingCache(TimingCache&& o) noexcept
    : path_(std::move(o.path_)), db_(o.db_), read_only_(o.read_only_), pending_(std::move(o.pending_)) {
  o.db_ = nullptr;
}
TimingCache& TimingCache::operator=(TimingCache&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close(db_);
    path_ = std::move(o.path_);
    db_ = o.db_;
    read_only_ = o.read_only_;
    pending_ = std::move(o.pending_);
    o.db_ = nullptr;
  }
  return *this;
}
TimingCache::~TimingCache() {
  if (db_) sqlite3_close(db_);
}

TimingCache TimingCache::open(const std::string& path) {
  TimingCache cache;
  cache.path_ = path;
  if (sqlite3_open_v2(path.c_str(), &cache.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    std::string why = cache.db_ ? sqlite3_errmsg(cache.db_) : "out of memory";
    build_fail(EDGERT_ERR_IO, "cannot open timing cache '%s': %s", path.c_str(), why.c_str());
  }
  // Parallel builds may share one cache file: wait for another writer instead of failing.
  sqlite3_busy_timeout(cache.db_, 10000);
  // The default rollback journal, not WAL: the cache stays one self-contained file that can be
  // copied from a board or shipped read-only (WAL needs writable -wal/-shm files beside it).
  // Builds write once, in one transaction at the end, so WAL's concurrency buys nothing here.
  cache.read_only_ = sqlite3_db_readonly(cache.db_, "main") == 1;
  if (cache.read_only_) {
    // Nothing can be created in it; an empty read-only file is no cache at all.
    Statement probe(cache.db_, "SELECT count(*) FROM sqlite_master", path);
    if (sqlite3_step(probe.get()) != SQLITE_ROW) fail_on(cache.db_, path, "opening it");
    if (sqlite3_column_int64(probe.get(), 0) == 0)
      build_fail(EDGERT_ERR_IO, "timing cache '%s' is empty and read-only: it cannot be created", path.c_str());
  }
  check_or_initialize(cache.db_, path);
  return cache;
}

std::optional<TimingRecord> TimingCache::find(const TimingKey& key) const {
  auto it = pending_.find(key);
  if (it != pending_.end()) return it->second;
  if (!db_) return std::nullopt;
  Statement q(db_,
              "SELECT chosen_tactic, chosen_name, tactics FROM timings WHERE board = ?1 AND plugin = ?2 AND "
              "plugin_version = ?3 AND kernel = ?4 AND signature = ?5 AND threads = ?6",
              path_);
  bind_key(q, key);
  int rc = sqlite3_step(q.get());
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail_on(db_, path_, "looking up a record");
  TimingRecord record;
  record.chosen = sqlite3_column_int64(q.get(), 0);
  record.chosen_name = column_text(q.get(), 1);
  record.timings = timings_from_json(column_text(q.get(), 2));
  return record;
}

void TimingCache::put(const TimingKey& key, TimingRecord record) { pending_[key] = std::move(record); }

void TimingCache::save() {
  if (!db_ || pending_.empty()) return;
  exec(db_, path_, "BEGIN IMMEDIATE", "saving new records");
  Statement insert(db_,
                   "INSERT OR REPLACE INTO timings(board, plugin, plugin_version, kernel, signature, threads, "
                   "chosen_tactic, chosen_name, tactics) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                   path_);
  for (const auto& [key, record] : pending_) {
    sqlite3_reset(insert.get());
    bind_key(insert, key);
    insert.bind(7, record.chosen);
    insert.bind(8, record.chosen_name);
    insert.bind(9, timings_json(record.timings));
    if (sqlite3_step(insert.get()) != SQLITE_DONE) {
      std::string why = sqlite3_errmsg(db_);
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      build_fail(EDGERT_ERR_IO, "timing cache '%s': cannot save a record: %s", path_.c_str(), why.c_str());
    }
  }
  exec(db_, path_, "COMMIT", "saving new records");
  pending_.clear();
}

std::vector<std::pair<TimingKey, TimingRecord>> TimingCache::entries() const {
  std::map<TimingKey, TimingRecord> all;
  if (db_) {
    Statement q(db_,
                "SELECT board, plugin, plugin_version, kernel, signature, threads, chosen_tactic, chosen_name, "
                "tactics FROM timings",
                path_);
    int rc;
    while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
      TimingKey key{column_text(q.get(), 0), column_text(q.get(), 1), column_text(q.get(), 2),
                    column_text(q.get(), 3), column_text(q.get(), 4),
                    static_cast<int32_t>(sqlite3_column_int64(q.get(), 5))};
      TimingRecord record;
      record.chosen = sqlite3_column_int64(q.get(), 6);
      record.chosen_name = column_text(q.get(), 7);
      record.timings = timings_from_json(column_text(q.get(), 8));
      all[key] = std::move(record);
    }
    if (rc != SQLITE_DONE) fail_on(db_, path_, "reading its records");
  }
  for (const auto& [key, record] : pending_) all[key] = record;
  return {all.begin(), all.end()};
}

}  // namespace edgert::builder
