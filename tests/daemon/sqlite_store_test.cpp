// SqliteStore and SqliteSink against real SQLite files in a temporary directory.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include "sqlite_sink.h"
#include "sqlite_store.h"

namespace edgert::daemon {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSecond = 1000000000ull;
constexpr uint64_t kMinute = 60 * kSecond;
// A fixed, minute-aligned wall-clock time (2023-11-14), so tests do not depend on today.
constexpr uint64_t kBaseNs = 1700000040ull * kSecond;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/edgert-sqlite-test-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A second, independent connection: what edgertctl or sqlite3(1) would see.
std::string query_text(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
      while (sqlite3_step(s) == SQLITE_ROW) {
        if (!out.empty()) out += ",";
        const unsigned char* text = sqlite3_column_text(s, 0);
        out += text ? reinterpret_cast<const char*>(text) : "NULL";
      }
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return out;
}

EventRecord event_at(uint64_t time_ns, const std::string& kind) {
  EventRecord e;
  e.time_ns = time_ns;
  e.pipeline = "cam0";
  e.kind = kind;
  e.message = kind + " happened";
  return e;
}

MinuteMetrics metrics_at(uint64_t minute_ns, uint64_t frames) {
  MinuteMetrics m;
  m.pipeline = "cam0";
  m.minute_start_ns = minute_ns;
  m.frames = frames;
  m.drops = 2;
  m.fps = frames / 60.0;
  m.inference = {1500, 2500};
  m.total = {4000, 9000};
  return m;
}

TEST(SqliteStore, CreatesSchemaInWalMode) {
  TempDir dir;
  std::string path = dir.file("state.db");
  SqliteStore store(path);
  EXPECT_EQ(store.schema_version(), SqliteStore::kSchemaVersion);
  EXPECT_EQ(query_text(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"),
            "deployments,engines,events,metrics,schema_migrations");
  // journal_mode=WAL is stored in the file, so a fresh connection sees it too.
  EXPECT_EQ(query_text(path, "PRAGMA journal_mode"), "wal");
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(store.handle(), "PRAGMA synchronous", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(s, 0), 1);  // NORMAL
  sqlite3_finalize(s);
}

TEST(SqliteStore, EventsRoundTripNewestFirst) {
  TempDir dir;
  SqliteStore store(dir.file("state.db"));
  EventRecord first = event_at(kBaseNs, "first_result");
  first.details = {{"engine", "abc123"}, {"sequence", 7}};
  store.record_event(first);
  store.record_event(event_at(kBaseNs + kSecond, "pipeline_error"));
  EventRecord quoted = event_at(kBaseNs + 2 * kSecond, "odd");
  quoted.message = "it's \"quoted\"; DROP TABLE events; --";  // bound, not spliced into SQL
  store.record_event(quoted);

  std::vector<EventRecord> events = store.recent_events(10);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].message, quoted.message);
  EXPECT_EQ(events[1].kind, "pipeline_error");
  EXPECT_TRUE(events[1].details.is_null());
  EXPECT_EQ(events[2].kind, "first_result");
  EXPECT_EQ(events[2].time_ns, kBaseNs);
  EXPECT_EQ(events[2].pipeline, "cam0");
  EXPECT_EQ(events[2].details, first.details);
  EXPECT_EQ(store.recent_events(2).size(), 2u);
}

TEST(SqliteStore, MetricsRoundTripPerPipelineOldestFirst) {
  TempDir dir;
  SqliteStore store(dir.file("state.db"));
  store.record_minute_metrics(metrics_at(kBaseNs + kMinute, 1800));
  store.record_minute_metrics(metrics_at(kBaseNs, 1790));
  MinuteMetrics other = metrics_at(kBaseNs, 5);
  other.pipeline = "cam1";
  store.record_minute_metrics(other);

  std::vector<MinuteMetrics> rows = store.metrics_for("cam0", kBaseNs);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].minute_start_ns, kBaseNs);
  EXPECT_EQ(rows[0].frames, 1790u);
  EXPECT_EQ(rows[0].drops, 2u);
  EXPECT_DOUBLE_EQ(rows[0].fps, 1790 / 60.0);
  EXPECT_DOUBLE_EQ(rows[0].inference.p50_us, 1500);
  EXPECT_DOUBLE_EQ(rows[0].inference.p99_us, 2500);
  EXPECT_DOUBLE_EQ(rows[0].total.p99_us, 9000);
  EXPECT_EQ(rows[1].minute_start_ns, kBaseNs + kMinute);
  EXPECT_EQ(store.metrics_for("cam0", kBaseNs + kMinute).size(), 1u);
  EXPECT_EQ(store.metrics_for("cam1", 0).size(), 1u);
}

