/*
 * libedgert: load a verified engine file and run it.
 *
 *   edgert_engine   an engine file mapped read-only and verified, with its plugins resolved.
 *                   Immutable after load; share it between threads.
 *   edgert_context  the mutable state of one run at a time (activations, kernel state). One per
 *                   thread that runs the engine, like TensorRT's execution context.
 *
 * Every call returns an edgert_status; on failure the edgert_error passed in (may be NULL)
 * receives a message that says what failed and where (file, node, tensor, expected vs found).
 */
#ifndef EDGERT_EDGERT_H
#define EDGERT_EDGERT_H

#include "edgert/plugin.h"
#include "edgert/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct edgert_engine edgert_engine;
typedef struct edgert_context edgert_context;

typedef struct edgert_load_options {
  uint32_t struct_size;        /* sizeof(edgert_load_options): lets later versions append fields */
  const char* plugin_path;     /* colon-separated directories; NULL: $EDGERT_PLUGIN_PATH, then the
                                  directory next to libedgert, then the install directory */
  const char* expected_board;  /* board profile name this machine is; NULL: check hardware only */
  int32_t allow_board_mismatch;/* 1: load an engine built for another board (experts only) */
  /* Kernel threads (appended; read only when struct_size covers them). Process-wide: every
   * loaded plugin's configure() receives them, later loads too. 0 and 0 leave the current
   * settings alone (each plugin's default until someone sets them); num_threads counts the
   * calling thread. Do not change them while another engine of the process is running. */
  int32_t num_threads;         /* threads a kernel may use; 0: unchanged / the plugin's default */
  int32_t pin_threads;         /* 1: pin worker i to the i-th CPU of the process's affinity mask */
  /* (appended) What a refusal calls this machine when expected_board is NULL, e.g. the board
   * profile `edgert build --board native` picks here; NULL: the runtime's own name for what it
   * detects ("native-x86_64-avx512"). Only used in messages; borrowed for the call. */
  const char* host_board;
} edgert_load_options;

/* Describes an engine input or output. `name` and `dim_names` point into the engine and live
 * as long as it. A dynamic dimension has dims[i] == -1 and usually a name. */
typedef struct edgert_tensor_info {
  const char* name;
  edgert_dtype dtype;
  int32_t rank;
  int64_t dims[EDGERT_MAX_RANK];
  const char* dim_names[EDGERT_MAX_RANK];
} edgert_tensor_info;

EDGERT_API const char* edgert_version(void);
EDGERT_API const char* edgert_status_string(edgert_status status);

EDGERT_API void edgert_load_options_init(edgert_load_options* options); /* NULL: does nothing */

/* Maps and verifies `path`, loads the plugins it names. On success *engine owns the mapping;
 * free it with edgert_engine_release after every context made from it is released. */
EDGERT_API edgert_status edgert_engine_load(const char* path, const edgert_load_options* options,
                                 edgert_engine** engine, edgert_error* error);
EDGERT_API void edgert_engine_release(edgert_engine* engine);

/* The engine's IO. A NULL engine has -1 inputs and outputs; an info call with a NULL engine or
 * info, or an index out of range, returns EDGERT_ERR_INVALID_ARGUMENT and leaves info alone. */
EDGERT_API int32_t edgert_engine_num_inputs(const edgert_engine* engine);
EDGERT_API int32_t edgert_engine_num_outputs(const edgert_engine* engine);
EDGERT_API edgert_status edgert_engine_input_info(const edgert_engine* engine, int32_t index,
                                       edgert_tensor_info* info);
EDGERT_API edgert_status edgert_engine_output_info(const edgert_engine* engine, int32_t index,
                                        edgert_tensor_info* info);
/* Board profile name the engine was built for; lives as long as the engine. NULL for a NULL engine. */
EDGERT_API const char* edgert_engine_board(const edgert_engine* engine);

EDGERT_API edgert_status edgert_context_create(const edgert_engine* engine, edgert_context** context,
                                    edgert_error* error);
EDGERT_API void edgert_context_release(edgert_context* context);

/* Runs the engine once. `inputs` holds one tensor per engine input, in engine order; their data
 * is borrowed for the duration of the call. Shapes may differ between runs. */
EDGERT_API edgert_status edgert_context_run(edgert_context* context, const edgert_tensor* inputs,
                                 int32_t num_inputs, edgert_error* error);

/* The output `index` of the last successful run. Its data belongs to the context and stays
 * valid until the next run or the context's release. After edgert_context_run it is host
 * memory; after edgert_context_enqueue it is where the output was written (its binding, or
 * device memory of the context for an output left unbound). */
EDGERT_API edgert_status edgert_context_output(const edgert_context* context, int32_t index,
                                    edgert_tensor* output);

/*
 * Devices (engines built with a device plugin, e.g. the CUDA plugin), as TensorRT's
 * setTensorAddress + enqueueV3: bind inputs and outputs to memory the caller owns, then enqueue
 * on a stream. Memory is HOST (ordinary), DEVICE (the device's own) or UNIFIED (host memory
 * mapped for the device; edgert_engine_allocate makes both kinds with the device plugin's
 * allocator). Bound memory the engine's kernels reach directly (device or unified memory for
 * device kernels, host or unified for host kernels) is read and written in place: no copies.
 */

