/*
 * The plugin ABI: how op kernels reach the runtime and the builder.
 *
 * A plugin is a shared library exporting one symbol, EDGERT_PLUGIN_ENTRY_SYMBOL, a function
 * returning a pointer to a static edgert_plugin table. The loader checks `abi_version` before
 * reading anything else, so the first field never moves.
 *
 * Kernel lifecycle, per node:
 *   supports(node)             builder: can this kernel run this node at all?
 *   tactics(node, ...)         builder: the candidate implementations it should time
 *   prepare(node, tactic, ...) builder and runtime: validate, infer output dtypes and shapes,
 *                              size the workspace, build per-node state. Called again whenever
 *                              input shapes change, and before every execute when it reported
 *                              data_dependent. May allocate, synchronize and block.
 *   execute(state, ..., stream) runtime: compute. No allocation, no I/O, no logging, and on a
 *                              device no synchronization: work is enqueued on `stream`.
 *   release(state)             free what prepare built.
 *
 * Devices and memory (ABI 3). Every tensor lives in one memory space:
 *   HOST     ordinary host memory; what CPU kernels read and write.
 *   DEVICE   a device's own memory (cudaMalloc); only that device's kernels and copies touch it.
 *   UNIFIED  host memory mapped for the device (cudaHostAlloc with cudaHostAllocMapped): host
 *            and device address it with the same pointer. On a board whose GPU shares the
 *            CPU's DRAM (Jetson) it is as fast for the GPU as DEVICE memory, so tensors that
 *            cross between CPU and GPU kernels live there and nothing is copied: after a stream
 *            synchronization a CPU kernel reads what a GPU kernel wrote. On a discrete GPU it
 *            crosses PCIe, so it serves engine inputs and outputs the caller binds
 *            (zero-copy), and the builder puts copies between DEVICE and HOST tensors instead.
 * A plugin without a `device` (the CPU plugin) runs its kernels on HOST tensors. A plugin with
 * one (the CUDA plugin) runs them on tensors in `device->kernel_space`, and brings the rest of
 * what the runtime needs for that space, so the runtime never links CUDA: the allocator (as
 * ggml's buffer types and ONNX Runtime's execution-provider allocators), asynchronous copies
 * between any two spaces (ONNX Runtime's data transfer), streams, graph capture and timers.
 * The design follows TensorRT's enqueueV3: the caller owns the stream and may bind engine
 * inputs and outputs to its own memory; the runtime plans every activation in one arena per
 * space; kernels only enqueue work on the stream they are given. Because execute neither
 * allocates nor synchronizes, a run whose kernels all carry EDGERT_KERNEL_CAPTURABLE can be
 * recorded once as a CUDA graph and replayed.
 *
 * What a device kernel receives: its activations and workspace in kernel_space; the engine's
 * constants (weights) in kernel_space too, copied there once per engine; except the inputs its
 * `host_inputs` mask names (shape-like operands such as Reshape's shape or Slice's starts),
 * which it reads on the host in prepare and which therefore arrive in host memory. Builders
 * hand prepare host pointers for constants and NULL for activations, as for any kernel.
 *
 * Prepared weights in the engine (ABI 5). Kernels turn constant weights into the layout their
 * tactic reads (GEMM panels, Winograd-transformed filters) in prepare. Done at every load, that
 * costs time and, worse on a board, private memory beside the mapped originals. As TensorRT's
 * plans hold prepared weights, a kernel may export that state at build time (export_prepared);
 * the builder stores the bytes in the engine's weights section and the runtime hands them back
 * to prepare as node->prepared, mapped from the file: shared between processes, clean pages the
 * kernel borrows instead of packing. The bytes are the kernel's own format; it checks they are
 * what it would build (its tactic, the shapes of what it packed) and packs itself when not,
 * so an engine whose stored state does not fit still runs, only without the saving. They come
 * from a verified engine, but a kernel must still bounds-check them as it would any input.
 *
 * Nothing here throws; every failure is a status plus a message in the edgert_error passed in.
 */
#ifndef EDGERT_PLUGIN_H
#define EDGERT_PLUGIN_H

#include "edgert/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change to the structs below; a loader refuses any other value. */
#define EDGERT_PLUGIN_ABI_VERSION 5u
#define EDGERT_PLUGIN_ENTRY_SYMBOL "edgert_plugin_entry"

