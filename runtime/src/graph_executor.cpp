#include "graph_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "control_flow.h"
#include "error.h"
#include "sequence_ops.h"

namespace edgert {
namespace {

bool same_signature(const edgert_tensor& a, const edgert_tensor& b) {
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int32_t d = 0; d < a.rank; ++d)
    if (a.dims[d] != b.dims[d]) return false;
  return true;
}

}  // namespace

GraphExecutor::GraphExecutor(const LoadedEngine& engine, int32_t graph_index, TensorAllocator& allocator,
                             const GraphExecutor* parent)
    : engine_(engine), graph_(engine.graphs()[graph_index]), allocator_(allocator), parent_(parent) {
  nodes_.resize(graph_.nodes.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const LoadedNode& node = graph_.nodes[i];
    if (node.kernel && node.kernel->host_inputs) {
      bool fixed = true;
      for (size_t k = 0; k < node.inputs.size() && k < 64; ++k)
        if ((node.kernel->host_inputs >> k) & 1u)
          fixed = fixed && (node.inputs[k] < 0 || graph_.tensors[node.inputs[k]].is_constant);
      nodes_[i].host_values_fixed = fixed;
    }
    // Reserved for one at least: kernels get a non-NULL input array even for a node without
    // inputs (plugin.h); the loader refuses nodes without outputs.
    nodes_[i].inputs.reserve(std::max<size_t>(1, graph_.nodes[i].inputs.size()));
    nodes_[i].inputs.resize(graph_.nodes[i].inputs.size());
    nodes_[i].outputs.resize(graph_.nodes[i].outputs.size());
    nodes_[i].last_inputs.resize(graph_.nodes[i].inputs.size());
  }
  values_.resize(graph_.tensors.size());
  owned_.assign(graph_.tensors.size(), nullptr);
  owned_values_.resize(graph_.tensors.size());
}

GraphExecutor::~GraphExecutor() {
  subgraphs_.clear();
  release_activations();
  for (size_t i = 0; i < nodes_.size(); ++i) release_kernel_state(i);
  for (auto& [start, end] : timers_) {
    if (start) device_->device->timer_free(start);
    if (end) device_->device->timer_free(end);
  }
}

edgert_status DeviceRun::synchronize(edgert_error* error) {
  if (!pending) return EDGERT_OK;
  pending = false;
  ++waits;
  return device->synchronize(stream, error);
}

TensorAllocator& GraphExecutor::allocator_for(edgert_memory_space space) {
  if (space == EDGERT_MEMORY_DEVICE && device_ && device_->device_memory) return *device_->device_memory;
  if (space == EDGERT_MEMORY_UNIFIED && device_ && device_->unified_memory) return *device_->unified_memory;
  return allocator_;
}

void GraphExecutor::bind_output(int32_t t, void* data, size_t capacity) {
  if (bound_outputs_.size() != values_.size()) bound_outputs_.assign(values_.size(), {nullptr, 0});
  bound_outputs_[t] = {data, capacity};
}

bool GraphExecutor::shapes_are_static() const {
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (graph_.nodes[n].kernel &&
        (!nodes_[n].prepared || (nodes_[n].info.data_dependent && !nodes_[n].host_values_fixed)))
      return false;
  return true;
}

uint64_t GraphExecutor::kernel_state_bytes() const {
  uint64_t bytes = 0;
  for (const NodeState& state : nodes_)
    if (state.kernel_state) bytes += state.info.kernel_state_bytes;
  for (const auto& [index, executor] : subgraphs_) bytes += executor->kernel_state_bytes();
  return bytes;
}

edgert_status GraphExecutor::finish_layer_times(edgert_error* error) {
  if (!layer_times_) return EDGERT_OK;
  for (size_t n = 0; n < timers_.size() && n < layer_times_->size(); ++n) {
    if (!timers_[n].first) continue;
    float ms = 0;
    if (edgert_status s = device_->device->timer_elapsed(timers_[n].first, timers_[n].second, &ms, error)) return s;
    (*layer_times_)[n] = static_cast<double>(ms) * 1e6;
  }
  return EDGERT_OK;
}

void GraphExecutor::release_kernel_state(size_t index) {
  NodeState& state = nodes_[index];
  if (state.kernel_state) graph_.nodes[index].kernel->release(graph_.nodes[index].kernel, state.kernel_state);
  state.kernel_state = nullptr;
  state.prepared = false;
}

void GraphExecutor::set_profile(size_t profile) {
  profile_ = profile;
  // A kernel's state belongs to the tactic that made it: another tactic starts afresh.
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (graph_.nodes[i].kernel) release_kernel_state(i);
}

GraphExecutor& GraphExecutor::subgraph(int32_t graph_index) {
  auto& slot = subgraphs_[graph_index];
  if (!slot) slot = std::make_unique<GraphExecutor>(engine_, graph_index, allocator_, this);
  return *slot;
}

