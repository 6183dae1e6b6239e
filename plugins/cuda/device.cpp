#include "device.h"

#include "sm_partition.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace edgert::cuda {
namespace {

std::atomic<uint64_t> g_copies{0};

edgert_status fail_with(edgert_error* error, edgert_status status, const char* what, cudaError_t e) {
  if (error) {
    error->status = status;
    std::snprintf(error->message, sizeof error->message, "cuda: %s: %s (%s)", what, cudaGetErrorString(e),
                  cudaGetErrorName(e));
  }
  return status;
}

#define EDGERT_CUDA_TRY(call, status, what)                     \
  do {                                                          \
    cudaError_t e_ = (call);                                    \
    if (e_ != cudaSuccess) return fail_with(error, status, what, e_); \
  } while (0)

struct DeviceFacts {
  bool usable = false;
  bool integrated = false;
  std::string description;
};

// Probed once: cudaGetDeviceCount fails cleanly without a driver (libcudart dlopens libcuda).
const DeviceFacts& facts() {
  static const DeviceFacts f = [] {
    DeviceFacts d;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      return d;
    }
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();
      return d;
    }
    int driver = 0;
    cudaDriverGetVersion(&driver);
    const size_t cudnn = cudnnGetVersion();
    const size_t cublas = cublasLtGetVersion();
    char text[512];
    std::snprintf(text, sizeof text, "%s sm_%d%d driver %d.%d cudnn %zu.%zu.%zu cublasLt %zu.%zu.%zu", prop.name,
                  prop.major, prop.minor, driver / 1000, (driver % 1000) / 10, cudnn / 10000, (cudnn % 10000) / 100,
                  cudnn % 100, cublas / 10000, (cublas % 10000) / 100, cublas % 100);
    d.usable = true;
    d.integrated = prop.integrated != 0;
    d.description = text;
    return d;
  }();
  return f;
}

const char* describe() { return facts().description.c_str(); }

edgert_status allocate(edgert_memory_space space, size_t bytes, void** pointer, edgert_error* error) {
  *pointer = nullptr;
  if (bytes == 0) bytes = 256;
  if (space == EDGERT_MEMORY_DEVICE) {
    EDGERT_CUDA_TRY(cudaMalloc(pointer, bytes), EDGERT_ERR_OUT_OF_MEMORY, "cudaMalloc");
    return EDGERT_OK;
  }
  if (space == EDGERT_MEMORY_UNIFIED) {
    // Mapped pinned memory: with unified addressing the device pointer is the host pointer.
    EDGERT_CUDA_TRY(cudaHostAlloc(pointer, bytes, cudaHostAllocMapped), EDGERT_ERR_OUT_OF_MEMORY, "cudaHostAlloc");
    return EDGERT_OK;
  }
  if (error) {
    error->status = EDGERT_ERR_INVALID_ARGUMENT;
    std::snprintf(error->message, sizeof error->message, "cuda: cannot allocate memory space %d", static_cast<int>(space));
  }
  return EDGERT_ERR_INVALID_ARGUMENT;
}

void free_memory(edgert_memory_space space, void* pointer) {
  if (!pointer) return;
  if (space == EDGERT_MEMORY_DEVICE) cudaFree(pointer);
  else if (space == EDGERT_MEMORY_UNIFIED) cudaFreeHost(pointer);
}

edgert_status stream_create(void** stream, edgert_error* error) {
  cudaStream_t s = nullptr;
  EDGERT_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), EDGERT_ERR_PLUGIN, "cudaStreamCreate");
  *stream = s;
  return EDGERT_OK;
}

// edgert priorities grow with urgency; CUDA's shrink (its greatest priority is the most
// negative), within the range the device reports.
edgert_status stream_create_with_priority(int32_t priority, void** stream, edgert_error* error) {
  return stream_create_partitioned(priority, 100, stream, error);
}

edgert_status memory_info(uint64_t* free_bytes, uint64_t* total_bytes, edgert_error* error) {
  size_t free_now = 0, total = 0;
  EDGERT_CUDA_TRY(cudaMemGetInfo(&free_now, &total), EDGERT_ERR_PLUGIN, "cudaMemGetInfo");
  *free_bytes = free_now;
  *total_bytes = total;
  return EDGERT_OK;
}

