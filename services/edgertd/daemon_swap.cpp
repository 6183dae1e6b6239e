// Hot swap: the engine store, the swap procedure and its control commands (engines, deploy,
// swap, rollback, history, unload, log-level). Runs on the loop thread; the pipeline's worker
// keeps processing frames on the running engine until the switch, which lands between two
// frames (Pipeline::swap_engine).
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdarg>
#include <cstdio>

#include "board_profile.h"
#include "daemon.h"
#include "engine_signing.h"

namespace edgert::daemon {
namespace {

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string short_sha(const std::string& sha) { return sha.size() > 12 ? sha.substr(0, 12) : sha; }

const char* kLevelNames[] = {"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"};

// The steps of one swap, as the reply and the deployments row report them.
struct SwapSteps {
  nlohmann::json list = nlohmann::json::array();
  double started = now_ms(), step_started = now_ms();
  void done(const std::string& step, const std::string& detail) {
    double t = now_ms();
    list.push_back({{"step", step}, {"ok", true}, {"ms", t - step_started}, {"detail", detail}});
    step_started = t;
  }
  void failed(const std::string& step, const std::string& detail) {
    list.push_back({{"step", step}, {"ok", false}, {"ms", now_ms() - step_started}, {"detail", detail}});
  }
};

}  // namespace

void Daemon::log(int priority, const char* format, ...) {
  if (priority > log_level_) return;
  char line[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::fprintf(stderr, "<%d>%s\n", priority, line);
}

std::string Daemon::startup_engine(const PipelineConfig& config) {
  if (!engine_store_) return config.engine;
  std::optional<ActiveRecord> active = engine_store_->read_active(config.name);
  if (active && active->config_engine == config.engine) {
    if (engine_store_->contains(active->sha256)) {
      log(LOG_NOTICE, "pipeline %s: starting on engine %s as recorded", config.name.c_str(), short_sha(active->sha256).c_str());
      return engine_store_->path_of(active->sha256);
    }
    log(LOG_ERR, "pipeline %s: the recorded engine %s is not in the store; starting on the configured %s",
        config.name.c_str(), active->sha256.c_str(), config.engine.c_str());
  }
  // First start, or the configuration names another engine now: the configured file wins and
  // becomes the record (an operator's edit outranks a deploy made before it).
  std::string sha = engine_store_->install(config.engine, "");
  engine_store_->write_active(config.name, ActiveRecord{sha, active ? active->sha256 : "", config.engine});
  if (deployments_) {
    try {
      EngineFacts facts = read_engine_facts(engine_store_->path_of(sha), {});
      deployments_->add_engine({sha, engine_store_->path_of(sha), facts.board, "", facts.footprint.file_bytes});
      int64_t id = deployments_->begin(config.name, sha, active ? active->sha256 : "", "config");
      deployments_->supersede_active(config.name, id);
      deployments_->finish(id, "active", "config", "configured engine " + config.engine);
    } catch (const std::exception& e) {
      log(LOG_WARNING, "cannot record the configured engine: %s", e.what());
    }
  }
  return engine_store_->path_of(sha);
}

std::string Daemon::resolve_sha(const std::string& text) const {
  if (engine_store_->contains(text)) return text;
  if (text.size() < 8 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw ControlError("no_such_engine", "'" + text + "' is not a sha256 (or a prefix of 8+ hex digits) of an installed engine");
  std::string found;
  for (const nlohmann::json& e : deployments_ ? deployments_->engines() : nlohmann::json::array()) {
    std::string sha = e.value("sha256", "");
    if (sha.compare(0, text.size(), text) == 0 && engine_store_->contains(sha)) {
      if (!found.empty() && found != sha) throw ControlError("ambiguous", "'" + text + "' matches several engines");
      found = sha;
    }
  }
  if (found.empty()) throw ControlError("no_such_engine", "no installed engine has sha256 '" + text + "'");
  return found;
}

nlohmann::json Daemon::swap_to(const std::string& name, const std::string& sha, const std::string& kind) {
  if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable; see the daemon's log");
  Pipeline& pipeline = pipeline_named(name);
  std::shared_ptr<EngineHandle> current = pipeline.engine();
  std::string current_sha = current ? current->id() : "";
  std::optional<ActiveRecord> record = engine_store_->read_active(name);
  SwapSteps steps;
  int64_t row = 0;
  auto progress = [&](const std::string& step, const std::string& detail) {
    steps.done(step, detail);
    log(LOG_INFO, "swap %s -> %s: %s ok (%s)", name.c_str(), short_sha(sha).c_str(), step.c_str(), detail.c_str());
    if (deployments_ && row) deployments_->step(row, step, detail);
  };
  auto refuse = [&](const std::string& step, const std::string& code, const std::string& why) {
    steps.failed(step, why);
    std::string message = kind + " of " + short_sha(sha) + " to pipeline " + name + " refused at " + step + ": " + why +
                           (current ? "; still running " + short_sha(current_sha) : "");
    log(LOG_WARNING, "%s", message.c_str());
    record_event(name, "swap_refused", message);
    if (deployments_ && row) deployments_->finish(row, "failed", step, why);
    throw ControlError(code, message, {{"steps", steps.list}, {"running", current_sha}});
  };
  if (deployments_) row = deployments_->begin(name, sha, current_sha, kind);

  // verify: checksum and structure, signature, board, plugins, memory budget.
  std::string path = engine_store_->path_of(sha);
  std::vector<std::string> key_problems;
  std::vector<signing::PublicKey> trusted = signing::read_trusted_keys(config_.trusted_keys_dir, &key_problems);
  EngineFacts facts;
  try {
    facts = read_engine_facts(path, trusted);
  } catch (const std::exception& e) {
    refuse("verify", "corrupt_engine", e.what());
  }
  std::string signer = "unsigned";
  switch (facts.signature.state) {
    case signing::SignatureState::Invalid: refuse("verify", "bad_signature", facts.signature.message); break;
    case signing::SignatureState::UnknownKey:
      if (config_.require_signed)
        refuse("verify", "untrusted_signer", facts.signature.message + " (trusted keys: " + config_.trusted_keys_dir + ")");
      signer = facts.signature.signer + " (untrusted)";
      break;
    case signing::SignatureState::Unsigned:
      if (config_.require_signed)
        refuse("verify", "unsigned_engine", "the engine is not signed and require_signed is true (sign it with "
               "edgert build --sign KEY; trusted keys: " + config_.trusted_keys_dir + ")");
      break;
    case signing::SignatureState::Valid: signer = "signed by " + facts.signature.signer; break;
  }
  if (facts.board != config_.board)
    refuse("verify", "wrong_board", "the engine was built for board '" + facts.board + "', this board is '" + config_.board + "'");
  try {
    std::string want = config::load_board_profile(config::find_board_profile(config_.board)).fingerprint();
    if (facts.fingerprint != want)
      refuse("verify", "wrong_board", "the engine's board fingerprint " + facts.fingerprint + " is not this board's " + want +
             " (profile '" + config_.board + "' changed since the build?)");
  } catch (const ControlError&) {
    throw;
  } catch (const std::exception& e) {
    log(LOG_WARNING, "cannot read board profile '%s' to check fingerprints: %s", config_.board.c_str(), e.what());
  }
  std::vector<std::string> missing = missing_plugins(facts.plugins, config_.plugin_path);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    refuse("verify", "missing_plugin", "plugin(s) " + list + " required by the engine are not installed (plugin path: " +
           (config_.plugin_path.empty() ? "libedgert's default" : config_.plugin_path) + ")");
  }
  uint64_t need = facts.footprint.total();
  std::string what = "engine " + short_sha(sha) + " for pipeline '" + name + "'";
  std::string refusal = budget_->reserve("swap:" + name, need, what);
  if (!refusal.empty() && previous_.count(name)) {
    previous_.erase(name);  // the rollback engine kept in memory gives way; rollback reloads it
    budget_->release("previous:" + name);
    refusal = budget_->reserve("swap:" + name, need, what);
  }
  bool stop_first = false;
  if (!refusal.empty()) {
    uint64_t current_bytes = current ? current->footprint().total() : 0;
    bool fits_alone = budget_->used() - current_bytes + need <= budget_->limit();
    if (!(config_.swap_stop_first && fits_alone))
      refuse("verify", "over_budget", refusal + (fits_alone ? "; it would fit without the running engine: set "
                                                              "swap_stop_first: true to allow a stop-first swap" : ""));
    stop_first = true;
  }
  progress("verify", signer + ", board " + facts.board + ", " + std::to_string(need >> 10) + " KiB" +
                         (stop_first ? ", stop-first (both engines do not fit)" : ", overlap"));

  // Stop-first: the running engine goes before the new one loads; frames are dropped meanwhile.
  std::string old_path = current ? current->path() : "";
  if (stop_first) {
    pipeline.swap_engine(nullptr);
    current.reset();
    budget_->release("pipeline:" + name);
    refusal = budget_->reserve("swap:" + name, need, what);
  }
  auto restore_after_stop_first = [&]() -> std::string {
    budget_->release("swap:" + name);
    if (old_path.empty()) return "";
    try {
      auto old = std::make_shared<EngineHandle>(old_path, config_.plugin_path, config_.board, config_.mlock_weights, current_sha);
      budget_->reserve("pipeline:" + name, old->footprint().total(), "engine " + short_sha(current_sha));
      pipeline.swap_engine(old);
      return "; the previous engine was loaded again";
    } catch (const std::exception& e) {
      return std::string("; reloading the previous engine failed too: ") + e.what();
    }
  };

  std::shared_ptr<EngineHandle> next;
  try {
    next = std::make_shared<EngineHandle>(path, config_.plugin_path, config_.board, config_.mlock_weights, sha);
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (stop_first) why += restore_after_stop_first();
    else budget_->release("swap:" + name);
    refuse("load", "load_failed", why);
  }
  progress("load", "footprint " + std::to_string(next->footprint().total() >> 10) + " KiB");
  bool had_vector = false;
  std::string failure = next->replay_self_test(2, &had_vector);
  if (failure.empty()) progress("warm_up", had_vector ? "2 runs on the self-test input" : "skipped: no self-test vector");
  if (failure.empty() && had_vector) failure = next->replay_self_test(1, &had_vector);
  if (!failure.empty()) {
    next.reset();
    if (stop_first) failure += restore_after_stop_first();
    else budget_->release("swap:" + name);
    refuse("self_test", "self_test_failed", failure);
  }
  progress("self_test", had_vector ? "outputs match the builder's" : "no self-test vector stored in the engine");

  // switch between two frames, then bookkeeping that cannot fail the budget (same totals).
  std::shared_ptr<EngineHandle> old = pipeline.swap_engine(next);
  EngineStore::crash_point("switched");
  budget_->release("swap:" + name);
  budget_->release("previous:" + name);
  previous_.erase(name);
  budget_->reserve("pipeline:" + name, need, what);
  if (old) {
    previous_[name] = old;
    budget_->reserve("previous:" + name, old->footprint().total(), "rollback engine " + short_sha(current_sha));
  }
  old.reset();
  progress("switch", "between two frames");
  try {
    engine_store_->write_active(name, ActiveRecord{sha, current_sha.empty() && record ? record->previous : current_sha,
                                                   record ? record->config_engine : ""});
  } catch (const std::exception& e) {
    // Unrecorded, the switch would not survive a restart: undo it.
    auto back = previous_.count(name) ? previous_[name] : nullptr;
    if (back) pipeline.swap_engine(back);
    refuse("record", "io_error", std::string(e.what()) + (back ? "; switched back" : ""));
  }
  progress("record", "active engine recorded");
  if (deployments_) {
    deployments_->supersede_active(name, row);
    deployments_->finish(row, "active", "record", signer);
  }
  double total_ms = now_ms() - steps.started;
  record_event(name, "engine_swapped", kind + ": " + short_sha(current_sha) + " -> " + short_sha(sha));
  log(LOG_NOTICE, "pipeline %s: %s %s -> %s in %.1f ms (%s)", name.c_str(), kind.c_str(), short_sha(current_sha).c_str(),
      short_sha(sha).c_str(), total_ms, stop_first ? "stop-first" : "overlap");
  return {{"pipeline", name}, {"sha256", sha}, {"previous", current_sha}, {"mode", stop_first ? "stop-first" : "overlap"},
          {"signer", signer}, {"self_test", had_vector}, {"duration_ms", total_ms}, {"steps", steps.list}};
}

nlohmann::json Daemon::deploy(const nlohmann::json& request, const Peer& peer) {
  if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable; see the daemon's log");
  std::string path = request.value("path", ""), name = request.value("pipeline", ""), expected = request.value("sha256", "");
  if (path.empty() || path[0] != '/') throw ControlError("bad_request", "deploy needs an absolute \"path\"");
  pipeline_named(name);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw ControlError("no_such_file", "cannot stat '" + path + "': " + strerror(errno));
  // The daemon reads as root: only hand it files the requester could read itself.
  if (peer.uid != 0 && st.st_uid != peer.uid && !(st.st_mode & S_IROTH))
    throw ControlError("permission_denied", "'" + path + "' is neither owned by uid " + std::to_string(peer.uid) +
                                                " nor world-readable");
  double started = now_ms();
  std::string sha;
  try {
    sha = engine_store_->install(path, expected);
  } catch (const std::exception& e) {
    throw ControlError("install_failed", e.what(), {{"steps", {{{"step", "install"}, {"ok", false}, {"detail", e.what()}}}}});
  }
  nlohmann::json install_step = {{"step", "install"}, {"ok", true}, {"ms", now_ms() - started},
                                 {"detail", "stored as " + engine_store_->path_of(sha)}};
  try {
    EngineFacts facts = read_engine_facts(engine_store_->path_of(sha), signing::read_trusted_keys(config_.trusted_keys_dir, nullptr));
    std::string signer = facts.signature.state == signing::SignatureState::Valid ? facts.signature.signer
                         : facts.signature.state == signing::SignatureState::Unsigned ? ""
                                                                                        : facts.signature.signer + " (unverified)";
    if (deployments_)
      deployments_->add_engine({sha, engine_store_->path_of(sha), facts.board, signer, facts.footprint.file_bytes});
  } catch (const std::exception& e) {
    // Nothing runs a file that fails verification: keep the store to good engines.
    bool in_use = false;
    for (auto& [n, p] : pipelines_)
      if (p->engine() && p->engine()->id() == sha) in_use = true;
    if (!in_use) unlink(engine_store_->path_of(sha).c_str());
    std::string message = "deploy of " + path + " refused at verify: " + e.what();
    record_event(name, "swap_refused", message);
    if (deployments_) {
      int64_t id = deployments_->begin(name, sha, pipeline_named(name).engine() ? pipeline_named(name).engine()->id() : "", "deploy");
      deployments_->finish(id, "failed", "verify", e.what());
    }
    throw ControlError("corrupt_engine", message,
                       {{"steps", {install_step, {{"step", "verify"}, {"ok", false}, {"detail", e.what()}}}}});
  }
  auto running = pipeline_named(name).engine();
  if (running && running->id() == sha)
    return {{"pipeline", name}, {"sha256", sha}, {"already_active", true}, {"steps", {install_step}}};
  try {
    nlohmann::json result = swap_to(name, sha, "deploy");
    result["steps"].insert(result["steps"].begin(), install_step);
    result["duration_ms"] = now_ms() - started;
    return result;
  } catch (const ControlError& e) {
    nlohmann::json details = e.details();
    if (details.contains("steps")) details["steps"].insert(details["steps"].begin(), install_step);
    throw ControlError(e.code(), e.what(), details);
  }
}

nlohmann::json Daemon::rollback(const std::string& name) {
  Pipeline& pipeline = pipeline_named(name);
  std::optional<ActiveRecord> record = engine_store_ ? engine_store_->read_active(name) : std::nullopt;
  std::string target = record ? record->previous : "";
  if (target.empty()) throw ControlError("no_previous", "pipeline '" + name + "' has no previous engine to roll back to");
  if (!engine_store_->contains(target))
    throw ControlError("no_such_engine", "the previous engine " + target + " is no longer in the store");
  auto running = pipeline.engine();
  if (running && running->id() == target)
    return {{"pipeline", name}, {"sha256", target}, {"already_active", true}};
  return swap_to(name, target, "rollback");
}

nlohmann::json Daemon::unload(const std::string& name) {
  Pipeline& pipeline = pipeline_named(name);
  std::shared_ptr<EngineHandle> old = pipeline.swap_engine(nullptr);
  previous_.erase(name);
  budget_->release("previous:" + name);
  budget_->release("pipeline:" + name);
  std::string sha = old ? old->id() : "";
  if (deployments_) {
    int64_t id = deployments_->begin(name, sha, sha, "unload");
    deployments_->finish(id, "unloaded", "unload", "frames are dropped until the next swap or rollback");
  }
  record_event(name, "engine_unloaded", "unloaded " + short_sha(sha));
  log(LOG_NOTICE, "pipeline %s: engine %s unloaded; frames are dropped until a swap", name.c_str(), short_sha(sha).c_str());
  return {{"pipeline", name}, {"unloaded", sha},
          {"note", "the active record is unchanged: a restart loads " + short_sha(sha) + " again"}};
}

void Daemon::register_swap_commands() {
  control_->handle("engines", [this](const nlohmann::json&, UnixSocketServer::Client&) {
    nlohmann::json list = deployments_ ? deployments_->engines() : nlohmann::json::array();
    for (auto& e : list) {
      nlohmann::json active = nlohmann::json::array();
      for (auto& [n, p] : pipelines_)
        if (p->engine() && p->engine()->id() == e["sha256"]) active.push_back(n);
      e["active_in"] = active;
      e["in_store"] = engine_store_ && engine_store_->contains(e.value("sha256", ""));
    }
    return list;
  });
  control_->handle("deploy", [this](const nlohmann::json& r, UnixSocketServer::Client& c) { return deploy(r, c.peer); });
  control_->handle("swap", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable");
    std::string name = r.value("pipeline", "");
    std::string sha = resolve_sha(r.value("sha256", ""));
    auto running = pipeline_named(name).engine();
    if (running && running->id() == sha) return nlohmann::json{{"pipeline", name}, {"sha256", sha}, {"already_active", true}};
    return swap_to(name, sha, "swap");
  });
  control_->handle("rollback", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    return rollback(r.value("pipeline", ""));
  });
  control_->handle("unload", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    return unload(r.value("pipeline", ""));
  });
  control_->handle("history", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    std::string name = r.value("pipeline", "");
    pipeline_named(name);
    if (!deployments_) throw ControlError("unavailable", "the state database is unavailable");
    return deployments_->history(name, r.value("limit", 50));
  });
  control_->handle("log-level", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    if (r.contains("level")) {
      int level = r["level"].is_string() ? log_level_from_name(r["level"].get<std::string>()) : -1;
      if (level < 0) throw ControlError("bad_request", "level must be one of debug, info, notice, warning, err");
      log_level_ = level;
      log(LOG_NOTICE, "log level set to %s", kLevelNames[level]);
    }
    return nlohmann::json{{"level", kLevelNames[log_level_]}};
  });
}

}  // namespace edgert::daemon