void GraphExecutor::release_activations() {
  for (size_t t = 0; t < owned_.size(); ++t) {
    if (owned_[t]) allocator_for(graph_.tensors[t].space).release(owned_[t]);
    owned_[t] = nullptr;
    owned_values_[t].reset();
    values_[t] = edgert_tensor{};
  }
}

void GraphExecutor::use_arena(const ArenaPlan* plan, const ArenaBases& bases) {
  plan_ = plan;
  arena_ = bases;
}

edgert_status GraphExecutor::allocate_output(int32_t t, edgert_tensor& out, const char* node_name, edgert_error* error) {
  size_t bytes = 0;
  if (!tensor_bytes(out, &bytes))
    return set_error(error, EDGERT_ERR_SHAPE, "node '%s': output '%s' has an invalid shape %s", node_name,
                     graph_.tensors[t].name, shape_text(out.dims, out.rank).c_str());
  const edgert_memory_space space = graph_.tensors[t].space;
  TensorAllocator& allocator = allocator_for(space);
  if (!bound_outputs_.empty() && bound_outputs_[t].first && bytes <= bound_outputs_[t].second) {
    if (owned_[t]) allocator.release(owned_[t]);
    owned_[t] = nullptr;
    out.data = bound_outputs_[t].first;
    values_[t] = out;
    return EDGERT_OK;
  }
  // The plan was verified at load (offset + size inside the arena); a tensor that came out
  // larger than planned (another input shape) falls back to the allocator.
  uint8_t* arena = space == EDGERT_MEMORY_DEVICE ? arena_.device : space == EDGERT_MEMORY_UNIFIED ? arena_.unified
                                                                                                  : arena_.host;
  if (plan_ && arena && static_cast<size_t>(t) < plan_->offsets.size() && plan_->offsets[t] >= 0 &&
      bytes <= plan_->sizes[t]) {
    if (owned_[t]) allocator.release(owned_[t]);
    owned_[t] = nullptr;
    out.data = arena + plan_->offsets[t];
    values_[t] = out;
    return EDGERT_OK;
  }
  if (device_) device_->used_allocator = true;
  void* block = allocator.allocate(bytes);
  if (!block)
    return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "node '%s': cannot allocate %zu bytes for output '%s'", node_name,
                     bytes, graph_.tensors[t].name);
  if (owned_[t]) allocator.release(owned_[t]);
  out.data = block;
  owned_[t] = block;
  values_[t] = out;
  return EDGERT_OK;
}

edgert_status GraphExecutor::set_value(int32_t t, const edgert_tensor& value, const char* node_name,
                                       edgert_error* error) {
  if (value.dtype == EDGERT_DTYPE_SEQUENCE || value.dtype == EDGERT_DTYPE_UNDEFINED) {
    adopt_value(t, OwnedValue::copy_of(value));
    return EDGERT_OK;
  }
  edgert_tensor out = value;
  if (edgert_status s = allocate_output(t, out, node_name, error)) return s;
  size_t n = 0;
  tensor_bytes(value, &n);
  if (n && out.data != value.data) std::memcpy(out.data, value.data, n);
  return EDGERT_OK;
}

void GraphExecutor::adopt_value(int32_t t, OwnedValue value) {
  if (owned_[t]) allocator_for(graph_.tensors[t].space).release(owned_[t]);
  owned_[t] = nullptr;
  owned_values_[t] = std::make_unique<OwnedValue>(std::move(value));
  values_[t] = owned_values_[t]->view();
}

edgert_status GraphExecutor::run(const edgert_tensor* inputs, size_t num_inputs, edgert_error* error) {
  release_activations();
  if (num_inputs != graph_.inputs.size())
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "graph has %zu inputs, %zu were given", graph_.inputs.size(),
                     num_inputs);
  for (size_t t = 0; t < graph_.tensors.size(); ++t)
    if (graph_.tensors[t].is_constant) values_[t] = graph_.tensors[t].constant;
  for (size_t i = 0; i < num_inputs; ++i) values_[graph_.inputs[i]] = inputs[i];
  for (const auto& [local, outer] : graph_.captures) values_[local] = parent_->value(outer);
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (edgert_status s = run_node(n, error)) {
      release_activations();
      return s;
    }
  }
  return EDGERT_OK;
}

