// The swap procedure: verify -> load -> warm up -> self-test -> switch -> record. The cheap
// decisions (budget, board, bookkeeping, the switch itself) run on the loop thread; reading,
// loading and running the new engine run on the background worker, so the loop keeps feeding
// frames to the running engine until the switch, which lands between two frames
// (Pipeline::swap_engine).
#include <syslog.h>

#include "board_catalog.h"
#include "board_profile.h"
#include "daemon.h"
#include "engine_signing.h"
#include "swap_steps.h"

namespace edgert::daemon {
namespace {

std::string message_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Runs one stage of a swap on the loop thread; whatever it throws finishes the swap.
template <typename Fn>
void stage(const ControlServer::Reply& finish, Fn&& fn) {
  try {
    fn();
  } catch (...) {
    finish(std::current_exception(), nullptr);
  }
}

}  // namespace

struct Daemon::SwapJob {
  std::string name, sha, kind;
  nlohmann::json prior_steps;
  double started_ms = 0;
  Finish finish;
  SwapSteps steps;
  int64_t row = 0;
  std::string current_sha;
  std::optional<ActiveRecord> record;
  std::string path;
  // verify (worker)
  EngineFacts facts;
  std::string signer = "unsigned";
  uint64_t need = 0;
  bool stop_first = false;
  std::string old_path;
  // load, warm up, self-test (worker)
  std::shared_ptr<EngineHandle> next;
  std::string load_error, self_test_failure;
  double load_ms = 0, warm_up_ms = 0, self_test_ms = 0;
  // trial frame (worker): the pipeline's own source shape, preprocess and postprocess
  PipelineConfig pipeline;
  std::string trial_failure;
  double trial_ms = 0;
  bool had_vector = false;

