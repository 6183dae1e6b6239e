#include "daemon.h"

#include "camera_frame_input.h"

#include <signal.h>
#include <syslog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "board_profile.h"
#include "engine_signing.h"
#include "gpio_sink.h"
#include "stream_sinks.h"
#include "swap_steps.h"
#include "yaml_tree.h"

namespace edgert::daemon {
namespace {

// What decides whether a reload must restart a pipeline.
std::string fingerprint(const PipelineConfig& p) {
  nlohmann::json j = {{"source", {p.source.type, p.source.device, p.source.width, p.source.height, p.source.fps,
                                  pixel_format_name(p.source.format), p.source.io, p.source.buffers, p.source.triggered}},
                      {"preprocess", {p.preprocess.channel_order, p.preprocess.mean, p.preprocess.std}},
                      {"engine", p.engine},
                      {"gpu", {p.gpu.priority, p.gpu.gpu_share}},
                      {"postprocess", {p.postprocess.type, p.postprocess.top_k, p.postprocess.labels,
                                       p.postprocess.score_threshold, p.postprocess.iou_threshold}},
                      {"socket", {p.socket.enabled, p.socket.path}},
                      {"sqlite", {p.sqlite.enabled, p.sqlite.retention_days}},
                      {"gpio", {p.gpio.enabled, p.gpio.chip, p.gpio.detect_line, p.gpio.classes, p.gpio.min_score,
                                p.gpio.heartbeat_line, p.gpio.trigger_line}},
                      {"journal", {p.journal.enabled, p.journal.every_n}}};
  return j.dump();
}

// Percentiles over the recent window; count and sum_ms since start (the Prometheus histogram's).
nlohmann::json latency_json(const LatencySummary& s) {
  return {{"p50_ms", s.p50_us / 1000}, {"p99_ms", s.p99_us / 1000}, {"mean_ms", s.mean_us / 1000}, {"samples", s.samples},
          {"count", s.since_start.count}, {"sum_ms", s.since_start.sum_us / 1000}};
}

uint64_t budget_bytes(const DaemonConfig& config) {
  uint64_t budget = 0;
  if (config.memory_budget_mb > 0) {
    budget = static_cast<uint64_t>(config.memory_budget_mb) << 20;
  } else {
    budget = static_cast<uint64_t>(config.board_profile.edgertd_budget_mb) << 20;
  }
  uint64_t cgroup = cgroup_memory_limit();
  return cgroup && cgroup < budget ? cgroup : budget;
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  return text;
}

}  // namespace

std::string signature_refusal(const DaemonConfig& config, const EngineFacts& facts) {
  switch (facts.signature.state) {
    case signing::SignatureState::Invalid: return "its signature does not verify: " + facts.signature.message;
    case signing::SignatureState::UnknownKey:
      if (config.require_signed)
        return facts.signature.message + " and require_signed is true (trusted keys: " + config.trusted_keys_dir + ")";
      return "";
    case signing::SignatureState::Unsigned:
      if (config.require_signed)
        return "it is not signed and require_signed is true (sign it with edgert build --sign KEY; trusted keys: " +
               config.trusted_keys_dir + ")";
      return "";
    case signing::SignatureState::Valid: return "";
  }
  return "";
}

void check_before_start(const DaemonConfig& config, bool engines_must_exist) {
  const std::string& file = config.source_path;
  auto fail = [&](const std::string& message) { throw config::ConfigError(file + ": " + message); };
  std::string problem = socket_path_problem(config.control_socket);
  if (!problem.empty()) fail("control_socket: " + problem);
  if (!config.metrics.socket.empty() && !(problem = socket_path_problem(config.metrics.socket)).empty())
    fail("metrics.socket: " + problem);
  for (const PipelineConfig& p : config.pipelines)
    if (p.socket.enabled && !(problem = socket_path_problem(p.socket.path)).empty())
      fail("pipeline '" + p.name + "' sinks.socket.path: " + problem);

  std::vector<signing::PublicKey> trusted = signing::read_trusted_keys(config.trusted_keys_dir, nullptr);
  uint64_t need = 0;
  std::string parts;
  for (const PipelineConfig& p : config.pipelines) {
    uint64_t frames = frame_buffer_bytes(p.source);
    need += frames;
    parts += (parts.empty() ? "" : "; ") + p.name + ": frame buffers " + mib(frames) + " (" + std::to_string(p.source.width) + "x" +
             std::to_string(p.source.height) + " " + pixel_format_name(p.source.format) + " x " +
             std::to_string(p.source.buffers) + ")";
    EngineFacts facts;
    try {
      facts = read_engine_facts(p.engine, trusted);
    } catch (const std::exception& e) {
      if (engines_must_exist) fail("pipeline '" + p.name + "' engine '" + p.engine + "': " + e.what());
      continue;
    }
    std::string refusal = signature_refusal(config, facts);
    if (!refusal.empty()) fail("pipeline '" + p.name + "' engine '" + p.engine + "' refused: " + refusal);
    need += facts.footprint.total();
    parts += ", engine " + mib(facts.footprint.total());
  }
  uint64_t budget = budget_bytes(config);
  if (budget && need > budget)
    fail("this configuration needs " + mib(need) + " but the memory budget is " + mib(budget) + " (" + parts +
         "); lower source.width/height/buffers or raise memory_budget_mb");
}

Daemon::Daemon(std::string config_path) : config_path_(std::move(config_path)) {}

Daemon::~Daemon() {
  worker_.reset();  // first: a job in flight may still be loading an engine
  metrics_.reset();  // it reads the pipelines
  for (auto& [name, t] : triggers_) sd_event_source_disable_unref(t->source);
  triggers_.clear();
  previous_.clear();
  pipelines_.clear();
  control_.reset();
  sqlite_.reset();  // flushes the open minutes
  store_.reset();
  if (loop_) sd_event_unref(loop_);
}

void Daemon::record_event(const std::string& pipeline, const std::string& kind, const std::string& message) {
  if (sqlite_) sqlite_->record_event(pipeline, kind, message);
}

void Daemon::start_pipeline(const PipelineConfig& configured) {
  PipelineConfig config = configured;
  config.engine = startup_engine(configured);
  auto pipeline = std::make_unique<Pipeline>(config, config_, *budget_, results_);
  if (config.socket.enabled)
    pipeline->add_sink(std::make_unique<SocketSink>(config.socket.path, static_cast<size_t>(config.socket.buffer_kb) << 10, loop_));
  if (config.journal.enabled) pipeline->add_sink(std::make_unique<JournalSink>(config.journal.every_n));
  if (config.gpio.enabled && (config.gpio.detect_line >= 0 || config.gpio.heartbeat_line >= 0)) {
    GpioSinkConfig gpio;
    gpio.chip = config.gpio.chip;
    gpio.detect_line = config.gpio.detect_line;
    gpio.classes = config.gpio.classes;
    gpio.min_score = config.gpio.min_score;
    gpio.heartbeat_line = config.gpio.heartbeat_line;
    pipeline->add_sink(std::make_unique<GpioSink>(gpio));
  }
  if (config.gpio.enabled && config.gpio.trigger_line >= 0) {
    auto binding = std::make_unique<TriggerBinding>();
    binding->input = std::make_unique<GpioTriggerInput>(config.gpio.chip, static_cast<unsigned>(config.gpio.trigger_line));
    binding->pipeline = pipeline.get();
    if (sd_event_add_io(loop_, &binding->source, binding->input->fd(), EPOLLIN, &Daemon::on_trigger, binding.get()) < 0)
      throw std::runtime_error("cannot watch GPIO trigger " + binding->input->describe());
    triggers_[config.name] = std::move(binding);
  }
  pipeline->start(loop_);
  record_event(config.name, "pipeline_started", pipeline->describe_source() + " -> " + config.engine);
  std::fprintf(stderr, SD_NOTICE "pipeline %s: %s -> %s (%s)\n", config.name.c_str(), pipeline->describe_source().c_str(),
               config.engine.c_str(), config.postprocess.type.c_str());
  pipeline_fingerprints_[config.name] = fingerprint(configured);
  pipelines_[config.name] = std::move(pipeline);
}

void Daemon::start() {
  config_ = load_daemon_config(config_path_);
  check_before_start(config_, false);
  budget_ = std::make_unique<MemoryBudget>(budget_bytes(config_));
  // A discrete GPU's memory is its own (checked against what it has free); a Jetson's is the
  // board's DRAM, in the one budget.
  set_device_memory_is_host(config_.board_profile.gpu_type != "cuda" || config_.board_profile.unified_memory);
  if (sd_event_default(&loop_) < 0) throw std::runtime_error("cannot create the event loop");

  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, nullptr);  // signals arrive through the loop, never asynchronously
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sd_event_add_signal(loop_, nullptr, sig, &Daemon::on_signal, this);
  sd_event_add_io(loop_, nullptr, results_.fd(), EPOLLIN, &Daemon::on_results, this);
  // Pings the watchdog from the loop itself (WATCHDOG_USEC from systemd): a stuck loop is killed.
  sd_event_set_watchdog(loop_, true);
  uint64_t now;
  sd_event_now(loop_, CLOCK_MONOTONIC, &now);
  sd_event_add_time(loop_, nullptr, CLOCK_MONOTONIC, now + 1000000, 0, &Daemon::on_status_timer, this);
  if (const char* hang = std::getenv("EDGERTD_DEBUG_HANG_AFTER_SEC")) {
    // Debug-only: simulates a hung main loop so tests can watch the watchdog restart us.
    std::fprintf(stderr, SD_WARNING "debug: the main loop will hang after %s s (EDGERTD_DEBUG_HANG_AFTER_SEC)\n", hang);
    sd_event_add_time(loop_, nullptr, CLOCK_MONOTONIC, now + std::strtoull(hang, nullptr, 10) * 1000000, 0,
                      &Daemon::on_debug_hang, this);
  }