void stream_destroy(void* stream) {
  if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

edgert_status synchronize(void* stream, edgert_error* error) {
  EDGERT_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), EDGERT_ERR_PLUGIN,
                  "a kernel or copy on the stream failed");
  return EDGERT_OK;
}

edgert_status copy(void* destination, edgert_memory_space, const void* source, edgert_memory_space, size_t bytes,
                   void* stream, edgert_error* error) {
  if (bytes == 0) return EDGERT_OK;
  // Unified addressing: cudaMemcpyDefault tells the direction from the pointers.
  EDGERT_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                  EDGERT_ERR_PLUGIN, "cudaMemcpyAsync");
  g_copies.fetch_add(1, std::memory_order_relaxed);
  return EDGERT_OK;
}

uint64_t copies_made() { return g_copies.load(std::memory_order_relaxed); }

edgert_status graph_begin(void* stream, edgert_error* error) {
  // Relaxed: another thread's unrelated CUDA calls (a second engine loading) must not
  // invalidate this capture.
  EDGERT_CUDA_TRY(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed),
                  EDGERT_ERR_PLUGIN, "cudaStreamBeginCapture");
  return EDGERT_OK;
}

edgert_status graph_end(void* stream, void** graph, edgert_error* error) {
  cudaGraph_t g = nullptr;
  EDGERT_CUDA_TRY(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &g), EDGERT_ERR_PLUGIN,
                  "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) return fail_with(error, EDGERT_ERR_PLUGIN, "cudaGraphInstantiate", e);
  *graph = exec;
  return EDGERT_OK;
}

edgert_status graph_launch(void* graph, void* stream, edgert_error* error) {
  EDGERT_CUDA_TRY(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)),
                  EDGERT_ERR_PLUGIN, "cudaGraphLaunch");
  return EDGERT_OK;
}

void graph_free(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

edgert_status timer_create(void** timer, edgert_error* error) {
  cudaEvent_t e = nullptr;
  EDGERT_CUDA_TRY(cudaEventCreate(&e), EDGERT_ERR_PLUGIN, "cudaEventCreate");
  *timer = e;
  return EDGERT_OK;
}

edgert_status timer_record(void* timer, void* stream, edgert_error* error) {
  EDGERT_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(timer), static_cast<cudaStream_t>(stream)),
                  EDGERT_ERR_PLUGIN, "cudaEventRecord");
  return EDGERT_OK;
}

edgert_status timer_elapsed(void* start, void* end, float* milliseconds, edgert_error* error) {
  EDGERT_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(end)), EDGERT_ERR_PLUGIN, "cudaEventSynchronize");
  EDGERT_CUDA_TRY(cudaEventElapsedTime(milliseconds, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
                  EDGERT_ERR_PLUGIN, "cudaEventElapsedTime");
  return EDGERT_OK;
}

void timer_free(void* timer) {
  if (timer) cudaEventDestroy(static_cast<cudaEvent_t>(timer));
}

}  // namespace

int32_t device_score() { return facts().usable ? 10 : 0; }

const edgert_device* device_table() {
  static const edgert_device table = [] {
    edgert_device d{};
    d.struct_size = sizeof(edgert_device);
    d.kernel_space = EDGERT_MEMORY_DEVICE;
    d.integrated = facts().integrated ? 1 : 0;
    d.describe = describe;
    d.allocate = allocate;
    d.free = free_memory;
    d.stream_create = stream_create;
    d.stream_destroy = stream_destroy;
    d.synchronize = synchronize;
    d.copy = copy;
    d.copies_made = copies_made;
    d.graph_begin = graph_begin;
    d.graph_end = graph_end;
    d.graph_launch = graph_launch;
    d.graph_free = graph_free;
    d.timer_create = timer_create;
    d.timer_record = timer_record;
    d.timer_elapsed = timer_elapsed;
    d.timer_free = timer_free;
    d.stream_create_with_priority = stream_create_with_priority;
    d.memory_info = memory_info;
    d.stream_create_partitioned = stream_create_partitioned;
    return d;
  }();
  return &table;
}

}  // namespace edgert::cuda
