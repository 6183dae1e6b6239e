// The builder's C API (edgert/builder.h) over BuildRequest. No exception leaves this file.
#include <cstdlib>
#include <cstring>
#include <new>

#include "build_error.h"
#include "build_request.h"
#include "yaml_tree.h"
#include "edgert/builder.h"
#include "edgert/dtype_info.h"
#include "engine_file.h"
#include "engine_json.h"
#include "engine_writer.h"
#include "error.h"

struct edgert_builder {
  edgert::api::BuildRequest request;
  edgert_calibration_next next_sample = nullptr;
  void* next_sample_user = nullptr;
};

struct edgert_built_engine {
  std::vector<uint8_t> bytes;
  std::string report;
};

struct edgert_calibration_feed {
  edgert::builder::CalibrationBatch batch;
};

using edgert::set_error;

namespace {

// Every message a build can throw, as the status it carries.
template <typename Fn>
edgert_status guarded(edgert_error* error, Fn&& fn) {
  try {
    return fn();
  } catch (const edgert::builder::BuildError& e) {
    return set_error(error, e.status(), "%s", e.what());
  } catch (const edgert::config::ConfigError& e) {
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "%s", e.what());
  } catch (const std::bad_alloc&) {
    return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(error, EDGERT_ERR_INTERNAL, "%s", e.what());
  }
}

// The C callback as the builder's batch source: a failure in the caller's code ends the build
// with the caller's message.
std::function<std::optional<edgert::builder::CalibrationBatch>()> callback_batches(edgert_calibration_next next,
                                                                                  void* user) {
  auto index = std::make_shared<int64_t>(0);
  return [next, user, index]() -> std::optional<edgert::builder::CalibrationBatch> {
    edgert_calibration_feed feed;
    int32_t done = 0;
    edgert_error error{};
    const int64_t sample = (*index)++;
    if (next(user, sample, &feed, &done, &error) != EDGERT_OK)
      edgert::builder::build_fail(error.status == EDGERT_OK ? EDGERT_ERR_INVALID_ARGUMENT : error.status, "%s",
                                  error.message[0] ? error.message : "the calibration source failed");
    if (done) return std::nullopt;
    if (feed.batch.empty())
      edgert::builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "calibration sample %lld holds no tensor",
                                  static_cast<long long>(sample));
    for (edgert::builder::CalibrationTensor& t : feed.batch) t.source = "calibration sample " + std::to_string(sample);
    return std::move(feed.batch);
  };
}

}  // namespace

extern "C" {

const char* edgert_builder_version(void) { return EDGERT_VERSION; }

edgert_status edgert_builder_create(const char* model_path, edgert_builder** builder, edgert_error* error) {
  if (!model_path || !builder) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "model path and builder are required");
  *builder = nullptr;
  return guarded(error, [&] {
    *builder = new edgert_builder{edgert::api::BuildRequest(model_path)};
    return EDGERT_OK;
  });
}

void edgert_builder_release(edgert_builder* builder) { delete builder; }

edgert_status edgert_builder_set_option(edgert_builder* builder, const char* name, const char* value,
                                        edgert_error* error) {
  if (!builder || !name || !value)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "builder, option name and value are required");
  return guarded(error, [&] {
    builder->request.set_option(name, value);
    return EDGERT_OK;
  });
}

edgert_status edgert_builder_set_calibration(edgert_builder* builder, edgert_calibration_next next, void* user,
                                             edgert_error* error) {
  if (!builder) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "builder is required");
  return guarded(error, [&] {
    builder->request.set_calibration(next ? callback_batches(next, user) : nullptr);
    return EDGERT_OK;
  });
}

edgert_status edgert_calibration_feed_add(edgert_calibration_feed* feed, const char* name, edgert_dtype dtype,
                                          const int64_t* dims, int32_t rank, const void* data, size_t bytes,
                                          edgert_error* error) {
  if (!feed || (rank > 0 && !dims) || rank < 0 || rank > EDGERT_MAX_RANK || (bytes > 0 && !data))
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "calibration tensor '%s': feed, dims (rank 0..%d) and data "
                     "are required", name ? name : "", EDGERT_MAX_RANK);
  return guarded(error, [&] {
    const size_t element = edgert_dtype_size(dtype);
    size_t count = 1;
    for (int32_t i = 0; i < rank; ++i) {
      if (dims[i] < 0) return set_error(error, EDGERT_ERR_SHAPE, "calibration tensor '%s': dimension %d is %lld",
                                        name ? name : "", i, static_cast<long long>(dims[i]));
      count *= static_cast<size_t>(dims[i]);
    }
    if (element == 0 || count * element != bytes)
      return set_error(error, EDGERT_ERR_SHAPE, "calibration tensor '%s': %zu bytes for %zu %s values", name ? name : "",
                       bytes, count, edgert_dtype_name(dtype));
    edgert::builder::CalibrationTensor tensor;
    tensor.name = name ? name : "";
    tensor.shape.assign(dims, dims + rank);
    tensor.dtype = dtype;
    if (dtype == EDGERT_DTYPE_FLOAT32) {
      tensor.data.resize(count);
      std::memcpy(tensor.data.data(), data, bytes);
    } else {
      tensor.bytes.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
    }
    feed->batch.push_back(std::move(tensor));
    return EDGERT_OK;
  });
}

void edgert_builder_set_log(edgert_builder* builder, edgert_build_log log, void* user) {
  if (!builder) return;
  if (log)
    builder->request.set_log([log, user](const std::string& line) { log(user, line.c_str()); });
  else
    builder->request.set_log(nullptr);
}

edgert_status edgert_builder_build(edgert_builder* builder, edgert_built_engine** engine, edgert_error* error) {
  if (!builder || !engine) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "builder and engine are required");
  *engine = nullptr;
  return guarded(error, [&] {
    edgert::api::BuildOutcome outcome = builder->request.build();
    auto built = std::make_unique<edgert_built_engine>();
    built->report = edgert::api::build_report_json(outcome, builder->request.model_path());
    built->bytes = std::move(outcome.result.engine);
    *engine = built.release();
    return EDGERT_OK;
  });
}

const uint8_t* edgert_built_engine_data(const edgert_built_engine* engine, size_t* size) {
  if (size) *size = engine ? engine->bytes.size() : 0;
  return engine ? engine->bytes.data() : nullptr;
}

const char* edgert_built_engine_report(const edgert_built_engine* engine) {
  return engine ? engine->report.c_str() : "";
}

edgert_status edgert_built_engine_save(const edgert_built_engine* engine, const char* path, edgert_error* error) {
  if (!engine || !path) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "engine and path are required");
  return guarded(error, [&] {
    edgert::builder::write_file_atomically(path, engine->bytes);
    return EDGERT_OK;
  });
}

void edgert_built_engine_release(edgert_built_engine* engine) { delete engine; }

edgert_status edgert_inspect_engine_file(const char* path, char** json, edgert_error* error) {
  if (!path || !json) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "path and json are required");
  *json = nullptr;
  return guarded(error, [&] {
    edgert::EngineFile file;
    edgert_error opened{};
    if (!file.open(path, &opened)) return set_error(error, opened.status, "%s", opened.message);
    const std::string text = edgert::cli::engine_json(file).dump(2);
    *json = static_cast<char*>(std::malloc(text.size() + 1));
    if (!*json) return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "out of memory");
    std::memcpy(*json, text.c_str(), text.size() + 1);
    return EDGERT_OK;
  });
}

void edgert_builder_free_text(char* text) { std::free(text); }

}  // extern "C"