edgert_status GraphExecutor::run_node(size_t index, edgert_error* error) {
  const LoadedNode& node = graph_.nodes[index];
  // An optional without a value is a value of dtype UNDEFINED; any other input has been written.
  for (int32_t t : node.inputs)
    if (t >= 0 && values_[t].dtype == EDGERT_DTYPE_UNDEFINED && !is_optional(graph_.tensors[t].kind))
      return set_error(error, EDGERT_ERR_INTERNAL, "node '%s' (%s): input '%s' has no value", node.node.name,
                       node.node.op_type, graph_.tensors[t].name);
  // A host kernel or control-flow op reads what device work wrote only after it finished.
  const bool on_device = node.device || node.builtin == BuiltinOp::Copy;
  if (!on_device && device_)
    if (edgert_status s = device_->synchronize(error)) return s;
  // Device nodes are timed on the stream (a timer before and after); host nodes by the clock.
  const bool device_timed = layer_times_ && on_device && device_ && index < layer_times_->size();
  if (device_timed) {
    if (timers_.size() != nodes_.size()) timers_.assign(nodes_.size(), {nullptr, nullptr});
    auto& [start, end] = timers_[index];
    if (!start && device_->device->timer_create(&start, error) != EDGERT_OK) return error->status;
    if (!end && device_->device->timer_create(&end, error) != EDGERT_OK) return error->status;
    if (edgert_status s = device_->device->timer_record(start, device_->stream, error)) return s;
  }
  edgert_status s;
  const auto started = layer_times_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  switch (node.builtin) {
    case BuiltinOp::If: s = run_if(*this, node, values_, error); break;
    case BuiltinOp::Loop: s = run_loop(*this, node, values_, error); break;
    case BuiltinOp::Scan: s = run_scan(*this, node, values_, error); break;
    case BuiltinOp::Copy: s = run_copy(index, error); break;
    case BuiltinOp::Sequence: s = run_sequence_op(*this, node, values_, error); break;
    default: s = run_kernel(index, error); break;
  }
  if (s == EDGERT_OK) free_after(index);
  if (device_timed && s == EDGERT_OK) {
    s = device_->device->timer_record(timers_[index].second, device_->stream, error);
  } else if (layer_times_ && index < layer_times_->size()) {
    (*layer_times_)[index] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - started).count();
  }
  return s;
}

edgert_status GraphExecutor::run_copy(size_t index, edgert_error* error) {
  const LoadedNode& node = graph_.nodes[index];
  if (!device_ || node.inputs.size() != 1 || node.outputs.size() != 1 || node.inputs[0] < 0)
    return set_error(error, EDGERT_ERR_FORMAT, "node '%s' copies between memory spaces, but %s", node.node.name,
                     device_ ? "does not have one input and one output" : "the engine has no device");
  const int32_t from = node.inputs[0], to = node.outputs[0];
  edgert_tensor out = values_[from];
  const edgert_memory_space source_space = graph_.tensors[from].space;
  const void* source = out.data;
  // A constant read on the device side is the engine's device copy.
  if (graph_.tensors[from].is_constant && source_space == EDGERT_MEMORY_HOST && engine_.device_constant(from))
    source = engine_.device_constant(from);
  if (edgert_status s = allocate_output(to, out, node.node.name, error)) return s;
  size_t bytes = 0;
  tensor_bytes(out, &bytes);
  if (edgert_status s = device_->device->copy(out.data, graph_.tensors[to].space, source, source_space, bytes,
                                              device_->stream, error)) {
    prefix_error(error, "node '%s' (copy of '%s')", node.node.name, graph_.tensors[from].name);
    return s;
  }
  ++device_->copies;
  device_->pending = true;
  return EDGERT_OK;
}

