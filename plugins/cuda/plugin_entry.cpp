// The CUDA plugin's C ABI: the entry symbol, the adapter from edgert_kernel calls to Op objects
// (every C++ exception stops here and becomes a status plus message), and check_cuda.
#include <cstdio>
#include <cstring>
#include <new>

#include "device.h"
#include "kernel_families.h"

namespace edgert::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    fail(EDGERT_ERR_PLUGIN, "%s: %s (%s)", what, cudaGetErrorString(status), cudaGetErrorName(status));
}

void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

namespace {

const KernelSpec& spec_of(const edgert_kernel* self) { return *static_cast<const KernelSpec*>(self->user_data); }

void set_error(edgert_error* error, edgert_status status, const char* message) {
  if (!error) return;
  error->status = status;
  std::snprintf(error->message, sizeof error->message, "%s", message);
}

template <typename Fn>
edgert_status guarded(edgert_error* error, Fn&& fn) {
  try {
    fn();
    return EDGERT_OK;
  } catch (const KernelError& e) {
    set_error(error, e.status(), e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "out of memory");
    return EDGERT_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(error, EDGERT_ERR_INTERNAL, e.what());
    return EDGERT_ERR_INTERNAL;
  }
}

int32_t kernel_supports(const edgert_kernel* self, const edgert_node* node, const edgert_tensor* inputs) {
  const KernelSpec& spec = spec_of(self);
  if (!spec.supports) return 1;
  try {
    return spec.supports(node, inputs);
  } catch (...) {
    return 0;
  }
}

int32_t kernel_tactics(const edgert_kernel* self, const edgert_node* node, const edgert_tensor* inputs,
                       edgert_tactic* out, int32_t capacity) {
  std::vector<TacticSpec> tactics;
  try {
    tactics = spec_of(self).tactics(node, inputs);
  } catch (...) {
    tactics.clear();
  }
  if (tactics.empty()) tactics.push_back({0, "default"});
  for (int32_t i = 0; i < capacity && i < static_cast<int32_t>(tactics.size()); ++i)
    out[i] = edgert_tactic{tactics[i].id, tactics[i].name};
  return static_cast<int32_t>(tactics.size());
}

edgert_status kernel_prepare(const edgert_kernel* self, const edgert_node* node, int64_t tactic,
                             const edgert_tensor* inputs, edgert_tensor* outputs, void** state,
                             edgert_prepare_info* info, edgert_error* error) {
  return guarded(error, [&] {
    if (!*state) *state = spec_of(self).factory().release();
    // kernel_state_bytes stays 0: these kernels keep descriptors and tactic choices only; the
    // weights they read are the runtime's one device copy of the engine's constants.
    *info = edgert_prepare_info{};
    Op* op = static_cast<Op*>(*state);
    op->set_tactic(tactic);
    op->prepare(*node, inputs, outputs, *info);
  });
}

edgert_status kernel_execute(const edgert_kernel*, void* state, const edgert_node* node, const edgert_tensor* inputs,
                             edgert_tensor* outputs, void* workspace, void* stream, edgert_error* error) {
  return guarded(error, [&] {
    static_cast<Op*>(state)->execute(*node, inputs, outputs, workspace, static_cast<cudaStream_t>(stream));
  });
}

void kernel_release(const edgert_kernel*, void* state) { delete static_cast<Op*>(state); }

struct PluginTable {
  KernelRegistry registry;
  std::vector<edgert_kernel> kernels;
  edgert_plugin plugin{};

  PluginTable() {
#define EDGERT_REGISTER_FAMILY(family) register_##family##_kernels(registry);
    EDGERT_CUDA_KERNEL_FAMILIES(EDGERT_REGISTER_FAMILY)
#undef EDGERT_REGISTER_FAMILY
    for (const KernelSpec& spec : registry.specs()) {
      edgert_kernel k{};
      k.domain = spec.domain;
      k.op_type = spec.op_type;
      k.name = spec.name;
      k.user_data = &spec;
      k.supports = kernel_supports;
      k.tactics = spec.tactics ? kernel_tactics : nullptr;
      k.prepare = kernel_prepare;
      k.execute = kernel_execute;
      k.release = kernel_release;
      k.flags = EDGERT_KERNEL_CAPTURABLE;
      k.host_inputs = spec.host_inputs;
      kernels.push_back(k);
    }
    plugin.abi_version = EDGERT_PLUGIN_ABI_VERSION;
    plugin.name = "cuda";
    plugin.version = EDGERT_CUDA_PLUGIN_VERSION;
    plugin.score = device_score;
    plugin.num_kernels = static_cast<int32_t>(kernels.size());
    plugin.kernels = kernels.data();
    plugin.device = device_table();
  }
};

}  // namespace
}  // namespace edgert::cuda

extern "C" __attribute__((visibility("default"))) const edgert_plugin* edgert_plugin_entry(void) {
  // Never destroyed: engines may hold kernels past static destruction at exit.
  static const auto* table = new edgert::cuda::PluginTable();
  return &table->plugin;
}