typedef enum edgert_attr_type {
  EDGERT_ATTR_UNDEFINED = 0,
  EDGERT_ATTR_FLOAT = 1,
  EDGERT_ATTR_INT = 2,
  EDGERT_ATTR_STRING = 3,
  EDGERT_ATTR_TENSOR = 4,
  EDGERT_ATTR_GRAPH = 5,
  EDGERT_ATTR_FLOATS = 6,
  EDGERT_ATTR_INTS = 7,
  EDGERT_ATTR_STRINGS = 8
} edgert_attr_type;

/*
 * One node attribute. Only the members matching `type` are meaningful. All pointers are
 * borrowed from the engine (or the builder's IR) and stay valid while the node exists.
 */
typedef struct edgert_attribute {
  const char* name;
  edgert_attr_type type;
  int64_t i;
  float f;
  const char* s; /* STRING: bytes, not necessarily NUL-free; length in s_len */
  size_t s_len;
  const int64_t* ints;
  const float* floats;
  const char* const* strings; /* STRINGS: NUL-terminated */
  size_t count;               /* element count of ints / floats / strings */
  const edgert_tensor* tensor; /* TENSOR */
  int32_t graph;               /* GRAPH: index of the subgraph in the engine */
} edgert_attribute;

/*
 * What a kernel sees of a node. Inputs carry dtype and shape; `data` is non-NULL only where
 * the values are known: constants in the builder, everything at run time. A missing optional
 * input has dtype EDGERT_DTYPE_UNDEFINED.
 */
typedef struct edgert_node {
  const char* name;
  const char* domain; /* "" for the default ONNX domain */
  const char* op_type;
  int32_t opset; /* opset version of `domain` the model was written against */
  int32_t num_inputs;
  int32_t num_outputs;
  int32_t num_attributes;
  const edgert_attribute* attributes;
  /* (ABI 5) What the node's kernel exported at build time (export_prepared), 64-byte aligned
   * in the engine's mapping and valid while the node exists; NULL with 0 bytes when the engine
   * holds none (and always in the builder, before export). */
  const void* prepared;
  size_t prepared_bytes;
} edgert_node;

/* A candidate implementation the builder may time; ids are the kernel's own. */
typedef struct edgert_tactic {
  int64_t id;
  const char* name; /* dtype-op-tile-isa, e.g. "f32-conv-im2col-8x8-avx2" */
} edgert_tactic;

/* Filled in by prepare. */
typedef struct edgert_prepare_info {
  size_t workspace_bytes; /* scratch the runtime hands to execute, 64-byte aligned */
  int32_t data_dependent; /* 1: output shapes depend on input values; prepare before every execute */
  /* (ABI 4) Bytes the prepared state holds until release or the next prepare, in the kernel's
   * space: weights packed or transformed for the tactic (GEMM panels, Winograd's U), lookup
   * tables, copies of constants. Not the workspace, not the engine's constants and not the
   * node->prepared bytes it borrows, which all stay in the mapped file. The builder stores it in the engine's footprint, which is all
   * a daemon knows of an engine before loading it: a kernel that keeps memory it does not report
   * here makes edgertd admit engines that do not fit its budget. */
  size_t kernel_state_bytes;
} edgert_prepare_info;

typedef struct edgert_kernel edgert_kernel;

/* Where a tensor's bytes live; see the header comment. */
typedef enum edgert_memory_space {
  EDGERT_MEMORY_HOST = 0,
  EDGERT_MEMORY_DEVICE = 1,
  EDGERT_MEMORY_UNIFIED = 2
} edgert_memory_space;

/* edgert_kernel.flags */
/* execute only enqueues work on its stream (no host-side reads of tensor data, no
 * synchronization, the same work for the same shapes): a run of such kernels can be captured
 * into a CUDA graph and replayed. Host kernels leave it unset. */
#define EDGERT_KERNEL_CAPTURABLE 1u

/*
 * Every function receives the kernel it was reached through as `self`, so one set of functions
 * can serve many kernels through `user_data`.
 *
 * `inputs` holds node->num_inputs tensors and `outputs` node->num_outputs, in the node's order;
 * neither pointer is ever NULL, even for a node without inputs. num_outputs is at least 1: the
 * builder refuses nodes with fewer inputs or outputs than their ONNX schema requires, and the
 * runtime refuses engines with a node without outputs, so a kernel may read the inputs and
 * write the outputs its op always has (optional ones: check num_inputs and the dtype).
 */
