// A thin RAII layer over builder.h: owners that release on scope exit, errors as edgert::Error
// exceptions, and std::function callbacks. Adds no behaviour of its own.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgert/builder.h"
#include "edgert/edgert.hpp"

namespace edgert {

// One calibration sample being fed: add each model input's tensor (copied).
class CalibrationFeed {
 public:
  explicit CalibrationFeed(edgert_calibration_feed* feed) : feed_(feed) {}
  void add(const std::string& name, edgert_dtype dtype, const std::vector<int64_t>& dims, const void* data,
           size_t bytes) {
    edgert_error error{};
    check(edgert_calibration_feed_add(feed_, name.empty() ? nullptr : name.c_str(), dtype, dims.data(),
                                      static_cast<int32_t>(dims.size()), data, bytes, &error),
          error);
  }

 private:
  edgert_calibration_feed* feed_;
};

class BuiltEngine {
 public:
  explicit BuiltEngine(edgert_built_engine* engine) : engine_(engine) {}
  const uint8_t* data() const { return edgert_built_engine_data(engine_.get(), nullptr); }
  size_t size() const {
    size_t size = 0;
    edgert_built_engine_data(engine_.get(), &size);
    return size;
  }
  std::string report() const { return edgert_built_engine_report(engine_.get()); }
  void save(const std::string& path) const {
    edgert_error error{};
    check(edgert_built_engine_save(engine_.get(), path.c_str(), &error), error);
  }

 private:
  struct Release {
    void operator()(edgert_built_engine* e) const { edgert_built_engine_release(e); }
  };
  std::unique_ptr<edgert_built_engine, Release> engine_;
};

class Builder {
 public:
  // Returns false when there are no more samples; throw to end the build with that message.
  using CalibrationSource = std::function<bool(int64_t index, CalibrationFeed& feed)>;
  using Log = std::function<void(const std::string& line)>;

  explicit Builder(const std::string& model_path) {
    edgert_error error{};
    edgert_builder* raw = nullptr;
    check(edgert_builder_create(model_path.c_str(), &raw, &error), error);
    builder_.reset(raw);
  }
  // Options as `edgert build`'s long flags, without the dashes (builder.h).
  Builder& set(const std::string& name, const std::string& value) {
    edgert_error error{};
    check(edgert_builder_set_option(builder_.get(), name.c_str(), value.c_str(), &error), error);
    return *this;
  }
  Builder& set(const std::string& name, bool on) { return set(name, std::string(on ? "1" : "0")); }
  Builder& set(const std::string& name, const char* value) { return set(name, std::string(value)); }
  Builder& calibrate_with(CalibrationSource source) {
    calibration_ = std::move(source);
    edgert_error error{};
    check(edgert_builder_set_calibration(builder_.get(), calibration_ ? &Builder::next_sample : nullptr, this, &error),
          error);
    return *this;
  }
  Builder& log_to(Log log) {
    log_ = std::move(log);
    edgert_builder_set_log(builder_.get(), log_ ? &Builder::log_line : nullptr, this);
    return *this;
  }
  BuiltEngine build() {
    edgert_error error{};
    edgert_built_engine* raw = nullptr;
    check(edgert_builder_build(builder_.get(), &raw, &error), error);
    return BuiltEngine(raw);
  }
  edgert_builder* get() const { return builder_.get(); }

 private:
  // The callbacks run inside edgert_builder_build: no exception may cross the C boundary, so
  // one thrown by the source becomes the build's error.
  static edgert_status next_sample(void* user, int64_t index, edgert_calibration_feed* raw, int32_t* done,
                                   edgert_error* error) {
    try {
      CalibrationFeed feed(raw);
      *done = static_cast<Builder*>(user)->calibration_(index, feed) ? 0 : 1;
      return EDGERT_OK;
    } catch (const std::exception& e) {
      error->status = EDGERT_ERR_INVALID_ARGUMENT;
      snprintf(error->message, sizeof error->message, "calibration sample %lld: %s", static_cast<long long>(index),
               e.what());
      return EDGERT_ERR_INVALID_ARGUMENT;
    }
  }
  static void log_line(void* user, const char* line) { static_cast<Builder*>(user)->log_(line); }

  struct Release {
    void operator()(edgert_builder* b) const { edgert_builder_release(b); }
  };
  std::unique_ptr<edgert_builder, Release> builder_;
  CalibrationSource calibration_;
  Log log_;
};

// What an engine file holds, as `edgert inspect --json` prints it.
inline std::string inspect_engine_file(const std::string& path) {
  edgert_error error{};
  char* json = nullptr;
  check(edgert_inspect_engine_file(path.c_str(), &json, &error), error);
  std::string text(json);
  edgert_builder_free_text(json);
  return text;
}

}  // namespace edgert
