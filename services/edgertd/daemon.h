// edgertd's one event loop (sd-event): signals, the watchdog, status timer, control socket,
// source fds and timers, results from worker threads, GPIO triggers.
#pragma once

#include <systemd/sd-event.h>

#include <map>
#include <optional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <deque>
#include <functional>

#include "background_worker.h"
#include "config.h"
#include "control_server.h"
#include "daemon_snapshot.h"
#include "deployment_log.h"
#include "engine_store.h"
#include "memory_budget.h"
#include "metrics_server.h"
#include "gpio.h"
#include "pipeline.h"
#include "sqlite_sink.h"
#include "sqlite_store.h"

namespace edgert::daemon {

// What --check and start-up verify beyond the file's syntax: the socket paths hold nothing but
// a socket, the configured engines are signed by a trusted key when require_signed (and no
// signature is broken), and engines plus frame buffers fit the memory budget. With
// `engines_must_exist` false (start-up, where a pipeline may start on its recorded engine) an
// unreadable configured engine is left to the pipeline's own load. Throws config::ConfigError
// naming the key, the file and the numbers.
void check_before_start(const DaemonConfig& config, bool engines_must_exist);

// Why `facts` may not run under `config`'s signature policy, or "" when it may.
std::string signature_refusal(const DaemonConfig& config, const EngineFacts& facts);

class Daemon {
 public:
  explicit Daemon(std::string config_path);
  ~Daemon();
  // Runs until SIGTERM/SIGINT; returns the process exit status.
  int run();

 private:
  void start();
  void start_pipeline(const PipelineConfig& config);
  void reload();
  void register_commands();
  void publish_status();
  DaemonSnapshot snapshot() const;
  nlohmann::json status_json();
  uint64_t socket_buffered_bytes() const;
  nlohmann::json pipeline_json(const Pipeline& pipeline, const PipelineSnapshot& numbers, bool with_stats) const;
  Pipeline& pipeline_named(const std::string& name);

  static int on_signal(sd_event_source* s, const struct signalfd_siginfo* si, void* userdata);
  static int on_results(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_status_timer(sd_event_source* s, uint64_t usec, void* userdata);
  static int on_debug_hang(sd_event_source* s, uint64_t usec, void* userdata);

  std::string config_path_;
  DaemonConfig config_;
  sd_event* loop_ = nullptr;
  std::unique_ptr<MemoryBudget> budget_;
  ResultQueue results_;
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
  std::map<std::string, std::string> pipeline_fingerprints_;
  std::unique_ptr<ControlServer> control_;
  std::unique_ptr<MetricsServer> metrics_;  // null unless `metrics:` is configured
  std::map<std::string, SwapCounts> swap_counts_;  // by pipeline
  std::unique_ptr<SqliteStore> store_;  // null when the state directory cannot be used
  std::unique_ptr<SqliteSink> sqlite_;
  struct TriggerBinding {
    std::unique_ptr<GpioTriggerInput> input;
    Pipeline* pipeline = nullptr;
    sd_event_source* source = nullptr;
  };
  std::map<std::string, std::unique_ptr<TriggerBinding>> triggers_;  // by pipeline name
  void record_event(const std::string& pipeline, const std::string& kind, const std::string& message);
  void stop_pipeline(const std::string& name);
  static int on_trigger(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  uint64_t started_ns_ = 0;

  // Failing frames are logged and recorded as events, at most once per interval per pipeline:
  // a broken engine fails every frame and must neither go unnoticed nor flood the journal.
  struct FrameErrorReport {
    uint64_t seen = 0;        // the pipeline's error count at the last look
    uint64_t unreported = 0;  // failures since the last report
    uint64_t last_report_ns = 0;
  };
  std::map<std::string, FrameErrorReport> frame_errors_;  // by pipeline
  void report_frame_errors();

  // Hot swap (daemon_swap.cpp).
  void register_swap_commands();
  // The engine file a pipeline starts on: its active record when the store has it, else the
  // configured one (installed into the store and recorded).
  std::string startup_engine(const PipelineConfig& config);
  // Swap-type commands (deploy, swap, rollback, unload) run one at a time, in arrival order;
  // `operation` must call the Finish it is given exactly once.
  using Finish = ControlServer::Reply;
  void queue_swap_command(std::function<void(Finish)> operation, Finish reply);
  // verify -> load -> warm up -> self-test -> switch -> record, the slow steps on worker_ so
  // frames keep flowing. Finishes with ControlError (details: the steps) and the running
  // engine untouched when any step fails. `prior_steps` (deploy's install) lead the steps.
  struct SwapJob;
  // `verified`: facts a deploy already read from the stored file, so it is not read twice.
  void swap_to(const std::string& pipeline, const std::string& sha256, const std::string& kind, nlohmann::json prior_steps,
               double started_ms, Finish finish, std::optional<EngineFacts> verified = std::nullopt);
  void swap_verified(const std::shared_ptr<SwapJob>& job);
  void swap_loaded(const std::shared_ptr<SwapJob>& job);
  void swap_progress(SwapJob& job, const std::string& step, const std::string& detail, double ms);
  [[noreturn]] void refuse_swap(SwapJob& job, const std::string& step, const std::string& code, const std::string& why);
  void deploy(const nlohmann::json& request, const Peer& peer, Finish finish);
  void rollback(const std::string& pipeline, Finish finish);
  nlohmann::json unload(const std::string& pipeline);
  std::string resolve_sha(const std::string& text) const;
  // What keeps an engine in the store ("runs in pipeline 'cam'", "is the rollback engine of
  // pipeline 'cam'"), or "" when nothing does and it may be deleted.
  std::string engine_user(const std::string& sha256) const;
  nlohmann::json delete_engine(const std::string& sha256);
  nlohmann::json prune_engines();
  void log(int priority, const char* format, ...) __attribute__((format(printf, 3, 4)));

  std::unique_ptr<EngineStore> engine_store_;   // null when state_dir is unusable: swaps refused
  std::unique_ptr<DeploymentLog> deployments_;  // null without the database
  std::map<std::string, std::shared_ptr<EngineHandle>> previous_;  // by pipeline: kept for rollback
  int log_level_ = 6;  // LOG_INFO
  std::unique_ptr<BackgroundWorker> worker_;  // the slow steps of swaps and deploys
  std::deque<std::function<void()>> swap_queue_;
  bool swap_busy_ = false;
};

}  // namespace edgert::daemon
