// The steps of one swap or deploy, as the control reply and the deployments table report them.
#pragma once

#include <time.h>

#include <nlohmann/json.hpp>
#include <string>

namespace edgert::daemon {

inline double monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

inline std::string short_sha(const std::string& sha) { return sha.size() > 12 ? sha.substr(0, 12) : sha; }

class SwapSteps {
 public:
  // `ms` < 0: the time since the previous step ended (or the swap began).
  void done(const std::string& step, const std::string& detail, double ms = -1) { add(step, true, detail, ms); }
  void failed(const std::string& step, const std::string& detail) { add(step, false, detail, -1); }
  const nlohmann::json& list() const { return list_; }
  double elapsed_ms() const { return monotonic_ms() - started_; }

 private:
  void add(const std::string& step, bool ok, const std::string& detail, double ms) {
    double t = monotonic_ms();
    list_.push_back({{"step", step}, {"ok", ok}, {"ms", ms < 0 ? t - step_started_ : ms}, {"detail", detail}});
    step_started_ = t;
  }
  nlohmann::json list_ = nlohmann::json::array();
  double started_ = monotonic_ms(), step_started_ = started_;
};

}  // namespace edgert::daemon