  try {
    mkdir(config_.state_dir.c_str(), 0750);
    store_ = std::make_unique<SqliteStore>(config_.state_dir + "/edgertd.db");
    SqliteSinkOptions options;
    options.on_error = [](const std::string& message) { std::fprintf(stderr, SD_WARNING "sqlite: %s\n", message.c_str()); };
    sqlite_ = std::make_unique<SqliteSink>(*store_, options);
  } catch (const std::exception& e) {
    // Losing history must not stop inference: run without the database and say so.
    std::fprintf(stderr, SD_ERR "state database unavailable, running without it: %s\n", e.what());
  }
  log_level_ = log_level_from_name(config_.log_level);
  try {
    engine_store_ = std::make_unique<EngineStore>(config_.state_dir);
    if (store_) {
      deployments_ = std::make_unique<DeploymentLog>(*store_);
      if (int n = deployments_->close_interrupted())
        log(LOG_WARNING, "%d deployment(s) were interrupted by a restart; the engines recorded as active run", n);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, SD_ERR "engine store unavailable, hot swap disabled: %s\n", e.what());
  }
  control_ = std::make_unique<ControlServer>(config_.control_socket,
                                             static_cast<uint64_t>(config_.control_idle_timeout_s) * 1000000);
  register_commands();
  worker_ = std::make_unique<BackgroundWorker>(loop_);
  register_swap_commands();
  control_->start(loop_);
  if (config_.metrics.enabled()) {
    metrics_ = std::make_unique<MetricsServer>(config_.metrics, [this] { return snapshot(); });
    metrics_->start(loop_);
    std::fprintf(stderr, SD_NOTICE "metrics: serving GET /metrics on %s\n", config_.metrics.describe().c_str());
  }
  for (const PipelineConfig& p : config_.pipelines) start_pipeline(p);
  started_ns_ = monotonic_ns();
}

