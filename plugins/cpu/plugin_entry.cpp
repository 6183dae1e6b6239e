// The CPU plugin's C ABI: the entry symbol, and the adapter from edgert_kernel calls to Op
// objects. Every C++ exception stops here and becomes a status plus message.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "kernel_families.h"
#include "prepared_state.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

const KernelSpec& spec_of(const edgert_kernel* self) {
  return *static_cast<const KernelSpec*>(self->user_data);
}

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

int32_t kernel_supports(const edgert_kernel* self, const edgert_node* node,
                        const edgert_tensor* inputs) {
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
  const KernelSpec& spec = spec_of(self);
  std::vector<TacticSpec> tactics;
  try {
    tactics = spec.tactics(node, inputs);
  } catch (...) {
    tactics.clear();
  }
  // The reference tactic is always a candidate, last: the oracle and the fallback.
  tactics.push_back({0, "reference"});
  for (int32_t i = 0; i < capacity && i < static_cast<int32_t>(tactics.size()); ++i)
    out[i] = edgert_tactic{tactics[i].id, tactics[i].name};
  return static_cast<int32_t>(tactics.size());
}

edgert_status kernel_prepare(const edgert_kernel* self, const edgert_node* node, int64_t tactic,
                             const edgert_tensor* inputs, edgert_tensor* outputs, void** state,
                             edgert_prepare_info* info, edgert_error* error) {
  return guarded(error, [&] {
    // Ops index inputs and outputs by position; a host breaking plugin.h's promise gets an
    // error here instead of a kernel writing through NULL.
    const char* name = node->name ? node->name : "";
    const char* op_type = node->op_type ? node->op_type : "";
    if (node->num_outputs < 1 || !outputs)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "node '%s' (%s) comes without outputs; every op has at least one", name,
           op_type);
    if (node->num_inputs > 0 && !inputs)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "node '%s' (%s) has %d input(s) but no input array", name, op_type,
           node->num_inputs);
    // Stored state is offered to a fresh Op only: its arrays are packed in the order export
    // recorded them. A later prepare repacks (if at all) from the inputs, as without it.
    const bool fresh = !*state;
    if (fresh) *state = spec_of(self).factory().release();
    *info = edgert_prepare_info{};
    Op* op = static_cast<Op*>(*state);
    op->set_tactic(tactic);
    prepared::Reader reader(fresh ? node->prepared : nullptr, node->prepared_bytes, tactic);
    std::optional<prepared::Scope> scope;
    if (reader.usable()) scope.emplace(&reader);
    op->prepare(*node, inputs, outputs, *info);
    info->kernel_state_bytes = op->state_bytes();
  });
}

void kernel_release(const edgert_kernel* /*self*/, void* state) { delete static_cast<Op*>(state); }

// Prepares a fresh Op with a recorder in place: what its packing functions finish is the state.
edgert_status kernel_export_prepared(const edgert_kernel* self, const edgert_node* node, int64_t tactic,
                                     const edgert_tensor* inputs, void* buffer, size_t capacity, size_t* bytes,
                                     uint64_t* replaced_inputs, edgert_error* error) {
  *bytes = 0;
  *replaced_inputs = 0;
  void* state = nullptr;
  std::vector<edgert_tensor> outputs(node->num_outputs > 0 ? static_cast<size_t>(node->num_outputs) : 1);
  edgert_status status = guarded(error, [&] {
    prepared::Recorder recorder;
    edgert_prepare_info info{};
    {
      prepared::Scope scope(&recorder);
      edgert_status prepared_status = kernel_prepare(self, node, tactic, inputs, outputs.data(), &state, &info, error);
      if (prepared_status != EDGERT_OK) throw KernelError(prepared_status, error->message);
    }
    if (recorder.empty()) return;
    *bytes = recorder.size();
    *replaced_inputs = static_cast<Op*>(state)->inputs_replaced();
    if (buffer && capacity >= *bytes) recorder.write(tactic, buffer);
  });
  if (state) kernel_release(self, state);
  return status;
}

edgert_status kernel_execute(const edgert_kernel* /*self*/, void* state, const edgert_node* node,
                             const edgert_tensor* inputs, edgert_tensor* outputs, void* workspace,
                             void* /*stream: host kernels run on the calling thread*/, edgert_error* error) {
  return guarded(error, [&] { static_cast<Op*>(state)->execute(*node, inputs, outputs, workspace); });
}


int32_t cpu_score() { return 1; }

edgert_status cpu_configure(const edgert_plugin_config* config, edgert_error* error) {
  // Fields past struct_size are absent (an older host): they keep their defaults.
  int32_t threads = 0, pin = 0;
  if (config) {
    if (config->struct_size >= offsetof(edgert_plugin_config, num_threads) + sizeof(int32_t))
      threads = config->num_threads;
    if (config->struct_size >= offsetof(edgert_plugin_config, pin_threads) + sizeof(int32_t))
      pin = config->pin_threads;
  }
  if (threads < 0 || threads > 1024) {
    char message[128];
    std::snprintf(message, sizeof message,
                  "cpu plugin: num_threads %d is out of range (0 = one per CPU of the affinity mask, or 1..1024)",
                  threads);
    set_error(error, EDGERT_ERR_INVALID_ARGUMENT, message);
    return EDGERT_ERR_INVALID_ARGUMENT;
  }
  return guarded(error, [&] { ThreadPool::instance().configure(threads, pin != 0); });
}

struct PluginTable {
  KernelRegistry registry;
  std::vector<edgert_kernel> kernels;
  edgert_plugin plugin{};

  PluginTable() {
#define EDGERT_REGISTER_FAMILY(family) register_##family##_kernels(registry);
    EDGERT_CPU_KERNEL_FAMILIES(EDGERT_REGISTER_FAMILY)
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
      k.export_prepared = kernel_export_prepared;
      kernels.push_back(k);
    }
    plugin.abi_version = EDGERT_PLUGIN_ABI_VERSION;
    plugin.name = "cpu";
    plugin.version = EDGERT_CPU_PLUGIN_VERSION;
    plugin.score = cpu_score;
    plugin.configure = cpu_configure;
    plugin.num_kernels = static_cast<int32_t>(kernels.size());
    plugin.kernels = kernels.data();
  }
};

}  // namespace
}  // namespace edgert::cpu

extern "C" __attribute__((visibility("default"))) const edgert_plugin* edgert_plugin_entry(void) {
  // Built on first use, never destroyed: kernels may still be referenced by engines that
  // outlive static destruction order at process exit.
  static const auto* table = new edgert::cpu::PluginTable();
  return &table->plugin;
}
