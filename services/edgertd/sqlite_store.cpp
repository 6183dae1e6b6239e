#include "sqlite_store.h"

#include <sqlite3.h>
#include <time.h>

#include <stdexcept>

namespace edgert::daemon {

namespace {

// Schema migrations, applied in order inside one transaction each. Never edit a shipped entry:
// append a new version instead, because devices in the field already ran the old ones.
struct Migration {
  int version;
  const char* sql;
};

const Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE events (
  id       INTEGER PRIMARY KEY,
  time_ns  INTEGER NOT NULL,            -- CLOCK_REALTIME ns since the epoch
  pipeline TEXT    NOT NULL DEFAULT '', -- '' for daemon-wide events
  kind     TEXT    NOT NULL,
  message  TEXT    NOT NULL,
  details  TEXT                         -- JSON, NULL when none
);
CREATE INDEX events_by_time ON events(time_ns);

-- No unique key on (pipeline, minute): a restart inside a minute leaves two partial rows.
CREATE TABLE metrics (
  pipeline          TEXT    NOT NULL,
  minute_start_ns   INTEGER NOT NULL,
  frames            INTEGER NOT NULL,
  drops             INTEGER NOT NULL,
  fps               REAL    NOT NULL,
  queue_p50_us      REAL NOT NULL, queue_p99_us       REAL NOT NULL,
  preprocess_p50_us REAL NOT NULL, preprocess_p99_us  REAL NOT NULL,
  inference_p50_us  REAL NOT NULL, inference_p99_us   REAL NOT NULL,
  postprocess_p50_us REAL NOT NULL, postprocess_p99_us REAL NOT NULL,
  total_p50_us      REAL NOT NULL, total_p99_us       REAL NOT NULL
);
CREATE INDEX metrics_by_pipeline ON metrics(pipeline, minute_start_ns);
CREATE INDEX metrics_by_time ON metrics(minute_start_ns);

CREATE TABLE engines (
  sha256       TEXT PRIMARY KEY,
  path         TEXT    NOT NULL,
  board        TEXT    NOT NULL,
  size         INTEGER NOT NULL,
  signer       TEXT,              -- NULL for unsigned engines
  installed_at INTEGER NOT NULL   -- ns since the epoch
);

CREATE TABLE deployments (
  id              INTEGER PRIMARY KEY,
  pipeline        TEXT    NOT NULL,
  sha256          TEXT    NOT NULL,
  previous_sha256 TEXT,             -- NULL for a pipeline's first engine
  state           TEXT    NOT NULL,
  step            TEXT,
  message         TEXT,
  started_at      INTEGER NOT NULL, -- ns since the epoch
  finished_at     INTEGER           -- NULL while in progress
);
CREATE INDEX deployments_by_pipeline ON deployments(pipeline, started_at);
)sql"},
};

constexpr const char* kMetricsColumns =
    "pipeline, minute_start_ns, frames, drops, fps, queue_p50_us, queue_p99_us, preprocess_p50_us, "
    "preprocess_p99_us, inference_p50_us, inference_p99_us, postprocess_p50_us, postprocess_p99_us, "
    "total_p50_us, total_p99_us";

// Leaves a cached statement reusable whatever happened, including a throw mid-step: a statement
// left un-reset after SQLITE_FULL would make the next use fail too.
struct ResetOnExit {
  sqlite3_stmt* statement;
  ~ResetOnExit() {
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
  }
};

void bind_text(sqlite3_stmt* s, int index, const std::string& text) {
  sqlite3_bind_text(s, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string column_text(sqlite3_stmt* s, int index) {
  const unsigned char* text = sqlite3_column_text(s, index);
  return text ? std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(s, index)) : std::string();
}

}  // namespace

uint64_t realtime_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SqliteStore::StatementDeleter::operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }

void SqliteStore::fail(const std::string& what) const {
  int code = db_ ? (sqlite3_extended_errcode(db_) & 0xff) : SQLITE_NOMEM;
  std::string message = "state database " + path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
  if (code == SQLITE_FULL)
    message += " (the disk or the configured size limit is full; events and metrics are not being saved)";
  else if (code == SQLITE_CANTOPEN || code == SQLITE_READONLY || code == SQLITE_PERM)
    message += " (check that the directory exists and that edgertd may write to it)";
  throw std::runtime_error(message);
}