int Daemon::run() {
  try {
    start();
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, SD_ERR "configuration error: %s\n", e.what());
    sd_notifyf(0, "STATUS=configuration error: %s", e.what());
    return 78;  // EX_CONFIG: Restart=on-failure will not help, the file must be fixed
  } catch (const std::exception& e) {
    std::fprintf(stderr, SD_ERR "cannot start: %s\n", e.what());
    sd_notifyf(0, "STATUS=cannot start: %s", e.what());
    return 1;
  }
  // Config valid, engines loaded, sources streaming: now we are ready.
  sd_notify(0, "READY=1");
  publish_status();
  int r = sd_event_loop(loop_);
  sd_notify(0, "STOPPING=1");
  for (auto& [name, p] : pipelines_) p->stop();
  return r < 0 ? 1 : 0;
}

void Daemon::reload() {
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", static_cast<unsigned long long>(monotonic_ns() / 1000));
  try {
    DaemonConfig next = load_daemon_config(config_path_);
    std::map<std::string, const PipelineConfig*> wanted;
    for (const PipelineConfig& p : next.pipelines) wanted[p.name] = &p;
    for (auto it = pipelines_.begin(); it != pipelines_.end();) {
      auto w = wanted.find(it->first);
      if (w == wanted.end() || fingerprint(*w->second) != pipeline_fingerprints_[it->first]) {
        std::fprintf(stderr, SD_NOTICE "reload: stopping pipeline %s\n", it->first.c_str());
        std::string name = (it++)->first;
        stop_pipeline(name);
      } else {
        ++it;
      }
    }
    config_ = next;
    for (const PipelineConfig& p : config_.pipelines)
      if (!pipelines_.count(p.name)) start_pipeline(p);
    std::fprintf(stderr, SD_NOTICE "reload: %zu pipelines running\n", pipelines_.size());
  } catch (const std::exception& e) {
    // A bad edit must not take the service down: keep what runs and say why.
    std::fprintf(stderr, SD_ERR "reload failed, keeping the running configuration: %s\n", e.what());
  }
  sd_notify(0, "READY=1");
  publish_status();
}