TEST(SqliteStore, PruneDeletesOnlyRowsOlderThanRetention) {
  TempDir dir;
  std::string path = dir.file("state.db");
  SqliteStore store(path);
  uint64_t now = kBaseNs + 10 * 24 * 3600 * kSecond;
  uint64_t eight_days_ago = now - 8 * 24 * 3600 * kSecond;
  uint64_t one_hour_ago = now - 3600 * kSecond;
  store.record_event(event_at(eight_days_ago, "old"));
  store.record_event(event_at(one_hour_ago, "new"));
  store.record_minute_metrics(metrics_at(eight_days_ago - eight_days_ago % kMinute, 1));
  store.record_minute_metrics(metrics_at(one_hour_ago - one_hour_ago % kMinute, 2));
  ASSERT_EQ(sqlite3_exec(store.handle(),
                         "INSERT INTO engines (sha256, path, board, size, installed_at) VALUES ('aa', '/e', 'x86', 1, 0)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);

  store.prune(std::chrono::hours(24 * 7), now);

  std::vector<EventRecord> events = store.recent_events(10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "new");
  std::vector<MinuteMetrics> rows = store.metrics_for("cam0", 0);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].frames, 2u);
  EXPECT_EQ(query_text(path, "SELECT COUNT(*) FROM engines"), "1");  // the audit trail stays
}

TEST(SqliteStore, ReopenKeepsDataAndDoesNotMigrateAgain) {
  TempDir dir;
  std::string path = dir.file("state.db");
  { SqliteStore(path).record_event(event_at(kBaseNs, "before_restart")); }
  std::string applied = query_text(path, "SELECT version || ':' || applied_at FROM schema_migrations");
  ASSERT_FALSE(applied.empty());

  SqliteStore store(path);
  EXPECT_EQ(store.schema_version(), SqliteStore::kSchemaVersion);
  EXPECT_EQ(query_text(path, "SELECT version || ':' || applied_at FROM schema_migrations"), applied);
  std::vector<EventRecord> events = store.recent_events(10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "before_restart");
}

TEST(SqliteStore, RefusesASchemaNewerThanItKnows) {
  TempDir dir;
  std::string path = dir.file("state.db");
  { SqliteStore store(path);
    ASSERT_EQ(sqlite3_exec(store.handle(), "INSERT INTO schema_migrations VALUES (99, 0)", nullptr, nullptr, nullptr),
              SQLITE_OK); }
  try {
    SqliteStore again(path);
    FAIL() << "opened a database with schema version 99";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("schema version 99"), std::string::npos) << error.what();
  }
}

void expect_open_error(const std::string& path) {
  try {
    SqliteStore store(path);
    FAIL() << "opened " << path;
  } catch (const std::runtime_error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("unable to open database file"), std::string::npos) << message;  // sqlite3_errmsg
    EXPECT_NE(message.find("edgertd may write"), std::string::npos) << message;             // the hint
  }
}

TEST(SqliteStore, UnwritableLocationGivesAClearError) {
  TempDir dir;
  expect_open_error(dir.file("no-such-dir/state.db"));

  // Permission bits do not stop root, which is how CI runs; procfs refuses file creation to
  // everyone, so it stands in for a read-only directory there.
  std::string read_only = dir.file("read-only");
  ASSERT_EQ(mkdir(read_only.c_str(), 0555), 0);
  expect_open_error(geteuid() == 0 ? "/proc/edgert-state-test.db" : read_only + "/state.db");
}

TEST(SqliteStore, FullDatabaseIsReportedAndTheStoreRecovers) {
  TempDir dir;
  std::string path = dir.file("state.db");
  SqliteStoreOptions options;
  options.max_size_bytes = 128 * 1024;  // the same SQLITE_FULL a full disk gives, without filling one
  SqliteStore store(path, options);

  EventRecord big = event_at(kBaseNs, "big");
  big.message.assign(4096, 'x');
  std::string error;
  int written = 0;
  for (; written < 1000 && error.empty(); ++written) {
    try {
      store.record_event(big);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  ASSERT_FALSE(error.empty()) << "128 KiB limit never reached after " << written << " events";
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("database or disk is full"), std::string::npos) << error;

  // Still usable: reads work, and once old rows go a write succeeds again.
  EXPECT_FALSE(store.recent_events(1).empty());
  store.prune(std::chrono::seconds(0), kBaseNs + kSecond);
  EXPECT_NO_THROW(store.record_event(event_at(kBaseNs + 2 * kSecond, "after_prune")));
}

struct FakeClock {
  uint64_t now = kBaseNs;
  std::function<uint64_t()> function() {
    return [this] { return now; };
  }
};

Result result_with(uint64_t sequence, double total_us, double inference_us, const std::string& engine = "e1") {
  Result r;
  r.pipeline = "cam0";
  r.sequence = sequence;
  r.engine = engine;
  r.times.total_us = total_us;
  r.times.inference_us = inference_us;
  return r;
}

TEST(SqliteSink, MinuteRollOverWritesExactQuantilesAndDrops) {
  TempDir dir;
  SqliteStore store(dir.file("state.db"));
  FakeClock clock;
  SqliteSinkOptions options;
  options.clock = clock.function();
  SqliteSink sink(store, options);

  // Latencies 1..100 us in a shuffled order; sequence 50 never arrives (one drop).
  std::vector<int> order(100);
  std::iota(order.begin(), order.end(), 1);
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  clock.now = kBaseNs + 5 * kSecond;  // the sink starts watching 5 s into the minute
  uint64_t sequence = 1;
  for (int latency : order) {
    if (sequence == 50) ++sequence;
    sink.publish(result_with(sequence++, latency, latency * 10.0));
  }
  EXPECT_TRUE(store.metrics_for("cam0", 0).empty()) << "a row was written before the minute ended";

  clock.now = kBaseNs + kMinute + kSecond;
  sink.publish(result_with(sequence++, 7, 70));  // first result of the next minute closes the last one

  std::vector<MinuteMetrics> rows = store.metrics_for("cam0", 0);
  ASSERT_EQ(rows.size(), 1u);
  const MinuteMetrics& m = rows[0];
  EXPECT_EQ(m.minute_start_ns, kBaseNs);
  EXPECT_EQ(m.frames, 100u);
  EXPECT_EQ(m.drops, 1u);
  EXPECT_NEAR(m.fps, 100 / 55.0, 1e-9);
  EXPECT_DOUBLE_EQ(m.total.p50_us, 50);
  EXPECT_DOUBLE_EQ(m.total.p99_us, 99);
  EXPECT_DOUBLE_EQ(m.inference.p50_us, 500);
  EXPECT_DOUBLE_EQ(m.inference.p99_us, 990);

  sink.flush();  // the open, partial minute
  rows = store.metrics_for("cam0", 0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].minute_start_ns, kBaseNs + kMinute);
  EXPECT_EQ(rows[1].frames, 1u);
  EXPECT_DOUBLE_EQ(rows[1].total.p99_us, 7);
}