SqliteStore::Statement SqliteStore::prepare(const char* sql) const {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &statement, nullptr) != SQLITE_OK)
    fail(std::string("cannot prepare '") + sql + "'");
  return Statement(statement);
}

void SqliteStore::exec(const char* sql, const char* what) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(what);
}

SqliteStore::SqliteStore(const std::string& path, const SqliteStoreOptions& options) : path_(path) {
  try {
    // NOMUTEX: the store is single-threaded by contract, so SQLite's own locking is wasted work.
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) fail("cannot open");
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, options.busy_timeout_ms);

    {
      Statement wal = prepare("PRAGMA journal_mode=WAL");
      if (sqlite3_step(wal.get()) != SQLITE_ROW) fail("cannot switch to WAL mode");
      std::string mode = column_text(wal.get(), 0);
      if (mode != "wal")
        throw std::runtime_error("state database " + path_ + ": journal_mode is '" + mode +
                                 "', expected 'wal' (the filesystem may not support shared memory)");
    }
    exec("PRAGMA synchronous=NORMAL", "cannot set synchronous=NORMAL");

    if (options.max_size_bytes > 0) {
      Statement page_size = prepare("PRAGMA page_size");
      if (sqlite3_step(page_size.get()) != SQLITE_ROW) fail("cannot read page_size");
      uint64_t pages = options.max_size_bytes / static_cast<uint64_t>(sqlite3_column_int64(page_size.get(), 0));
      // PRAGMA arguments cannot be bound; this is an integer we computed, never caller text.
      std::string sql = "PRAGMA max_page_count=" + std::to_string(pages > 0 ? pages : 1);
      exec(sql.c_str(), "cannot set max_page_count");
    }

    migrate();

    insert_event_ = prepare("INSERT INTO events (time_ns, pipeline, kind, message, details) VALUES (?, ?, ?, ?, ?)");
    insert_metrics_ = prepare((std::string("INSERT INTO metrics (") + kMetricsColumns +
                               ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)").c_str());
    delete_events_ = prepare("DELETE FROM events WHERE time_ns < ?");
    delete_metrics_ = prepare("DELETE FROM metrics WHERE minute_start_ns < ?");
  } catch (...) {
    insert_event_.reset();
    insert_metrics_.reset();
    delete_events_.reset();
    delete_metrics_.reset();
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

SqliteStore::~SqliteStore() {
  // close_v2 defers the close until the member statements below are finalized.
  sqlite3_close_v2(db_);
}

void SqliteStore::migrate() {
  exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
       "cannot create schema_migrations");
  // IMMEDIATE takes the write lock before reading the version, so two processes opening a fresh
  // file cannot both run the same migration.
  exec("BEGIN IMMEDIATE", "cannot begin the migration transaction");
  try {
    int current = schema_version();
    if (current > kSchemaVersion)
      throw std::runtime_error("state database " + path_ + ": schema version " + std::to_string(current) +
                               " is newer than this edgertd supports (" + std::to_string(kSchemaVersion) +
                               "); run the newer edgertd or move the file away");
    Statement record = prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)");
    for (const Migration& migration : kMigrations) {
      if (migration.version <= current) continue;
      exec(migration.sql, ("cannot apply schema migration " + std::to_string(migration.version)).c_str());
      ResetOnExit reset{record.get()};
      sqlite3_bind_int(record.get(), 1, migration.version);
      sqlite3_bind_int64(record.get(), 2, static_cast<int64_t>(realtime_now_ns()));
      if (sqlite3_step(record.get()) != SQLITE_DONE) fail("cannot record schema migration");
    }
    exec("COMMIT", "cannot commit the schema migration");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

int SqliteStore::schema_version() const {
  Statement query = prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (sqlite3_step(query.get()) != SQLITE_ROW) fail("cannot read the schema version");
  return sqlite3_column_int(query.get(), 0);
}

int64_t SqliteStore::record_event(const EventRecord& event) {
  sqlite3_stmt* s = insert_event_.get();
  ResetOnExit reset{s};
  sqlite3_bind_int64(s, 1, static_cast<int64_t>(event.time_ns));
  bind_text(s, 2, event.pipeline);
  bind_text(s, 3, event.kind);
  bind_text(s, 4, event.message);
  if (!event.details.is_null())
    // replace: a label with invalid UTF-8 must not turn an event into an exception.
    bind_text(s, 5, event.details.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (sqlite3_step(s) != SQLITE_DONE) fail("cannot record event '" + event.kind + "'");
  return sqlite3_last_insert_rowid(db_);
}

void SqliteStore::record_minute_metrics(const MinuteMetrics& m) {
  sqlite3_stmt* s = insert_metrics_.get();
  ResetOnExit reset{s};
  bind_text(s, 1, m.pipeline);
  sqlite3_bind_int64(s, 2, static_cast<int64_t>(m.minute_start_ns));
  sqlite3_bind_int64(s, 3, static_cast<int64_t>(m.frames));
  sqlite3_bind_int64(s, 4, static_cast<int64_t>(m.drops));
  sqlite3_bind_double(s, 5, m.fps);
  int index = 6;
  for (const LatencyQuantiles* q : {&m.queue, &m.preprocess, &m.inference, &m.postprocess, &m.total}) {
    sqlite3_bind_double(s, index++, q->p50_us);
    sqlite3_bind_double(s, index++, q->p99_us);
  }
  if (sqlite3_step(s) != SQLITE_DONE) fail("cannot record metrics of pipeline '" + m.pipeline + "'");
}

void SqliteStore::prune(std::chrono::seconds retention, uint64_t now_ns) {
  uint64_t window_ns = static_cast<uint64_t>(retention.count()) * 1000000000ull;
  int64_t cutoff = now_ns > window_ns ? static_cast<int64_t>(now_ns - window_ns) : 0;
  exec("BEGIN", "cannot begin the prune transaction");
  try {
    for (sqlite3_stmt* s : {delete_events_.get(), delete_metrics_.get()}) {
      ResetOnExit reset{s};
      sqlite3_bind_int64(s, 1, cutoff);
      if (sqlite3_step(s) != SQLITE_DONE) fail("cannot prune old rows");
    }
    exec("COMMIT", "cannot commit the prune");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<EventRecord> SqliteStore::recent_events(int limit) const {
  Statement query = prepare(
      "SELECT id, time_ns, pipeline, kind, message, details FROM events ORDER BY time_ns DESC, id DESC LIMIT ?");
  sqlite3_bind_int(query.get(), 1, limit);
  std::vector<EventRecord> events;
  int rc;
  while ((rc = sqlite3_step(query.get())) == SQLITE_ROW) {
    EventRecord e;
    e.id = sqlite3_column_int64(query.get(), 0);
    e.time_ns = static_cast<uint64_t>(sqlite3_column_int64(query.get(), 1));
    e.pipeline = column_text(query.get(), 2);
    e.kind = column_text(query.get(), 3);
    e.message = column_text(query.get(), 4);
    if (sqlite3_column_type(query.get(), 5) != SQLITE_NULL)
      e.details = nlohmann::json::parse(column_text(query.get(), 5), nullptr, /*allow_exceptions=*/false);
    events.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) fail("cannot read events");
  return events;
}

std::vector<MinuteMetrics> SqliteStore::metrics_for(const std::string& pipeline, uint64_t since_ns) const {
  Statement query = prepare((std::string("SELECT ") + kMetricsColumns +
                             " FROM metrics WHERE pipeline = ? AND minute_start_ns >= ? ORDER BY minute_start_ns")
                                .c_str());
  bind_text(query.get(), 1, pipeline);
  sqlite3_bind_int64(query.get(), 2, static_cast<int64_t>(since_ns));
  std::vector<MinuteMetrics> rows;
  int rc;
  while ((rc = sqlite3_step(query.get())) == SQLITE_ROW) {
    sqlite3_stmt* s = query.get();
    MinuteMetrics m;
    m.pipeline = column_text(s, 0);
    m.minute_start_ns = static_cast<uint64_t>(sqlite3_column_int64(s, 1));
    m.frames = static_cast<uint64_t>(sqlite3_column_int64(s, 2));
    m.drops = static_cast<uint64_t>(sqlite3_column_int64(s, 3));
    m.fps = sqlite3_column_double(s, 4);
    int index = 5;
    for (LatencyQuantiles* q : {&m.queue, &m.preprocess, &m.inference, &m.postprocess, &m.total}) {
      q->p50_us = sqlite3_column_double(s, index++);
      q->p99_us = sqlite3_column_double(s, index++);
    }
    rows.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) fail("cannot read metrics of pipeline '" + pipeline + "'");
  return rows;
}

}  // namespace edgert::daemon