void Daemon::stop_pipeline(const std::string& name) {
  auto it = pipelines_.find(name);
  if (it == pipelines_.end()) return;
  auto trigger = triggers_.find(name);
  if (trigger != triggers_.end()) {
    sd_event_source_disable_unref(trigger->second->source);
    triggers_.erase(trigger);
  }
  it->second->stop();
  previous_.erase(name);
  budget_->release("previous:" + name);
  pipeline_fingerprints_.erase(name);
  frame_errors_.erase(name);
  pipelines_.erase(it);
  record_event(name, "pipeline_stopped", "stopped");
}

int Daemon::on_trigger(sd_event_source*, int, uint32_t, void* userdata) {
  auto* binding = static_cast<TriggerBinding*>(userdata);
  while (binding->input->read_event()) binding->pipeline->trigger();  // one capture per edge
  return 0;
}

Pipeline& Daemon::pipeline_named(const std::string& name) {
  auto it = pipelines_.find(name);
  if (it == pipelines_.end()) throw ControlError("no_such_pipeline", "no pipeline named '" + name + "'");
  return *it->second;
}

nlohmann::json Daemon::pipeline_json(const Pipeline& p, const PipelineSnapshot& numbers, bool with_stats) const {
  const PipelineStats& s = numbers.stats;
  nlohmann::json j = {{"name", p.config().name}, {"source", p.describe_source()}, {"engine", s.engine},
                      {"postprocess", p.config().postprocess.type}};
  if (with_stats) {
    j["fps"] = s.fps;
    j["frames_in"] = s.frames_in;
    j["processed"] = s.processed;
    j["dropped"] = s.dropped;
    j["unloaded_drops"] = s.unloaded_drops;
    j["source_gaps"] = s.source_gaps;
    j["errors"] = s.errors;
    j["swaps"] = numbers.swaps.swaps;
    j["rollbacks"] = numbers.swaps.rollbacks;
    j["swaps_refused"] = numbers.swaps.refused;
    if (!s.last_error.empty()) j["last_error"] = s.last_error;
    j["socket_clients"] = s.sinks.clients;
    j["socket_dropped"] = s.sinks.dropped;
    j["socket_buffered_bytes"] = s.sinks.buffered_bytes;
    j["frame_copies_per_frame"] = s.processed ? static_cast<double>(s.frame_copies) / s.processed : 0.0;
    j["device_copies_per_frame"] = s.processed ? static_cast<double>(s.device_copies) / s.processed : 0.0;
    // Who turns frames into the engine's input: the engine itself (built with --camera; on a
    // GPU board its first kernel reads the capture buffer) or edgertd's CPU preprocessing.
    if (std::shared_ptr<EngineHandle> engine = p.engine())
      j["frame_input"] = camera_frame_input(engine->input()) ? "camera-engine" : "cpu-preprocess";
    j["frame_memory"] = p.frame_memory();
    j["priority"] = p.config().gpu.priority;
    j["gpu_share"] = p.config().gpu.gpu_share;
    j["latency"] = {{"total", latency_json(s.total)}, {"queue", latency_json(s.queue)},
                    {"preprocess", latency_json(s.preprocess)}, {"inference", latency_json(s.inference)},
                    {"postprocess", latency_json(s.postprocess)}};
    // Of inference, the GPU's own time (engines with a device).
    if (s.gpu.samples > 0) j["latency"]["gpu"] = latency_json(s.gpu);
  }
  return j;
}

