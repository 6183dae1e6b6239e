// A Sink that shows results on GPIO lines: a detect line high while the latest result holds a
// configured class at or above min_score (a relay, a PLC input, an LED), and a heartbeat line
// that toggles so external watchdogs see the pipeline is alive. One GpioSink per pipeline: the
// lines follow whatever results it is given.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpio.h"
#include "result.h"

namespace edgert::daemon {

struct GpioSinkConfig {
  std::string chip;                   // as GpioChip accepts: path, name, label or number
  int detect_line = -1;               // -1: no detect output
  std::vector<std::string> classes;   // labels, or decimal class ids; empty: any detection counts
  float min_score = 0.5f;
  int heartbeat_line = -1;            // -1: no heartbeat output
  // kPerResult toggles on every published result (the line's frequency is half the frame rate);
  // kTimer toggles only on tick(), for watchdogs that want a steady rate from the loop.
  enum class Heartbeat { kPerResult, kTimer } heartbeat = Heartbeat::kPerResult;
};

// Whether `result` has a detection that config counts: score >= min_score and a label or class
// id listed in config.classes. No I/O, so the host tests check it without a chip.
bool gpio_detection_matches(const Result& result, const GpioSinkConfig& config);

class GpioSink : public Sink {
 public:
  // Requests the lines (both start low); throws std::runtime_error naming chip and line.
  explicit GpioSink(GpioSinkConfig config);

  void publish(const Result& result) override;
  std::string describe() const override;
  void tick();  // heartbeat in kTimer mode; does nothing in kPerResult mode

  bool detect_level() const { return detect_level_; }
  bool heartbeat_level() const { return heartbeat_level_; }
  // A failed set is counted and kept here, not thrown: publish runs on the loop.
  uint64_t write_failures() const { return write_failures_; }
  const std::string& last_error() const { return last_error_; }

 private:
  void toggle_heartbeat();
  void set(GpioOutput& line, bool high, bool& level);

  GpioSinkConfig config_;
  std::unique_ptr<GpioOutput> detect_, heartbeat_;
  bool detect_level_ = false, heartbeat_level_ = false;
  uint64_t write_failures_ = 0;
  std::string last_error_;
};

}  // namespace edgert::daemon
