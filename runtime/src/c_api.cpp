// The C API (edgert.h) over LoadedEngine and ExecutionContext. No exception leaves this file.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>

#include "edgert/edgert.h"
#include "error.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "plugin_loader.h"

struct edgert_engine {
  std::unique_ptr<edgert::LoadedEngine> engine;
};

struct edgert_context {
  std::unique_ptr<edgert::ExecutionContext> context;
};

using edgert::set_error;

namespace {

template <typename Fn>
edgert_status guarded(edgert_error* error, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(error, EDGERT_ERR_INTERNAL, "internal error: %s", e.what());
  }
}

}  // namespace

extern "C" {

const char* edgert_version(void) { return EDGERT_VERSION; }

const char* edgert_status_string(edgert_status status) {
  // A C caller may pass any int: read it as one, since loading an enum holding a value outside
  // its enumerators' range is undefined behaviour in C++ (UBSan's -fsanitize=enum reports it).
  int code = 0;
  std::memcpy(&code, &status, sizeof code);
  return edgert::status_code_name(code);
}

edgert_status edgert_engine_load(const char* path, const edgert_load_options* options, edgert_engine** engine,
                                 edgert_error* error) {
  if (!path || !engine) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "path and engine must not be NULL");
  *engine = nullptr;
  return guarded(error, [&] {
    edgert_load_options effective;
    edgert_load_options_init(&effective);
    if (options) {
      if (options->struct_size < sizeof(uint32_t) + sizeof(const char*))
        return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "edgert_load_options.struct_size is not set");
      // A caller compiled against an older edgert.h has a shorter struct: copy what it has.
      std::memcpy(&effective, options, std::min<size_t>(options->struct_size, sizeof effective));
      effective.struct_size = sizeof effective;
    }
    if (effective.num_threads != 0 || effective.pin_threads != 0) {
      edgert_status status = edgert::configure_plugins(effective.num_threads, effective.pin_threads, error);
      if (status != EDGERT_OK) return status;
    }
    auto loaded = edgert::LoadedEngine::load(path, effective, error);
    if (!loaded) return error ? error->status : EDGERT_ERR_FORMAT;
    *engine = new edgert_engine{std::move(loaded)};
    return EDGERT_OK;
  });
}

void edgert_engine_release(edgert_engine* engine) { delete engine; }

int32_t edgert_engine_num_inputs(const edgert_engine* engine) {
  if (!engine) return -1;
  return static_cast<int32_t>(engine->engine->input_tensors().size());
}

int32_t edgert_engine_num_outputs(const edgert_engine* engine) {
  if (!engine) return -1;
  return static_cast<int32_t>(engine->engine->output_tensors().size());
}

edgert_status edgert_engine_input_info(const edgert_engine* engine, int32_t index, edgert_tensor_info* info) {
  if (!engine || !info) return EDGERT_ERR_INVALID_ARGUMENT;
  const auto& e = *engine->engine;
  if (index < 0 || index >= static_cast<int32_t>(e.input_tensors().size())) return EDGERT_ERR_INVALID_ARGUMENT;
  edgert::fill_tensor_info(e.main_graph().tensors[e.input_tensors()[index]], e.input_names()[index], info);
  return EDGERT_OK;
}

edgert_status edgert_engine_output_info(const edgert_engine* engine, int32_t index, edgert_tensor_info* info) {
  if (!engine || !info) return EDGERT_ERR_INVALID_ARGUMENT;
  const auto& e = *engine->engine;
  if (index < 0 || index >= static_cast<int32_t>(e.output_tensors().size())) return EDGERT_ERR_INVALID_ARGUMENT;
  edgert::fill_tensor_info(e.main_graph().tensors[e.output_tensors()[index]], e.output_names()[index], info);
  return EDGERT_OK;
}

const char* edgert_engine_board(const edgert_engine* engine) { return engine ? engine->engine->board().c_str() : nullptr; }

edgert_status edgert_context_create(const edgert_engine* engine, edgert_context** context, edgert_error* error) {
  if (!engine || !context) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "engine and context must not be NULL");
  return guarded(error, [&] {
    *context = new edgert_context{std::make_unique<edgert::ExecutionContext>(*engine->engine)};
    return EDGERT_OK;
  });
}

void edgert_context_release(edgert_context* context) { delete context; }

edgert_status edgert_context_run(edgert_context* context, const edgert_tensor* inputs, int32_t num_inputs,
                                 edgert_error* error) {
  if (!context || (num_inputs > 0 && !inputs))
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context and inputs must not be NULL");
  return guarded(error, [&] { return context->context->run(inputs, num_inputs, error); });
}

edgert_status edgert_context_output(const edgert_context* context, int32_t index, edgert_tensor* output) {
  if (!context || !output) return EDGERT_ERR_INVALID_ARGUMENT;
  if (index < 0 || index >= static_cast<int32_t>(context->context->engine().output_tensors().size()))
    return EDGERT_ERR_INVALID_ARGUMENT;
  *output = context->context->output(index);
  return EDGERT_OK;
}