uint64_t Daemon::socket_buffered_bytes() const {
  uint64_t bytes = control_ ? control_->buffered_bytes() : 0;
  for (const auto& [name, p] : pipelines_) bytes += p->sink_counters().buffered_bytes;
  return bytes;
}

DaemonSnapshot Daemon::snapshot() const {
  DaemonSnapshot s;
  s.memory_budget_bytes = budget_->limit();
  s.memory_reserved_bytes = budget_->used();
  s.socket_buffer_bytes = socket_buffered_bytes();
  for (const auto& [name, p] : pipelines_) {
    auto swaps = swap_counts_.find(name);
    s.pipelines.push_back({name, p->stats(), swaps != swap_counts_.end() ? swaps->second : SwapCounts{}});
  }
  return s;
}

nlohmann::json Daemon::status_json() {
  DaemonSnapshot numbers = snapshot();
  nlohmann::json pipelines = nlohmann::json::array();
  for (const PipelineSnapshot& p : numbers.pipelines) pipelines.push_back(pipeline_json(*pipelines_.at(p.name), p, true));
  // Reservations (engines, frame buffers) plus what slow socket readers hold right now.
  nlohmann::json status = {{"version", EDGERT_VERSION},
                           {"config", config_path_},
                           {"board", config_.board_profile.name},
                           {"uptime_s", (monotonic_ns() - started_ns_) / 1e9},
                           {"memory", {{"budget_bytes", numbers.memory_budget_bytes}, {"used_bytes", numbers.memory_used_bytes()},
                                       {"reserved_bytes", numbers.memory_reserved_bytes},
                                       {"socket_buffers_bytes", numbers.socket_buffer_bytes}}},
                           {"pipelines", pipelines}};
  // A GPU board: its device memory as the GPU reports it (a discrete GPU's own budget).
  uint64_t free_bytes = 0, total_bytes = 0;
  edgert_error error{};
  if (config_.board_profile.gpu_type == "cuda" &&
      edgert_device_memory_info(config_.plugin_path.empty() ? nullptr : config_.plugin_path.c_str(), "cuda", &free_bytes,
                                &total_bytes, &error) == EDGERT_OK)
    status["gpu_memory"] = {{"free_bytes", free_bytes}, {"total_bytes", total_bytes},
                            {"own_budget", !config_.board_profile.unified_memory}};
  return status;
}