  nlohmann::json all_steps() const {
    nlohmann::json all = prior_steps.is_array() ? prior_steps : nlohmann::json::array();
    for (const auto& s : steps.list()) all.push_back(s);
    return all;
  }
};

void Daemon::swap_progress(SwapJob& job, const std::string& step, const std::string& detail, double ms) {
  job.steps.done(step, detail, ms);
  log(LOG_INFO, "swap %s -> %s: %s ok (%s)", job.name.c_str(), short_sha(job.sha).c_str(), step.c_str(), detail.c_str());
  if (deployments_ && job.row) deployments_->step(job.row, step, detail);
}

void Daemon::refuse_swap(SwapJob& job, const std::string& step, const std::string& code, const std::string& why) {
  job.steps.failed(step, why);
  std::string message = job.kind + " of " + short_sha(job.sha) + " to pipeline " + job.name + " refused at " + step + ": " +
                        why + (job.current_sha.empty() ? "" : "; still running " + short_sha(job.current_sha));
  log(LOG_WARNING, "%s", message.c_str());
  record_event(job.name, "swap_refused", message);
  ++swap_counts_[job.name].refused;
  if (deployments_ && job.row) deployments_->finish(job.row, "failed", step, why);
  throw ControlError(code, message, {{"steps", job.all_steps()}, {"running", job.current_sha}});
}

void Daemon::swap_to(const std::string& name, const std::string& sha, const std::string& kind, nlohmann::json prior_steps,
                     double started_ms, Finish finish, std::optional<EngineFacts> verified) {
  auto job = std::make_shared<SwapJob>();
  job->name = name;
  job->sha = sha;
  job->kind = kind;
  job->prior_steps = std::move(prior_steps);
  job->started_ms = started_ms > 0 ? started_ms : monotonic_ms();
  job->finish = std::move(finish);
  try {
    if (!engine_store_) throw ControlError("unavailable", "the engine store is unavailable; see the daemon's log");
    std::shared_ptr<EngineHandle> current = pipeline_named(name).engine();
    job->current_sha = current ? current->id() : "";
    job->old_path = current ? current->path() : "";
    job->record = engine_store_->read_active(name);
    job->path = engine_store_->path_of(sha);
    if (deployments_) job->row = deployments_->begin(name, sha, job->current_sha, kind);
  } catch (...) {
    job->finish(std::current_exception(), nullptr);
    return;
  }
  if (verified) {
    job->facts = std::move(*verified);
    stage(job->finish, [&] { swap_verified(job); });
    return;
  }
  std::string keys_dir = config_.trusted_keys_dir;
  worker_->run(
      [job, keys_dir] {
        std::vector<std::string> key_problems;
        job->facts = read_engine_facts(job->path, signing::read_trusted_keys(keys_dir, &key_problems));
      },
      [this, job](std::exception_ptr error) {
        stage(job->finish, [&] {
          if (error) refuse_swap(*job, "verify", "corrupt_engine", message_of(error));
          swap_verified(job);
        });
      });
}

// verify, the checks that need the daemon's state: signature policy, board, plugins, budget.
void Daemon::swap_verified(const std::shared_ptr<SwapJob>& job) {
  SwapJob& j = *job;
  const EngineFacts& facts = j.facts;
  switch (facts.signature.state) {
    case signing::SignatureState::Invalid: refuse_swap(j, "verify", "bad_signature", facts.signature.message);
    case signing::SignatureState::UnknownKey:
      if (config_.require_signed)
        refuse_swap(j, "verify", "untrusted_signer",
                    facts.signature.message + " (trusted keys: " + config_.trusted_keys_dir + ")");
      j.signer = facts.signature.signer + " (untrusted)";
      break;
    case signing::SignatureState::Unsigned:
      if (config_.require_signed)
        refuse_swap(j, "verify", "unsigned_engine",
                    "the engine is not signed and require_signed is true (sign it with edgert build --sign KEY; trusted "
                    "keys: " + config_.trusted_keys_dir + ")");
      break;
    case signing::SignatureState::Valid: j.signer = "signed by " + facts.signature.signer; break;
  }
  const std::string& this_board = config_.board_profile.name;
  if (facts.board != this_board)
    refuse_swap(j, "verify", "wrong_board",
                "the engine was built for board '" + facts.board + "', this board is '" + this_board + "'" +
                    (config_.board == "native" ? " (board: native)" : ""));
  std::string want;
  try {
    // Read again: the profile may have been edited since edgertd started.
    want = config::resolve_board(config_.board).profile.fingerprint();
  } catch (const std::exception& e) {
    log(LOG_WARNING, "cannot read board profile '%s' to check fingerprints: %s", config_.board.c_str(), e.what());
  }
  if (!want.empty() && facts.fingerprint != want)
    refuse_swap(j, "verify", "wrong_board", "the engine's board fingerprint " + facts.fingerprint + " is not this board's " +
                                                want + " (profile '" + this_board + "' changed since the build?)");
  std::vector<std::string> missing = missing_plugins(facts.plugins, config_.plugin_path);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    refuse_swap(j, "verify", "missing_plugin", "plugin(s) " + list + " required by the engine are not installed (plugin path: " +
                                                   (config_.plugin_path.empty() ? "libedgert's default" : config_.plugin_path) + ")");
  }
  j.need = facts.footprint.total();
  std::string what = "engine " + short_sha(j.sha) + " for pipeline '" + j.name + "'";
  std::string refusal = budget_->reserve("swap:" + j.name, j.need, what);
  if (!refusal.empty() && previous_.count(j.name)) {
    previous_.erase(j.name);  // the rollback engine kept in memory gives way; rollback reloads it
    budget_->release("previous:" + j.name);
    refusal = budget_->reserve("swap:" + j.name, j.need, what);
  }
  if (!refusal.empty()) {
    auto current = pipeline_named(j.name).engine();
    uint64_t current_bytes = current ? current->footprint().total() : 0;
    bool fits_alone = budget_->used() - current_bytes + j.need <= budget_->limit();
    if (!(config_.swap_stop_first && fits_alone))
      refuse_swap(j, "verify", "over_budget", refusal + (fits_alone ? "; it would fit without the running engine: set "
                                                                      "swap_stop_first: true to allow a stop-first swap" : ""));
    j.stop_first = true;
  }
  const std::string device_refusal = device_memory_refusal(facts.footprint, config_.plugin_path, what);
  if (!device_refusal.empty()) {
    budget_->release("swap:" + j.name);
    refuse_swap(j, "verify", "over_budget", device_refusal);
  }
  swap_progress(j, "verify", j.signer + ", board " + facts.board + ", " + std::to_string(j.need >> 10) + " KiB" +
                                 (j.stop_first ? ", stop-first (both engines do not fit)" : ", overlap"), -1);

