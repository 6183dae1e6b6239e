// The control commands of hot swap (engines, deploy, swap, rollback, history, unload,
// log-level), the engine a pipeline starts on, and the daemon's log. The swap procedure itself
// is in daemon_swap.cpp.
#include <sys/stat.h>
#include <syslog.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "daemon.h"
#include "engine_signing.h"
#include "swap_steps.h"
#include "yaml_tree.h"

namespace edgert::daemon {
namespace {

const char* kLevelNames[] = {"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"};

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
  // Under require_signed nothing unsigned starts: not the configured file (a reload adds
  // pipelines without --check's checks), not an engine recorded before the policy was set.
  auto check_signature = [&](const std::string& path, const std::string& what) {
    if (!config_.require_signed) return;
    std::string refusal =
        signature_refusal(config_, read_engine_facts(path, signing::read_trusted_keys(config_.trusted_keys_dir, nullptr)));
    if (!refusal.empty())
      throw config::ConfigError(config_path_ + ": pipeline '" + config.name + "': " + what + " '" + path + "' refused: " + refusal);
  };
  if (!engine_store_) {
    check_signature(config.engine, "engine");
    return config.engine;
  }
  std::optional<ActiveRecord> active = engine_store_->read_active(config.name);
  if (active && active->config_engine == config.engine) {
    if (engine_store_->contains(active->sha256)) {
      check_signature(engine_store_->path_of(active->sha256), "the recorded engine");
      log(LOG_NOTICE, "pipeline %s: starting on engine %s as recorded", config.name.c_str(), short_sha(active->sha256).c_str());
      return engine_store_->path_of(active->sha256);
    }
    log(LOG_ERR, "pipeline %s: the recorded engine %s is not in the store; starting on the configured %s",
        config.name.c_str(), active->sha256.c_str(), config.engine.c_str());
  }
  check_signature(config.engine, "engine");
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


void Daemon::queue_swap_command(std::function<void(Finish)> operation, Finish reply) {
  auto start = [this, operation = std::move(operation), reply = std::move(reply)] {
    Finish done = [this, reply](std::exception_ptr error, nlohmann::json result) {
      reply(error, std::move(result));
      swap_busy_ = false;
      if (swap_queue_.empty()) return;
      auto next = std::move(swap_queue_.front());
      swap_queue_.pop_front();
      swap_busy_ = true;
      next();
    };
    try {
      operation(done);
    } catch (...) {
      done(std::current_exception(), nullptr);
    }
  };
  if (swap_busy_) {
    swap_queue_.push_back(std::move(start));
    return;
  }
  swap_busy_ = true;
  start();
}

void Daemon::deploy(const nlohmann::json& request, const Peer& peer, Finish finish) {
  if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable; see the daemon's log");
  std::string path = string_field(request, "path"), name = string_field(request, "pipeline");
  std::string expected = string_field(request, "sha256");
  if (path.empty() || path[0] != '/') throw ControlError("bad_request", "deploy needs an absolute \"path\"");
  pipeline_named(name);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw ControlError("no_such_file", "cannot stat '" + path + "': " + strerror(errno));
  // The daemon reads as root: only hand it files the requester could read itself.
  if (peer.uid != 0 && st.st_uid != peer.uid && !(st.st_mode & S_IROTH))
    throw ControlError("permission_denied", "'" + path + "' is neither owned by uid " + std::to_string(peer.uid) +
                                                " nor world-readable");
  // Copying, hashing and verifying the file run on the worker; the rest on the loop.
  struct Installed {
    bool added = false;  // new to the store: a refusal removes it again
    std::string sha, install_error, verify_error;
    EngineFacts facts;
    double ms = 0;
  };
  auto installed = std::make_shared<Installed>();
  double started = monotonic_ms();
  std::string keys_dir = config_.trusted_keys_dir;
  EngineStore* store = engine_store_.get();
  worker_->run(
      [installed, store, path, expected, keys_dir] {
        try {
          installed->sha = store->install(path, expected, &installed->added);
        } catch (const std::exception& e) {
          installed->install_error = e.what();
          return;
        }
        installed->ms = monotonic_ms();
        try {
          installed->facts = read_engine_facts(store->path_of(installed->sha), signing::read_trusted_keys(keys_dir, nullptr));
        } catch (const std::exception& e) {
          installed->verify_error = e.what();
        }
      },
      [this, installed, name, path, started, finish](std::exception_ptr error) {
        try {
          if (error) std::rethrow_exception(error);
          if (!installed->install_error.empty())
            throw ControlError("install_failed", installed->install_error,
                               {{"steps", {{{"step", "install"}, {"ok", false}, {"detail", installed->install_error}}}}});
          const std::string& sha = installed->sha;
          nlohmann::json install_step = {{"step", "install"}, {"ok", true}, {"ms", installed->ms - started},
                                         {"detail", "stored as " + engine_store_->path_of(sha)}};
          if (!installed->verify_error.empty()) {
            // Nothing runs a file that fails verification: keep the store to good engines.
            bool in_use = false;
            for (auto& [n, p] : pipelines_)
              if (p->engine() && p->engine()->id() == sha) in_use = true;
            if (!in_use) unlink(engine_store_->path_of(sha).c_str());
            std::string message = "deploy of " + path + " refused at verify: " + installed->verify_error;
            record_event(name, "swap_refused", message);
            if (deployments_) {
              auto running = pipeline_named(name).engine();
              int64_t id = deployments_->begin(name, sha, running ? running->id() : "", "deploy");
              deployments_->finish(id, "failed", "verify", installed->verify_error);
            }
            throw ControlError("corrupt_engine", message,
                               {{"steps", {install_step, {{"step", "verify"}, {"ok", false}, {"detail", installed->verify_error}}}}});
          }
          const EngineFacts& facts = installed->facts;
          std::string signer = facts.signature.state == signing::SignatureState::Valid      ? facts.signature.signer
                               : facts.signature.state == signing::SignatureState::Unsigned ? ""
                                                                                            : facts.signature.signer + " (unverified)";
          if (deployments_)
            deployments_->add_engine({sha, engine_store_->path_of(sha), facts.board, signer, facts.footprint.file_bytes});
          auto running = pipeline_named(name).engine();
          if (running && running->id() == sha) {
            finish(nullptr, {{"pipeline", name}, {"sha256", sha}, {"already_active", true}, {"steps", {install_step}}});
            return;
          }
          // A refused upload leaves the store as it was: nothing may run it, and nothing else
          // would ever delete it.
          Finish remove_if_refused = [this, sha, added = installed->added, finish](std::exception_ptr error, nlohmann::json result) {
            if (error && added && engine_user(sha).empty()) {
              try {
                engine_store_->remove(sha);
                log(LOG_INFO, "removed the refused upload %s from the engine store", short_sha(sha).c_str());
              } catch (const std::exception& e) {
                log(LOG_WARNING, "cannot remove the refused upload %s: %s", short_sha(sha).c_str(), e.what());
              }
            }
            finish(error, std::move(result));
          };
          swap_to(name, sha, "deploy", nlohmann::json::array({install_step}), started, remove_if_refused, facts);
        } catch (...) {
          finish(std::current_exception(), nullptr);
        }
      });
}

std::string Daemon::engine_user(const std::string& sha) const {
  for (const auto& [name, p] : pipelines_) {
    auto running = p->engine();
    if (running && running->id() == sha) return "runs in pipeline '" + name + "'";
    auto previous = previous_.find(name);
    if (previous != previous_.end() && previous->second && previous->second->id() == sha)
      return "is the rollback engine of pipeline '" + name + "'";
    std::optional<ActiveRecord> record = engine_store_ ? engine_store_->read_active(name) : std::nullopt;
    if (record && record->sha256 == sha) return "is the recorded engine of pipeline '" + name + "' (a restart loads it)";
    if (record && record->previous == sha) return "is the rollback engine of pipeline '" + name + "'";
  }
  return "";
}

nlohmann::json Daemon::delete_engine(const std::string& text) {
  if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable");
  std::string sha = resolve_sha(text);
  std::string user = engine_user(sha);
  if (!user.empty()) throw ControlError("in_use", "engine " + short_sha(sha) + " " + user + "; it stays in the store");
  engine_store_->remove(sha);
  log(LOG_NOTICE, "engine %s deleted from the store", short_sha(sha).c_str());
  return {{"deleted", nlohmann::json::array({sha})}};
}

nlohmann::json Daemon::prune_engines() {
  if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable");
  nlohmann::json deleted = nlohmann::json::array(), kept = nlohmann::json::array();
  for (const std::string& sha : engine_store_->list()) {
    std::string user = engine_user(sha);
    if (!user.empty()) {
      kept.push_back({{"sha256", sha}, {"why", user}});
      continue;
    }
    engine_store_->remove(sha);
    deleted.push_back(sha);
  }
  log(LOG_NOTICE, "pruned %zu engine(s) from the store", deleted.size());
  return {{"deleted", deleted}, {"kept", kept}};
}

void Daemon::rollback(const std::string& name, Finish finish) {
  Pipeline& pipeline = pipeline_named(name);
  std::optional<ActiveRecord> record = engine_store_ ? engine_store_->read_active(name) : std::nullopt;
  std::string target = record ? record->previous : "";
  if (target.empty()) throw ControlError("no_previous", "pipeline '" + name + "' has no previous engine to roll back to");
  if (!engine_store_->contains(target))
    throw ControlError("no_such_engine", "the previous engine " + target + " is no longer in the store");
  auto running = pipeline.engine();
  if (running && running->id() == target) {
    finish(nullptr, {{"pipeline", name}, {"sha256", target}, {"already_active", true}});
    return;
  }
  swap_to(name, target, "rollback", nlohmann::json::array(), 0, std::move(finish));
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
  control_->handle_async("deploy", [this](const nlohmann::json& r, UnixSocketServer::Client& c, Finish reply) {
    Peer peer = c.peer;
    queue_swap_command([this, r, peer](Finish finish) { deploy(r, peer, finish); }, std::move(reply));
  });
  control_->handle_async("swap", [this](const nlohmann::json& r, UnixSocketServer::Client&, Finish reply) {
    queue_swap_command(
        [this, r](Finish finish) {
          if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable");
          std::string name = string_field(r, "pipeline");
          std::string sha = resolve_sha(string_field(r, "sha256"));
          auto running = pipeline_named(name).engine();
          if (running && running->id() == sha) {
            finish(nullptr, {{"pipeline", name}, {"sha256", sha}, {"already_active", true}});
            return;
          }
          swap_to(name, sha, "swap", nlohmann::json::array(), 0, finish);
        },
        std::move(reply));
  });
  control_->handle_async("rollback", [this](const nlohmann::json& r, UnixSocketServer::Client&, Finish reply) {
    queue_swap_command([this, r](Finish finish) { rollback(string_field(r, "pipeline"), finish); }, std::move(reply));
  });
  // Queued with the swaps, so an unload sent after a deploy lands after it.
  control_->handle_async("unload", [this](const nlohmann::json& r, UnixSocketServer::Client&, Finish reply) {
    queue_swap_command([this, r](Finish finish) { finish(nullptr, unload(string_field(r, "pipeline"))); }, std::move(reply));
  });
  // Queued with the swaps: a swap in flight may be loading the engine being deleted.
  control_->handle_async("delete", [this](const nlohmann::json& r, UnixSocketServer::Client&, Finish reply) {
    queue_swap_command([this, r](Finish finish) { finish(nullptr, delete_engine(string_field(r, "sha256"))); }, std::move(reply));
  });
  control_->handle_async("prune", [this](const nlohmann::json&, UnixSocketServer::Client&, Finish reply) {
    queue_swap_command([this](Finish finish) { finish(nullptr, prune_engines()); }, std::move(reply));
  });
  control_->handle("history", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    std::string name = string_field(r, "pipeline");
    pipeline_named(name);
    if (!deployments_) throw ControlError("unavailable", "the state database is unavailable");
    return deployments_->history(name, static_cast<int>(integer_field(r, "limit", 50)));
  });
  control_->handle("log-level", [this](const nlohmann::json& r, UnixSocketServer::Client&) {
    if (r.contains("level")) {
      int level = log_level_from_name(string_field(r, "level"));
      if (level < 0) throw ControlError("bad_request", "level must be one of debug, info, notice, warning, err");
      log_level_ = level;
      log(LOG_NOTICE, "log level set to %s", kLevelNames[level]);
    }
    return nlohmann::json{{"level", kLevelNames[log_level_]}};
  });
}

}  // namespace edgert::daemon