struct edgert_kernel {
  const char* domain;  /* ONNX domain this kernel implements ("" = ai.onnx) */
  const char* op_type; /* ONNX op type */
  const char* name;    /* unique within the plugin; the engine records it */

  const void* user_data; /* the plugin's own; the runtime never reads it */

  /*
   * 1 when the kernel can run `node` (attributes, opset, input count), 0 otherwise. Called by
   * the builder, which may not know everything yet: an input dtype it has not inferred is
   * EDGERT_DTYPE_UNDEFINED, an unknown rank is -1, an unknown dimension -1, and data is NULL
   * unless the input is a constant. Refuse only what is known to be unsupported.
   */
  int32_t (*supports)(const edgert_kernel* self, const edgert_node* node,
                      const edgert_tensor* inputs);

  /* Writes up to `capacity` tactics, returns how many exist. NULL means one tactic, id 0. */
  int32_t (*tactics)(const edgert_kernel* self, const edgert_node* node, const edgert_tensor* inputs, edgert_tactic* out,
                     int32_t capacity);

  /*
   * Validates inputs and attributes, writes dtype/rank/dims of every output (data is left
   * alone) and the prepare info. `*state` is NULL on the first call; the kernel may allocate
   * and store state there, and may replace it on later calls. Returns EDGERT_ERR_NEEDS_DATA
   * when an input's values decide output shapes and that input's data is NULL.
   */
  edgert_status (*prepare)(const edgert_kernel* self, const edgert_node* node, int64_t tactic, const edgert_tensor* inputs,
                           edgert_tensor* outputs, void** state, edgert_prepare_info* info,
                           edgert_error* error);

  /*
   * Outputs arrive with dtype, shape and data set as prepare asked; workspace as sized, in the
   * kernel's space. `stream` is the device stream to enqueue on (opaque: a cudaStream_t for
   * the CUDA plugin; NULL for host kernels and the default stream).
   */
  edgert_status (*execute)(const edgert_kernel* self, void* state, const edgert_node* node, const edgert_tensor* inputs,
                           edgert_tensor* outputs, void* workspace, void* stream, edgert_error* error);

  /* Frees what prepare stored in state; called once per non-NULL state. */
  void (*release)(const edgert_kernel* self, void* state);

  uint32_t flags;      /* EDGERT_KERNEL_* bits */
  /* Bit i set: input i is read on the host (in prepare or execute), whatever the kernel's
   * space; the builder keeps such inputs constants or host tensors. */
  uint64_t host_inputs;

  /*
   * (ABI 5) Builder only: the state prepare builds for `node` at `tactic` from its constant
   * inputs, as bytes to store in the engine and hand back to prepare as node->prepared (see the
   * header comment). Sets `*bytes` to the size of that state, 0 when nothing is worth storing;
   * writes it to `buffer` when `capacity` is at least that (call with capacity 0 to size it).
   * Inputs as for prepare, at the shapes the engine is written with; EDGERT_ERR_NEEDS_DATA as
   * from prepare means nothing can be exported. Bit i of `*replaced_inputs`: given these bytes,
   * neither prepare (at any shape) nor execute reads input i, whose values they hold; an engine
   * then keeps that constant out of its footprint when no other node reads it. NULL: nothing
   * to export.
   */
  edgert_status (*export_prepared)(const edgert_kernel* self, const edgert_node* node, int64_t tactic,
                                   const edgert_tensor* inputs, void* buffer, size_t capacity, size_t* bytes,
                                   uint64_t* replaced_inputs, edgert_error* error);
};

/*
 * The device side of a plugin whose kernels run on an accelerator. Every function may be
 * called from any thread; none throws. Pointers it returns stay valid until freed.
 */