  // Stop-first: the running engine goes before the new one loads; frames are dropped meanwhile.
  if (j.stop_first) {
    pipeline_named(j.name).swap_engine(nullptr);
    budget_->release("pipeline:" + j.name);
    budget_->reserve("swap:" + j.name, j.need, what);
  }
  std::string plugin_path = config_.plugin_path, board = config_.board_profile.name;
  bool mlock_weights = config_.mlock_weights;
  j.pipeline = pipeline_named(j.name).config();
  const GpuScheduling gpu = j.pipeline.gpu;
  worker_->run(
      [job, plugin_path, board, mlock_weights, gpu] {
        double t = monotonic_ms();
        try {
          job->next = std::make_shared<EngineHandle>(job->path, plugin_path, board, mlock_weights, job->sha, gpu);
        } catch (const std::exception& e) {
          job->load_error = e.what();
          return;
        }
        job->load_ms = monotonic_ms() - t;
        t = monotonic_ms();
        job->self_test_failure = job->next->replay_self_test(2, &job->had_vector);
        job->warm_up_ms = monotonic_ms() - t;
        t = monotonic_ms();
        if (job->self_test_failure.empty() && job->had_vector)
          job->self_test_failure = job->next->replay_self_test(1, &job->had_vector);
        job->self_test_ms = monotonic_ms() - t;
        // A self-test only shows the engine runs its own input; the pipeline feeds it frames of
        // its source through its preprocess, and its postprocess reads the outputs.
        if (job->self_test_failure.empty()) {
          t = monotonic_ms();
          job->trial_failure = trial_frame(job->pipeline, *job->next);
          job->trial_ms = monotonic_ms() - t;
        }
        if (!job->self_test_failure.empty() || !job->trial_failure.empty()) job->next.reset();  // unmapped here, off the loop
      },
      [this, job](std::exception_ptr error) {
        stage(job->finish, [&] {
          if (error && job->load_error.empty()) job->self_test_failure = message_of(error);
          swap_loaded(job);
        });
      });
}