TEST(SqliteSink, ReservoirKeepsMemoryBoundedAndQuantilesClose) {
  TempDir dir;
  SqliteStore store(dir.file("state.db"));
  FakeClock clock;
  SqliteSinkOptions options;
  options.clock = clock.function();
  options.reservoir_size = 1000;
  SqliteSink sink(store, options);

  std::vector<int> order(10000);
  std::iota(order.begin(), order.end(), 1);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  uint64_t sequence = 1;
  for (int latency : order) sink.publish(result_with(sequence++, latency, latency));
  sink.flush();

  std::vector<MinuteMetrics> rows = store.metrics_for("cam0", 0);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].frames, 10000u);
  EXPECT_NEAR(rows[0].total.p50_us, 5000, 250);  // a 1000-sample reservoir: a few percent at worst
  EXPECT_NEAR(rows[0].total.p99_us, 9900, 100);
}

TEST(SqliteSink, RecordsEventsTicksStalledMinutesAndPrunesHourly) {
  TempDir dir;
  SqliteStore store(dir.file("state.db"));
  store.record_event(event_at(kBaseNs - 8 * 24 * 3600 * kSecond, "ancient"));
  FakeClock clock;
  SqliteSinkOptions options;
  options.clock = clock.function();
  SqliteSink sink(store, options);

  sink.publish(result_with(1, 100, 50, "e1"));  // first result: an event, and the first prune
  sink.publish(result_with(2, 100, 50, "e2"));  // a new engine: an event
  sink.record_event("cam0", "pipeline_error", "inference failed", {{"status", "EDGERT_ERROR_EXECUTE"}});

  std::vector<EventRecord> events = store.recent_events(10);
  std::set<std::string> kinds;
  for (const EventRecord& e : events) kinds.insert(e.kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"first_result", "engine_changed", "pipeline_error"}));

  // The pipeline stalls: no result closes the minute, the timer does.
  clock.now = kBaseNs + kMinute + kSecond;
  sink.tick();
  ASSERT_EQ(store.metrics_for("cam0", 0).size(), 1u);
  EXPECT_EQ(store.metrics_for("cam0", 0)[0].frames, 2u);

  // Eight days on, the hourly prune drops the first day's rows.
  clock.now = kBaseNs + 8 * 24 * 3600 * kSecond;
  store.record_event(event_at(clock.now, "recent"));
  sink.tick();
  events = store.recent_events(10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "recent");
  EXPECT_TRUE(store.metrics_for("cam0", 0).empty());
  EXPECT_EQ(sink.write_failures(), 0u);
}

TEST(SqliteSink, WriteFailuresAreReportedNotThrown) {
  TempDir dir;
  SqliteStoreOptions store_options;
  store_options.max_size_bytes = 128 * 1024;
  SqliteStore store(dir.file("state.db"), store_options);
  FakeClock clock;
  std::vector<std::string> reported;
  SqliteSinkOptions options;
  options.clock = clock.function();
  options.on_error = [&](const std::string& message) { reported.push_back(message); };
  SqliteSink sink(store, options);

  std::string filler(4096, 'x');
  for (int i = 0; i < 100; ++i) EXPECT_NO_THROW(sink.record_event("cam0", "filler", filler));
  EXPECT_NO_THROW(sink.publish(result_with(1, 1, 1)));
  EXPECT_NO_THROW(sink.flush());
  ASSERT_FALSE(reported.empty());
  EXPECT_GT(sink.write_failures(), 0u);
  EXPECT_NE(sink.last_error().find("database or disk is full"), std::string::npos) << sink.last_error();
}

}  // namespace
}  // namespace edgert::daemon