/* Binds engine input `index`: dtype, shape and data of `tensor`, memory of kind `space`. The
 * data is borrowed until the enqueued run that reads it has finished. */
EDGERT_API edgert_status edgert_context_bind_input(edgert_context* context, int32_t index, const edgert_tensor* tensor,
                                                   edgert_memory_space space, edgert_error* error);
/* Binds engine output `index` to `capacity` bytes at `data` (NULL unbinds). */
EDGERT_API edgert_status edgert_context_bind_output(edgert_context* context, int32_t index, void* data, size_t capacity,
                                                    edgert_memory_space space, edgert_error* error);
/* Enqueues a run with the bound tensors on `stream` (the device's stream, e.g. a cudaStream_t;
 * NULL: the context's own) and returns; an engine without device kernels runs before returning.
 * Wait with edgert_context_synchronize before reading outputs or reusing inputs. */
EDGERT_API edgert_status edgert_context_enqueue(edgert_context* context, void* stream, edgert_error* error);
EDGERT_API edgert_status edgert_context_synchronize(edgert_context* context, edgert_error* error);
/* Whether runs may be captured into a CUDA graph and replayed (default 1; see execution_context.h). */
EDGERT_API void edgert_context_set_cuda_graphs(edgert_context* context, int32_t enabled);
/* Priority of the context's own stream on its device: larger is scheduled first (0, the
 * default, is the device's lowest), so a latency-critical pipeline's kernels go ahead of a
 * background one's on a shared GPU. Clamped to what the device offers; no effect without one. */
EDGERT_API edgert_status edgert_context_set_priority(edgert_context* context, int32_t priority, edgert_error* error);
/* Share of the device's multiprocessors the context's kernels may use, 1-100 percent (100, the
 * default: all). A spatial partition (CUDA green contexts): a heavy, low-priority pipeline
 * confined to part of the GPU cannot hold back the kernels of those beside it, which priorities
 * alone only reorder. EDGERT_ERR_UNSUPPORTED where the device cannot partition; no effect on
 * a host-only engine. Applies from the next run. */
EDGERT_API edgert_status edgert_context_set_gpu_share(edgert_context* context, int32_t percent, edgert_error* error);
/* Device timing: with `enabled`, each run records device timers at its start and end on the
 * stream; edgert_context_device_ms gives the last run's device time in milliseconds (what
 * `edgert bench` reports as GPU compute). -1 without a device, with timing off, or where host
 * kernels between device ones waited for the device (their time would count as the device's). */
EDGERT_API void edgert_context_set_device_timing(edgert_context* context, int32_t enabled);
EDGERT_API double edgert_context_device_ms(const edgert_context* context);
/* Copies between memory spaces the context's runs have made (staged inputs, host outputs, copy
 * nodes between host and device kernels; a replayed CUDA graph counts those captured in it):
 * per-pipeline, where edgert_engine_device_copies counts the whole process's. */
EDGERT_API uint64_t edgert_context_device_copies(const edgert_context* context);

/* Memory of the engine's device (DEVICE or UNIFIED); fails with EDGERT_ERR_UNSUPPORTED for an
 * engine without one. Free with edgert_engine_free before the engine is released. */
EDGERT_API edgert_status edgert_engine_allocate(const edgert_engine* engine, edgert_memory_space space, size_t bytes,
                                                void** data, edgert_error* error);
EDGERT_API void edgert_engine_free(const edgert_engine* engine, edgert_memory_space space, void* data);
/* The same allocators without an engine, for buffers that outlive engines (a camera's capture
 * buffers across hot swaps): `plugin` names the device plugin ("cuda"), searched on
 * `plugin_path` (NULL: as edgert_load_options.plugin_path). Fails with EDGERT_ERR_UNSUPPORTED
 * where the plugin has no usable device. Plugins stay loaded for the process, so such memory
 * may be freed at any time, with the same plugin and space. */
EDGERT_API edgert_status edgert_device_allocate(const char* plugin_path, const char* plugin, edgert_memory_space space,
                                                size_t bytes, void** data, edgert_error* error);
EDGERT_API void edgert_device_free(const char* plugin_path, const char* plugin, edgert_memory_space space, void* data);
/* DEVICE memory of that plugin's device free and in total now (a discrete GPU's own memory). */
EDGERT_API edgert_status edgert_device_memory_info(const char* plugin_path, const char* plugin, uint64_t* free_bytes,
                                                   uint64_t* total_bytes, edgert_error* error);
/* Copies the engine's device plugin has made since the process started (0 without one): what
 * zero-copy tests count. */
EDGERT_API uint64_t edgert_engine_device_copies(const edgert_engine* engine);

#ifdef __cplusplus
}
#endif

#endif /* EDGERT_EDGERT_H */
