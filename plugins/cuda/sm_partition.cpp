#include "sm_partition.h"

#include "op_support.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace edgert::cuda {
namespace {

#if CUDA_VERSION >= 12040
// The driver's green-context entry points, looked up through the runtime: the plugin links no
// libcuda of its own (it loads where the runtime finds a driver, and refuses cleanly where not).
struct GreenContextApi {
  decltype(&cuDeviceGetDevResource) get_resource = nullptr;
  decltype(&cuDevSmResourceSplitByCount) split = nullptr;
  decltype(&cuDevResourceGenerateDesc) describe = nullptr;
  decltype(&cuGreenCtxCreate) create = nullptr;
  decltype(&cuGreenCtxStreamCreate) stream_create = nullptr;
  std::string missing;  // why not, when a symbol was not found
  bool complete() const { return missing.empty(); }

  // The symbol as the headers this plugin was built with declare it (CUDA_VERSION): a driver
  // older than that answers "version not sufficient" rather than an entry of another ABI.
  // Else the driver library's exported symbol (the ABI it was introduced with, which these
  // structs extend only at their end).
  template <typename Fn>
  void look_up(const char* symbol, Fn* fn) {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &address, CUDA_VERSION, cudaEnableDefault, &found);
    if (!(e == cudaSuccess && found == cudaDriverEntryPointSuccess && address)) {
      void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      address = driver ? dlsym(driver, symbol) : nullptr;
      if (driver) dlclose(driver);
    }
    if (address) {
      *fn = reinterpret_cast<Fn>(address);
    } else if (missing.empty()) {
      const std::string why = e != cudaSuccess ? std::string(": ") + cudaGetErrorString(e)
                              : found == cudaDriverEntryPointVersionNotSufficent ? " needs a newer driver"
                                                                                 : " not in the driver";
      missing = symbol + why;
    }
  }
};

const GreenContextApi& api() {
  static const GreenContextApi table = [] {
    GreenContextApi t;
    t.look_up("cuDeviceGetDevResource", &t.get_resource);
    t.look_up("cuDevSmResourceSplitByCount", &t.split);
    t.look_up("cuDevResourceGenerateDesc", &t.describe);
    t.look_up("cuGreenCtxCreate", &t.create);
    t.look_up("cuGreenCtxStreamCreate", &t.stream_create);
    return t;
  }();
  return table;
}

#define EDGERT_CU_TRY(call, what)                                                                          \
  do {                                                                                                     \
    CUresult r_ = (call);                                                                                  \
    if (r_ != CUDA_SUCCESS)                                                                               \
      return plugin::set_error(error, EDGERT_ERR_PLUGIN, "cuda: %s failed (CUresult %d)", what, r_);     \
  } while (0)

// The green context of `sm_count` SMs (as the split rounds it) on `device`, made once.
edgert_status green_context(CUdevice device, unsigned sm_count, CUgreenCtx* context, edgert_error* error) {
  static std::mutex mutex;
  static std::map<std::pair<int, unsigned>, CUgreenCtx> made;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = made.find({static_cast<int>(device), sm_count});
  if (it != made.end()) {
    *context = it->second;
    return EDGERT_OK;
  }
  CUdevResource all{};
  EDGERT_CU_TRY(api().get_resource(device, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  CUdevResource part{}, rest{};
  unsigned groups = 1;
  EDGERT_CU_TRY(api().split(&part, &groups, &all, &rest, 0, sm_count), "cuDevSmResourceSplitByCount");
  if (groups < 1)
    return plugin::set_error(error, EDGERT_ERR_UNSUPPORTED, "cuda: no partition of %u of the device's %u SMs", sm_count,
                all.sm.smCount);
  CUdevResourceDesc desc = nullptr;
  EDGERT_CU_TRY(api().describe(&desc, &part, 1), "cuDevResourceGenerateDesc");
  EDGERT_CU_TRY(api().create(context, desc, device, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
  made[{static_cast<int>(device), sm_count}] = *context;
  return EDGERT_OK;
}
#endif

}  // namespace

edgert_status cuda_stream_priority(int32_t priority, int* cuda_priority, edgert_error* error) {
  int least = 0, greatest = 0;
  const cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (e != cudaSuccess)
    return plugin::set_error(error, EDGERT_ERR_PLUGIN, "cuda: cudaDeviceGetStreamPriorityRange: %s",
                             cudaGetErrorString(e));
  *cuda_priority = std::clamp(-priority, greatest, least);
  return EDGERT_OK;
}

edgert_status stream_create_partitioned(int32_t priority, int32_t sm_percent, void** stream, edgert_error* error) {
  if (sm_percent < 1 || sm_percent > 100)
    return plugin::set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "cuda: the share of SMs must be 1-100 percent, got %d",
                             sm_percent);
  int cuda_priority = 0;
  if (edgert_status s = cuda_stream_priority(priority, &cuda_priority, error)) return s;
  if (sm_percent == 100) {
    cudaStream_t s = nullptr;
    const cudaError_t e = cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, cuda_priority);
    if (e != cudaSuccess)
      return plugin::set_error(error, EDGERT_ERR_PLUGIN, "cuda: cudaStreamCreateWithPriority: %s",
                               cudaGetErrorString(e));
    *stream = s;
    return EDGERT_OK;
  }
#if CUDA_VERSION >= 12040
  if (!api().complete())
    return plugin::set_error(error, EDGERT_ERR_UNSUPPORTED,
                             "cuda: no green contexts (CUDA 12.4 and later) to confine a stream to %d%% of the SMs: %s",
                             sm_percent, api().missing.c_str());
  int ordinal = 0, sm_total = 0;
  if (cudaGetDevice(&ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_total, cudaDevAttrMultiProcessorCount, ordinal) != cudaSuccess ||
      cudaFree(nullptr) != cudaSuccess)
    return plugin::set_error(error, EDGERT_ERR_PLUGIN, "cuda: no usable current device (%d)", ordinal);
  const unsigned wanted = static_cast<unsigned>(std::max(1, (sm_total * sm_percent + 99) / 100));
  CUgreenCtx green = nullptr;
  // A CUdevice is the runtime's device ordinal.
  if (edgert_status s = green_context(static_cast<CUdevice>(ordinal), wanted, &green, error)) return s;
  CUstream s = nullptr;
  EDGERT_CU_TRY(api().stream_create(&s, green, CU_STREAM_NON_BLOCKING, cuda_priority), "cuGreenCtxStreamCreate");
  *stream = s;
  return EDGERT_OK;
#else
  return plugin::set_error(error, EDGERT_ERR_UNSUPPORTED,
                           "cuda: built with CUDA before 12.4: no green contexts to confine a stream to %d%% of "
                           "the SMs",
                           sm_percent);
#endif
}

}  // namespace edgert::cuda