edgert_status GraphExecutor::run_kernel(size_t index, edgert_error* error) {
  const LoadedNode& node = graph_.nodes[index];
  NodeState& state = nodes_[index];
  const edgert_kernel* kernel = node.kernel;

  bool shapes_changed = !state.prepared || (state.info.data_dependent && !state.host_values_fixed);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int32_t t = node.inputs[i];
    state.inputs[i] = t < 0 ? edgert_tensor{} : values_[t];
    // Device kernels read the engine's device copy of a constant, except operands they read on
    // the host (plugin.h: host_inputs).
    if (node.device && t >= 0 && graph_.tensors[t].is_constant && !(i < 64 && (kernel->host_inputs >> i) & 1u))
      if (const void* copy = engine_.device_constant(t)) state.inputs[i].data = const_cast<void*>(copy);
    if (!same_signature(state.inputs[i], state.last_inputs[i])) shapes_changed = true;
  }

  if (shapes_changed) {
    if (edgert_status s = prepare_kernel(index, error)) return s;
    for (size_t o = 0; o < state.outputs.size(); ++o) {
      const edgert_tensor& out = state.outputs[o];
      size_t bytes;
      if (!dtype_is_valid(out.dtype) || out.rank < 0 || out.rank > EDGERT_MAX_RANK || !tensor_bytes(out, &bytes))
        return set_error(error, EDGERT_ERR_PLUGIN, "node '%s' (%s, kernel %s/%s): prepare gave output %zu an "
                         "invalid dtype or shape", node.node.name, node.node.op_type, node.plugin->name.c_str(),
                         kernel->name, o);
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      state.last_inputs[i] = state.inputs[i];
      state.last_inputs[i].data = nullptr;
    }
    state.prepared = true;
  }

  for (size_t o = 0; o < node.outputs.size(); ++o)
    if (edgert_status s = allocate_output(node.outputs[o], state.outputs[o], node.node.name, error)) return s;
  // The workspace of the kernel's space: the planned one when it is large enough. (A device
  // workspace handed back to the allocator right after the launch is safe to reuse: every
  // device kernel of the context runs in order on one stream.)
  const edgert_memory_space space = node.device ? node.device->kernel_space : EDGERT_MEMORY_HOST;
  void* planned = node.device ? arena_.device_workspace : arena_.host_workspace;
  const uint64_t planned_bytes = !plan_ ? 0 : node.device ? plan_->device_workspace_bytes : plan_->workspace_bytes;
  void* workspace = nullptr;
  bool own_workspace = false;
  if (state.info.workspace_bytes && planned && state.info.workspace_bytes <= planned_bytes) {
    workspace = planned;
  } else if (state.info.workspace_bytes) {
    own_workspace = true;
    if (device_) device_->used_allocator = true;
    workspace = allocator_for(space).allocate(state.info.workspace_bytes);
    if (!workspace)
      return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "node '%s' (%s): cannot allocate a %zu-byte workspace",
                       node.node.name, node.node.op_type, state.info.workspace_bytes);
  }
  edgert_error local{};
  edgert_status s = kernel->execute(kernel, state.kernel_state, &node.node, state.inputs.data(), state.outputs.data(),
                                    workspace, node.device ? device_->stream : nullptr, &local);
  if (node.device) device_->pending = true;
  if (own_workspace) allocator_for(space).release(workspace);
  if (s != EDGERT_OK)
    return set_error(error, s, "node '%s' (%s, kernel %s/%s): %s", node.node.name, node.node.op_type,
                     node.plugin->name.c_str(), kernel->name, local.message);
  return EDGERT_OK;
}

edgert_status GraphExecutor::prepare_kernel(size_t index, edgert_error* error) {
  const LoadedNode& node = graph_.nodes[index];
  NodeState& state = nodes_[index];
  const edgert_kernel* kernel = node.kernel;
  const int64_t chosen = node.tactic_for(profile_);
  auto prepare = [&](int64_t tactic, edgert_error* local) {
    if (state.kernel_state && state.tactic != tactic) release_kernel_state(index);
    state.tactic = tactic;
    for (edgert_tensor& out : state.outputs) out = edgert_tensor{};
    return kernel->prepare(kernel, &node.node, tactic, state.inputs.data(), state.outputs.data(), &state.kernel_state,
                           &state.info, local);
  };
  edgert_error local{};
  edgert_status s = prepare(chosen, &local);
  // The builder tuned the tactic at its profile's opt shapes; one that cannot take the shapes of
  // this run gives way to the first the kernel lists for them (its own best guess), so a dynamic
  // engine falls back one node at a time and never all the way to reference kernels.
  if (s != EDGERT_OK && s != EDGERT_ERR_NEEDS_DATA && kernel->tactics) {
    edgert_tactic listed[32];
    const int32_t n = std::min(kernel->tactics(kernel, &node.node, state.inputs.data(), listed, 32), 32);
    for (int32_t i = 0; i < n && s != EDGERT_OK; ++i) {
      if (listed[i].id == chosen) continue;
      edgert_error retry{};
      s = prepare(listed[i].id, &retry);
    }
    if (s != EDGERT_OK) s = prepare(chosen, &local);  // report the engine's tactic's own complaint
  }
  if (s != EDGERT_OK)
    return set_error(error, s, "node '%s' (%s, kernel %s/%s): %s", node.node.name, node.node.op_type,
                     node.plugin->name.c_str(), kernel->name, local.message);
  return EDGERT_OK;
}

void GraphExecutor::free_after(size_t index) {
  const LoadedNode& node = graph_.nodes[index];
  // Activations this node was the last to read, and outputs nobody reads (an unused optional
  // output), go back to the allocator; graph outputs and borrowed memory never do.
  auto release = [&](int32_t t) {
    if (graph_.is_graph_output[t] || !owned_[t]) return;
    allocator_for(graph_.tensors[t].space).release(owned_[t]);
    owned_[t] = nullptr;
  };
  for (int32_t t : node.inputs) {
    if (t < 0 || graph_.last_use[t] != static_cast<int32_t>(index)) continue;
    bool also_output = false;
    for (int32_t o : node.outputs) also_output = also_output || o == t;
    if (!also_output) release(t);
  }
  for (int32_t t : node.outputs)
    if (graph_.last_use[t] == -1) release(t);
}

}  // namespace edgert