typedef struct edgert_device {
  uint32_t struct_size;              /* sizeof(edgert_device) as the plugin knows it */
  edgert_memory_space kernel_space;  /* where its kernels read and write tensors: DEVICE */
  /* 1: the device shares the host's physical memory (Jetson's integrated GPU): UNIFIED memory
   * is as fast for it as DEVICE memory, and tensors crossing to host kernels stay in place. */
  int32_t integrated;
  /* Names the device and the libraries whose kernels it times, e.g. "NVIDIA H100 80GB HBM3 sm_90
   * driver 13.0 cudnn 9.14.0 cublasLt 13.1.0"; keys timing-cache records, so it changes
   * whenever a measured speed could. Valid for the process's life; empty when score() is 0. */
  const char* (*describe)(void);

  /* DEVICE or UNIFIED memory, at least 256-byte aligned; `bytes` 0 gives a valid pointer. */
  edgert_status (*allocate)(edgert_memory_space space, size_t bytes, void** pointer, edgert_error* error);
  void (*free)(edgert_memory_space space, void* pointer);

  /* One stream per execution context. */
  edgert_status (*stream_create)(void** stream, edgert_error* error);
  void (*stream_destroy)(void* stream);
  /* Blocks until everything enqueued on `stream` has finished. */
  edgert_status (*synchronize)(void* stream, edgert_error* error);
  /* Enqueues a copy of `bytes` between any two spaces (the runtime tells which); counted. */
  edgert_status (*copy)(void* destination, edgert_memory_space destination_space, const void* source,
                        edgert_memory_space source_space, size_t bytes, void* stream, edgert_error* error);
  /* Copies enqueued since the process started: tests prove zero-copy paths with it. */
  uint64_t (*copies_made)(void);

  /* Graph capture: begin recording what is enqueued on `stream`, end it into a replayable
   * graph, replay, free. NULL when the device has no graphs. */
  edgert_status (*graph_begin)(void* stream, edgert_error* error);
  edgert_status (*graph_end)(void* stream, void** graph, edgert_error* error);
  edgert_status (*graph_launch)(void* graph, void* stream, edgert_error* error);
  void (*graph_free)(void* graph);

  /* Device-side timing: a timer records a point on a stream; elapsed reads the milliseconds
   * between two recorded points once both have passed (it waits for them). */
  edgert_status (*timer_create)(void** timer, edgert_error* error);
  edgert_status (*timer_record)(void* timer, void* stream, edgert_error* error);
  edgert_status (*timer_elapsed)(void* start, void* end, float* milliseconds, edgert_error* error);
  void (*timer_free)(void* timer);

  /* Appended (a plugin without them has a smaller struct_size; the host checks before use). */
  /* A stream the device schedules ahead of lower priorities' (`priority`: larger is more urgent,
   * 0 the default; clamped to what the device offers): one per pipeline sharing the GPU. */
  edgert_status (*stream_create_with_priority)(int32_t priority, void** stream, edgert_error* error);
  /* DEVICE memory free and in total now. */
  edgert_status (*memory_info)(uint64_t* free_bytes, uint64_t* total_bytes, edgert_error* error);
  /* A stream at `priority` whose kernels run on about `sm_percent` (1-100) of the device's
   * multiprocessors: a spatial partition, so a heavy pipeline leaves the rest to the others
   * (CUDA green contexts). EDGERT_ERR_UNSUPPORTED where the device cannot partition. */
  edgert_status (*stream_create_partitioned)(int32_t priority, int32_t sm_percent, void** stream, edgert_error* error);
} edgert_device;

/* Whether `device` (struct_size as its plugin set it) has the member `field`. */
#define EDGERT_DEVICE_HAS(device, field) \
  ((device)->struct_size >= offsetof(edgert_device, field) + sizeof((device)->field) && (device)->field != NULL)

/* Process-wide settings a host hands a plugin (ABI 2). Appended fields grow struct_size. */
typedef struct edgert_plugin_config {
  uint32_t struct_size; /* sizeof(edgert_plugin_config) as the host knows it */
  int32_t num_threads;  /* threads a kernel may use, the caller's included; 0 = the plugin's default */
  int32_t pin_threads;  /* 1: pin worker i to the i-th CPU of the process's affinity mask */
} edgert_plugin_config;

typedef struct edgert_plugin {
  uint32_t abi_version; /* EDGERT_PLUGIN_ABI_VERSION; must stay the first field */
  const char* name;     /* short name engines refer to: "cpu", "cuda" */
  const char* version;  /* semantic version of the plugin's kernels */
  /* How well the plugin fits this machine: 0 = cannot run here, higher = preferred. */
  int32_t (*score)(void);
  int32_t num_kernels;
  const edgert_kernel* kernels;
  /* Applies process-wide settings; the host calls it before running kernels and again whenever
   * the settings change (never while a kernel runs). May be NULL: nothing to configure. */
  edgert_status (*configure)(const edgert_plugin_config* config, edgert_error* error);
  /* NULL: the kernels run on the host (HOST tensors). Otherwise the device they run on. */
  const edgert_device* device;
} edgert_plugin;

typedef const edgert_plugin* (*edgert_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* EDGERT_PLUGIN_H */
