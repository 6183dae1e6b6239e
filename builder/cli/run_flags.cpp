#include "run_flags.h"

#include <nlohmann/json.hpp>

#include "build_error.h"
#include "tensor_io.h"

namespace edgert::cli {

void RunFlags::add_to(CLI::App* command) {
  command->add_option("engine", engine, "Engine file");
  command->add_option("--loadEngine", load_engine, "Engine file (trtexec spelling of ENGINE)");
  command->add_option("-i,--input", inputs, "NAME=FILE (.pb TensorProto or .npy); repeat per input");
  // One value per occurrence, so `--shapes x:1x4 ENGINE` leaves ENGINE alone; occurrences add up.
  command->add_option("--shapes", shapes,
                      "NAME:1x3x224x224[,NAME:...]: inputs not given with --input are synthesised at this shape "
                      "(seeded random values); a given input must have it. Repeatable")
      ->allow_extra_args(false);
  // trtexec users repeat flags and expect the last to win.
  command->add_option("--iterations", iterations, "Timed runs (at least)")
      ->check(CLI::Range(1, 10000000))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->capture_default_str();
  command->add_option("--warmup", warmup_runs,
                      "Untimed runs first: a count of runs (trtexec's --warmUp counts milliseconds)")
      ->check(CLI::Range(0, 1000000))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->capture_default_str();
  command->add_option("--warmUp", warmup_ms,
                      "Untimed runs first for at least this many milliseconds (trtexec's meaning; with --warmup, "
                      "both minimums hold)")
      ->check(CLI::Range(0.0, 3600000.0))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--duration", duration_s, "Keep running timed runs for at least this many seconds")
      ->check(CLI::Range(0.0, 86400.0))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--exportTimes", export_times,
                      "Write every timed run's timing as JSON (trtexec's format: startComputeMs, endComputeMs, "
                      "computeMs, latencyMs)");
}

const std::string& RunFlags::engine_path() const {
  if (engine.empty() && load_engine.empty()) throw CLI::RequiredError("ENGINE (or --loadEngine=)");
  if (!engine.empty() && !load_engine.empty() && engine != load_engine)
    builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "two engines given: '%s' and --loadEngine '%s'", engine.c_str(),
                        load_engine.c_str());
  return engine.empty() ? load_engine : engine;
}

int RunFlags::warm_up(const std::function<void()>& run) const {
  const auto start = std::chrono::steady_clock::now();
  int runs = 0;
  while (runs < warmup_runs ||
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < warmup_ms) {
    run();
    ++runs;
  }
  return runs;
}

void write_export_times(const std::string& path, const std::vector<RunTime>& runs) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const RunTime& r : runs)
    j.push_back({{"startComputeMs", r.start_ms},
                 {"endComputeMs", r.end_ms},
                 {"computeMs", r.end_ms - r.start_ms},
                 {"latencyMs", r.end_ms - r.start_ms}});
  write_file_checked(path, j.dump(2) + "\n");
}

}  // namespace edgert::cli