void Daemon::register_commands() {
  control_->handle("status", [this](const nlohmann::json&, UnixSocketServer::Client&) { return status_json(); });
  control_->handle("pipelines", [this](const nlohmann::json&, UnixSocketServer::Client&) {
    nlohmann::json list = nlohmann::json::array();
    for (const PipelineSnapshot& p : snapshot().pipelines) list.push_back(pipeline_json(*pipelines_.at(p.name), p, false));
    return list;
  });
  control_->handle("stats", [this](const nlohmann::json& request, UnixSocketServer::Client&) {
    nlohmann::json out = nlohmann::json::array();
    std::string only = string_field(request, "pipeline");
    for (const PipelineSnapshot& p : snapshot().pipelines)
      if (only.empty() || only == p.name) out.push_back(pipeline_json(*pipelines_.at(p.name), p, true));
    if (!only.empty() && out.empty()) throw ControlError("no_such_pipeline", "no pipeline named '" + only + "'");
    return out;
  });
  control_->handle("watch", [this](const nlohmann::json& request, UnixSocketServer::Client& client) {
    std::string name = string_field(request, "pipeline");
    pipeline_named(name);
    client.tag = "watch:" + name;
    control_->exempt_from_idle_timeout(client);
    return nlohmann::json{{"watching", name}};
  });
}

void Daemon::publish_status() {
  std::string line;
  for (auto& [name, p] : pipelines_) {
    PipelineStats s = p->stats();
    char part[256];
    std::snprintf(part, sizeof part, "%s%s %.1f fps p50 %.1f ms drops %llu", line.empty() ? "" : "; ", name.c_str(), s.fps,
                  s.total.p50_us / 1000, static_cast<unsigned long long>(s.dropped));
    line += part;
  }
  sd_notifyf(0, "STATUS=%s; memory %.0f/%.0f MiB", line.c_str(), (budget_->used() + socket_buffered_bytes()) / 1048576.0,
             budget_->limit() / 1048576.0);
}

int Daemon::on_signal(sd_event_source*, const struct signalfd_siginfo* si, void* userdata) {
  auto* self = static_cast<Daemon*>(userdata);
  if (si->ssi_signo == SIGHUP) {
    self->reload();
    return 0;
  }
  std::fprintf(stderr, SD_NOTICE "signal %u: stopping\n", si->ssi_signo);
  sd_event_exit(self->loop_, 0);
  return 0;
}

int Daemon::on_results(sd_event_source*, int, uint32_t, void* userdata) {
  auto* self = static_cast<Daemon*>(userdata);
  for (Result& r : self->results_.drain()) {
    auto it = self->pipelines_.find(r.pipeline);
    if (it == self->pipelines_.end()) continue;  // from a pipeline stopped by a reload
    it->second->publish(r);
    if (self->sqlite_ && it->second->config().sqlite.enabled) self->sqlite_->publish(r);
    self->control_->broadcast(r.pipeline, result_to_json(r));
  }
  return 0;
}

void Daemon::report_frame_errors() {
  constexpr uint64_t kReportEveryNs = 10'000'000'000ull;
  uint64_t now = monotonic_ns();
  for (auto& [name, p] : pipelines_) {
    std::string last_error;
    uint64_t errors = p->error_count(&last_error);
    FrameErrorReport& r = frame_errors_[name];
    r.unreported += errors >= r.seen ? errors - r.seen : errors;
    r.seen = errors;
    if (!r.unreported || (r.last_report_ns && now - r.last_report_ns < kReportEveryNs)) continue;
    auto engine = p->engine();
    std::string message = std::to_string(r.unreported) + " frame(s) failed" +
                          (r.last_report_ns ? " in the last " + std::to_string((now - r.last_report_ns) / 1000000000ull) + " s" : "") +
                          " on engine " + (engine ? short_sha(engine->id()) : std::string("(none)")) + ": " + last_error;
    log(LOG_WARNING, "pipeline %s: %s", name.c_str(), message.c_str());
    record_event(name, "frame_errors", message);
    r.unreported = 0;
    r.last_report_ns = now;
  }
}

int Daemon::on_status_timer(sd_event_source* s, uint64_t usec, void* userdata) {
  auto* self = static_cast<Daemon*>(userdata);
  self->publish_status();
  self->report_frame_errors();
  if (self->sqlite_) self->sqlite_->tick();
  sd_event_source_set_time(s, usec + 1000000);
  sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  return 0;
}

int Daemon::on_debug_hang(sd_event_source*, uint64_t, void*) {
  std::fprintf(stderr, SD_WARNING "debug: hanging the main loop now\n");
  for (;;) pause();
}

}  // namespace edgert::daemon
