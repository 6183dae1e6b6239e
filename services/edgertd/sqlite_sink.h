// A Sink that keeps per-pipeline, per-minute aggregates in memory and writes one metrics row
// per pipeline per minute, plus events for notable things. publish() only updates memory; the
// database is touched when a minute closes, on an event, and on the hourly prune, so the loop
// never waits for the disk per frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "result.h"
#include "sqlite_store.h"

namespace edgert::daemon {

struct SqliteSinkOptions {
  std::chrono::seconds retention{std::chrono::hours(24 * 7)};  // events and metrics older are pruned
  std::chrono::seconds prune_interval{std::chrono::hours(1)};
  // Latency samples kept per stage per pipeline per minute: quantiles are exact up to this many
  // frames a minute and drawn from a uniform sample beyond it, so memory stays fixed at
  // 5 stages x 4 bytes x this per pipeline whatever the frame rate.
  size_t reservoir_size = 4096;
  std::function<uint64_t()> clock = realtime_now_ns;  // CLOCK_REALTIME ns; tests inject their own
  // Called with the store's message when a write fails (full disk, ...). The sink drops that row
  // and keeps going; the daemon decides how loudly to log.
  std::function<void(const std::string& message)> on_error;
};

class SqliteSink : public Sink {
 public:
  // `store` is borrowed and must outlive the sink (the daemon also reads status from it).
  explicit SqliteSink(SqliteStore& store, SqliteSinkOptions options = {});
  ~SqliteSink() override;  // flushes the open minutes

  void publish(const Result& result) override;
  std::string describe() const override;

  // For what the daemon sees outside results: pipeline errors, restarts, source loss.
  void record_event(const std::string& pipeline, const std::string& kind, const std::string& message,
                    nlohmann::json details = nullptr);

  // Call from a timer (every few seconds): writes minutes that ended without a later result
  // to close them (a stalled pipeline), and prunes once per prune_interval.
  void tick();
  // Writes every open minute now, partial ones included (shutdown, reload, tests).
  void flush();

  uint64_t write_failures() const { return write_failures_; }
  const std::string& last_error() const { return last_error_; }

 private:
  struct PipelineMinute;

  void close_minute(PipelineMinute& minute, uint64_t now_ns);
  void maybe_prune(uint64_t now_ns);
  void note_failure(const std::exception& error);

  SqliteStore& store_;
  SqliteSinkOptions options_;
  std::map<std::string, std::unique_ptr<PipelineMinute>> pipelines_;
  uint64_t last_prune_ns_ = 0;
  uint64_t write_failures_ = 0;
  std::string last_error_;
};

}  // namespace edgert::daemon