void Daemon::swap_loaded(const std::shared_ptr<SwapJob>& job) {
  SwapJob& j = *job;
  // After a refused stop-first swap, the engine that ran before comes back.
  auto restore_after_stop_first = [&]() -> std::string {
    budget_->release("swap:" + j.name);
    if (!j.stop_first || j.old_path.empty()) return "";
    try {
      auto old = std::make_shared<EngineHandle>(j.old_path, config_.plugin_path, config_.board_profile.name, config_.mlock_weights,
                                                j.current_sha, j.pipeline.gpu);
      budget_->reserve("pipeline:" + j.name, old->footprint().total(), "engine " + short_sha(j.current_sha));
      pipeline_named(j.name).swap_engine(old);
      return "; the previous engine was loaded again";
    } catch (const std::exception& e) {
      return std::string("; reloading the previous engine failed too: ") + e.what();
    }
  };
  if (!j.load_error.empty()) refuse_swap(j, "load", "load_failed", j.load_error + restore_after_stop_first());
  swap_progress(j, "load", "footprint " + std::to_string(j.next ? j.next->footprint().total() >> 10 : 0) + " KiB", j.load_ms);
  if (j.self_test_failure.empty())
    swap_progress(j, "warm_up", j.had_vector ? "2 runs on the self-test input" : "skipped: no self-test vector", j.warm_up_ms);
  if (!j.self_test_failure.empty()) {
    j.next.reset();
    refuse_swap(j, "self_test", "self_test_failed", j.self_test_failure + restore_after_stop_first());
  }
  swap_progress(j, "self_test", j.had_vector ? "outputs match the builder's" : "no self-test vector stored in the engine",
                j.self_test_ms);
  if (!j.trial_failure.empty())
    refuse_swap(j, "trial_frame", "incompatible_engine",
                "the engine cannot serve pipeline '" + j.name + "' (" + pixel_format_name(j.pipeline.source.format) + " " +
                    std::to_string(j.pipeline.source.width) + "x" + std::to_string(j.pipeline.source.height) + ", " +
                    j.pipeline.postprocess.type + " postprocess): " + j.trial_failure + restore_after_stop_first());
  swap_progress(j, "trial_frame", "a " + std::to_string(j.pipeline.source.width) + "x" + std::to_string(j.pipeline.source.height) +
                                      " frame through preprocess, the engine and " + j.pipeline.postprocess.type + " postprocess",
                j.trial_ms);

  Pipeline* pipeline = nullptr;
  try {
    pipeline = &pipeline_named(j.name);
  } catch (const ControlError& e) {
    budget_->release("swap:" + j.name);
    refuse_swap(j, "switch", e.code(), std::string(e.what()) + " (removed by a reload during the swap)");
  }
  // switch between two frames, then bookkeeping that cannot fail the budget (same totals).
  std::shared_ptr<EngineHandle> old = pipeline->swap_engine(j.next);
  EngineStore::crash_point("switched");
  std::string what = "engine " + short_sha(j.sha) + " for pipeline '" + j.name + "'";
  budget_->release("swap:" + j.name);
  budget_->release("previous:" + j.name);
  previous_.erase(j.name);
  budget_->reserve("pipeline:" + j.name, j.need, what);
  if (old) {
    previous_[j.name] = old;
    budget_->reserve("previous:" + j.name, old->footprint().total(), "rollback engine " + short_sha(j.current_sha));
  }
  old.reset();
  j.next.reset();
  swap_progress(j, "switch", "between two frames", -1);
  try {
    engine_store_->write_active(j.name, ActiveRecord{j.sha, j.current_sha.empty() && j.record ? j.record->previous : j.current_sha,
                                                     j.record ? j.record->config_engine : ""});
  } catch (const std::exception& e) {
    // Unrecorded, the switch would not survive a restart: undo it.
    auto back = previous_.count(j.name) ? previous_[j.name] : nullptr;
    if (back) pipeline->swap_engine(back);
    refuse_swap(j, "record", "io_error", std::string(e.what()) + (back ? "; switched back" : ""));
  }
  swap_progress(j, "record", "active engine recorded", -1);
  if (deployments_) {
    deployments_->supersede_active(j.name, j.row);
    deployments_->finish(j.row, "active", "record", j.signer);
  }
  double total_ms = monotonic_ms() - j.started_ms;
  SwapCounts& counts = swap_counts_[j.name];
  ++(j.kind == "rollback" ? counts.rollbacks : counts.swaps);
  record_event(j.name, "engine_swapped", j.kind + ": " + short_sha(j.current_sha) + " -> " + short_sha(j.sha));
  log(LOG_NOTICE, "pipeline %s: %s %s -> %s in %.1f ms (%s)", j.name.c_str(), j.kind.c_str(), short_sha(j.current_sha).c_str(),
      short_sha(j.sha).c_str(), total_ms, j.stop_first ? "stop-first" : "overlap");
  j.finish(nullptr, {{"pipeline", j.name}, {"sha256", j.sha}, {"previous", j.current_sha},
                     {"mode", j.stop_first ? "stop-first" : "overlap"}, {"signer", j.signer}, {"self_test", j.had_vector},
                     {"duration_ms", total_ms}, {"steps", j.all_steps()}});
}

}  // namespace edgert::daemon