edgert_status edgert_context_bind_input(edgert_context* context, int32_t index, const edgert_tensor* tensor,
                                        edgert_memory_space space, edgert_error* error) {
  if (!context || !tensor) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context and tensor must not be NULL");
  return guarded(error, [&] { return context->context->bind_input(index, *tensor, space, error); });
}

edgert_status edgert_context_bind_output(edgert_context* context, int32_t index, void* data, size_t capacity,
                                         edgert_memory_space space, edgert_error* error) {
  if (!context) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context must not be NULL");
  return guarded(error, [&] { return context->context->bind_output(index, data, capacity, space, error); });
}

edgert_status edgert_context_enqueue(edgert_context* context, void* stream, edgert_error* error) {
  if (!context) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context must not be NULL");
  return guarded(error, [&] { return context->context->enqueue(stream, error); });
}

edgert_status edgert_context_synchronize(edgert_context* context, edgert_error* error) {
  if (!context) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context must not be NULL");
  return guarded(error, [&] { return context->context->synchronize(error); });
}

void edgert_context_set_cuda_graphs(edgert_context* context, int32_t enabled) {
  if (context) context->context->set_cuda_graphs(enabled != 0);
}

edgert_status edgert_engine_allocate(const edgert_engine* engine, edgert_memory_space space, size_t bytes, void** data,
                                     edgert_error* error) {
  if (!engine || !data) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "engine and data must not be NULL");
  *data = nullptr;
  const edgert_device* device = engine->engine->device();
  if (!device) return set_error(error, EDGERT_ERR_UNSUPPORTED, "the engine has no device plugin to allocate with");
  if (space != EDGERT_MEMORY_DEVICE && space != EDGERT_MEMORY_UNIFIED)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "edgert_engine_allocate makes device or unified memory");
  return device->allocate(space, bytes, data, error);
}

void edgert_engine_free(const edgert_engine* engine, edgert_memory_space space, void* data) {
  if (engine && data && engine->engine->device()) engine->engine->device()->free(space, data);
}

namespace {

// The device table of plugin `name` when it has a usable device here; else null and `error`.
const edgert_device* usable_device(const char* plugin_path, const char* name, edgert_error* error) {
  if (!name) {
    set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "the device plugin's name must not be NULL");
    return nullptr;
  }
  const edgert::LoadedPlugin* plugin = edgert::load_plugin(name, edgert::plugin_search_path(plugin_path), error);
  if (!plugin) return nullptr;
  if (!plugin->table->device || (plugin->table->score && plugin->table->score() <= 0)) {
    set_error(error, EDGERT_ERR_UNSUPPORTED, "plugin %s has no usable device on this machine", name);
    return nullptr;
  }
  return plugin->table->device;
}

}  // namespace

edgert_status edgert_device_allocate(const char* plugin_path, const char* plugin, edgert_memory_space space,
                                     size_t bytes, void** data, edgert_error* error) {
  if (!data) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "data must not be NULL");
  *data = nullptr;
  if (space != EDGERT_MEMORY_DEVICE && space != EDGERT_MEMORY_UNIFIED)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "edgert_device_allocate makes device or unified memory");
  const edgert_device* device = usable_device(plugin_path, plugin, error);
  if (!device) return error ? error->status : EDGERT_ERR_UNSUPPORTED;
  return device->allocate(space, bytes, data, error);
}

void edgert_device_free(const char* plugin_path, const char* plugin, edgert_memory_space space, void* data) {
  edgert_error ignored{};
  if (!data) return;
  if (const edgert_device* device = usable_device(plugin_path, plugin, &ignored)) device->free(space, data);
}

edgert_status edgert_device_memory_info(const char* plugin_path, const char* plugin, uint64_t* free_bytes,
                                        uint64_t* total_bytes, edgert_error* error) {
  if (!free_bytes || !total_bytes) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "free_bytes and total_bytes must not be NULL");
  const edgert_device* device = usable_device(plugin_path, plugin, error);
  if (!device) return error ? error->status : EDGERT_ERR_UNSUPPORTED;
  if (!EDGERT_DEVICE_HAS(device, memory_info))
    return set_error(error, EDGERT_ERR_UNSUPPORTED, "plugin %s does not report its device memory", plugin);
  return device->memory_info(free_bytes, total_bytes, error);
}

void edgert_context_set_device_timing(edgert_context* context, int32_t enabled) {
  if (context) context->context->set_device_timing(enabled != 0);
}

double edgert_context_device_ms(const edgert_context* context) {
  if (!context || !context->context->engine().device() || !context->context->device_timing()) return -1;
  return context->context->device_ms();
}

edgert_status edgert_context_set_priority(edgert_context* context, int32_t priority, edgert_error* error) {
  if (!context) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context must not be NULL");
  return context->context->set_priority(priority, error);
}

edgert_status edgert_context_set_gpu_share(edgert_context* context, int32_t percent, edgert_error* error) {
  if (!context) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "context must not be NULL");
  return context->context->set_gpu_share(percent, error);
}

uint64_t edgert_context_device_copies(const edgert_context* context) {
  return context ? context->context->device_copies() : 0;
}

uint64_t edgert_engine_device_copies(const edgert_engine* engine) {
  return engine && engine->engine->device() ? engine->engine->device()->copies_made() : 0;
}

}  // extern "C"
