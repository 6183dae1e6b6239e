#include "gpio_sink.h"

#include <stdexcept>

namespace edgert::daemon {

namespace {

// "7" is a class id; "person" (or "7a") is a label.
bool parse_class_id(const std::string& text, int* id) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  *id = std::stoi(text);
  return true;
}

}  // namespace

bool gpio_detection_matches(const Result& result, const GpioSinkConfig& config) {
  for (const Detection& d : result.detections) {
    if (d.score < config.min_score) continue;
    if (config.classes.empty()) return true;
    for (const std::string& wanted : config.classes) {
      int id;
      if (d.label == wanted || (parse_class_id(wanted, &id) && d.class_id == id)) return true;
    }
  }
  return false;
}

GpioSink::GpioSink(GpioSinkConfig config) : config_(std::move(config)) {
  if (config_.detect_line < 0 && config_.heartbeat_line < 0)
    throw std::runtime_error("gpio sink on chip '" + config_.chip + "': neither detect_line nor heartbeat_line is set");
  if (config_.detect_line >= 0 && config_.detect_line == config_.heartbeat_line)
    throw std::runtime_error("gpio sink on chip '" + config_.chip + "': detect_line and heartbeat_line are both " +
                             std::to_string(config_.detect_line));
  if (config_.detect_line >= 0)
    detect_ = std::make_unique<GpioOutput>(config_.chip, static_cast<unsigned>(config_.detect_line));
  if (config_.heartbeat_line >= 0)
    heartbeat_ = std::make_unique<GpioOutput>(config_.chip, static_cast<unsigned>(config_.heartbeat_line));
}

std::string GpioSink::describe() const {
  std::string text = "gpio:" + config_.chip;
  if (detect_) text += " detect=" + std::to_string(config_.detect_line);
  if (heartbeat_) text += " heartbeat=" + std::to_string(config_.heartbeat_line);
  return text;
}

void GpioSink::publish(const Result& result) {
  // Only changes reach the kernel: an ioctl per frame for an unchanged line is waste.
  if (detect_) {
    bool want = gpio_detection_matches(result, config_);
    if (want != detect_level_) set(*detect_, want, detect_level_);
  }
  if (config_.heartbeat == GpioSinkConfig::Heartbeat::kPerResult) toggle_heartbeat();
}

void GpioSink::tick() {
  if (config_.heartbeat == GpioSinkConfig::Heartbeat::kTimer) toggle_heartbeat();
}

void GpioSink::toggle_heartbeat() {
  if (heartbeat_) set(*heartbeat_, !heartbeat_level_, heartbeat_level_);
}

void GpioSink::set(GpioOutput& line, bool high, bool& level) {
  try {
    line.set(high);
    level = high;
  } catch (const std::exception& error) {
    ++write_failures_;
    last_error_ = error.what();  // level stays as it was, so the next result retries the change
  }
}

}  // namespace edgert::daemon
