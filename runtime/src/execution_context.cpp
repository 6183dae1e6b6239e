#include "execution_context.h"

#include <cstring>
#include <string>

#include "error.h"

namespace edgert {
namespace {

bool same_signature(const edgert_tensor& a, const edgert_tensor& b) {
  if (a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int32_t d = 0; d < a.rank; ++d)
    if (a.dims[d] != b.dims[d]) return false;
  return true;
}

std::string shape_text(const int64_t* dims, int32_t rank) {
  std::string s = "[";
  for (int32_t d = 0; d < rank; ++d) s += (d ? "x" : "") + (dims[d] < 0 ? std::string("?") : std::to_string(dims[d]));
  return s + "]";
}

// Element count times element size, or false on overflow or a negative dimension.
bool tensor_bytes(const edgert_tensor& t, size_t* bytes) {
  uint64_t total = dtype_size(t.dtype);
  for (int32_t d = 0; d < t.rank; ++d) {
    if (t.dims[d] < 0 || __builtin_mul_overflow(total, static_cast<uint64_t>(t.dims[d]), &total)) return false;
  }
  *bytes = total;
  return true;
}

}  // namespace

ExecutionContext::ExecutionContext(const LoadedEngine& engine)
    : engine_(engine), graph_(engine.main_graph()) {
  nodes_.resize(graph_.nodes.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i].inputs.resize(graph_.nodes[i].inputs.size());
    nodes_[i].outputs.resize(graph_.nodes[i].outputs.size());
    nodes_[i].last_inputs.resize(graph_.nodes[i].inputs.size());
  }
  values_.resize(graph_.tensors.size());
  owned_.assign(graph_.tensors.size(), nullptr);
}

ExecutionContext::~ExecutionContext() {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kernel_state) graph_.nodes[i].kernel->release(graph_.nodes[i].kernel, nodes_[i].kernel_state);
}

const edgert_tensor& ExecutionContext::output(int32_t index) const {
  return values_[engine_.output_tensors()[index]];
}

void ExecutionContext::release_activations() {
  for (size_t t = 0; t < owned_.size(); ++t) {
    if (owned_[t]) allocator_.release(owned_[t]);
    owned_[t] = nullptr;
    values_[t] = edgert_tensor{};
  }
}

edgert_status ExecutionContext::check_inputs(const edgert_tensor* inputs, int32_t num_inputs,
                                             edgert_error* error) const {
  const auto& bindings = engine_.input_tensors();
  if (num_inputs != static_cast<int32_t>(bindings.size()))
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "engine has %zu inputs, %d were given", bindings.size(),
                     num_inputs);
  for (size_t i = 0; i < bindings.size(); ++i) {
    const LoadedTensor& want = graph_.tensors[bindings[i]];
    const edgert_tensor& got = inputs[i];
    const char* name = engine_.input_names()[i].c_str();
    if (want.dtype != 0 && got.dtype != want.dtype)
      return set_error(error, EDGERT_ERR_SHAPE, "input '%s': expected dtype %s, got %s", name,
                       dtype_name(want.dtype), dtype_name(got.dtype));
    if (got.rank < 0 || got.rank > EDGERT_MAX_RANK)
      return set_error(error, EDGERT_ERR_SHAPE, "input '%s': rank %d is out of range", name, got.rank);
    bool ok = !want.rank_known || got.rank == want.rank;
    for (int32_t d = 0; ok && d < got.rank; ++d) {
      if (got.dims[d] < 0) ok = false;
      else if (want.rank_known && want.dims[d] >= 0 && got.dims[d] != want.dims[d]) ok = false;
    }
    size_t bytes = 0;
    if (!ok || !tensor_bytes(got, &bytes))
      return set_error(error, EDGERT_ERR_SHAPE, "input '%s': expected shape %s, got %s", name,
                       want.rank_known ? shape_text(want.dims, want.rank).c_str() : "(any rank)",
                       shape_text(got.dims, got.rank).c_str());
    if (!got.data && bytes > 0)
      return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "input '%s' has no data", name);
  }
  return EDGERT_OK;
}

edgert_status ExecutionContext::run(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) {
  release_activations();
  if (edgert_status s = check_inputs(inputs, num_inputs, error)) return s;
  for (size_t t = 0; t < graph_.tensors.size(); ++t)
    if (graph_.tensors[t].is_constant) values_[t] = graph_.tensors[t].constant;
  for (size_t i = 0; i < engine_.input_tensors().size(); ++i) values_[engine_.input_tensors()[i]] = inputs[i];

  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (edgert_status s = run_node(n, error)) {
      release_activations();
      return s;
    }
  }
  return EDGERT_OK;
}

edgert_status ExecutionContext::run_node(size_t index, edgert_error* error) {
  const LoadedNode& node = graph_.nodes[index];
  NodeState& state = nodes_[index];
  const edgert_kernel* kernel = node.kernel;

  bool shapes_changed = !state.prepared || state.info.data_dependent;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int32_t t = node.inputs[i];
    state.inputs[i] = t < 0 ? edgert_tensor{} : values_[t];
    if (t >= 0 && state.inputs[i].dtype == EDGERT_DTYPE_UNDEFINED)
      return set_error(error, EDGERT_ERR_INTERNAL, "node '%s' (%s): input '%s' has no value", node.node.name,
                       node.node.op_type, graph_.tensors[t].name);
    if (!same_signature(state.inputs[i], state.last_inputs[i])) shapes_changed = true;
  }

  if (shapes_changed) {
    for (edgert_tensor& out : state.outputs) out = edgert_tensor{};
    edgert_error local{};
    edgert_status s = kernel->prepare(kernel, &node.node, node.tactic, state.inputs.data(), state.outputs.data(),
                                      &state.kernel_state, &state.info, &local);
    if (s != EDGERT_OK)
      return set_error(error, s, "node '%s' (%s, kernel %s/%s): %s", node.node.name, node.node.op_type,
                       node.plugin->name.c_str(), kernel->name, local.message);
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

  for (size_t o = 0; o < node.outputs.size(); ++o) {
    edgert_tensor& out = state.outputs[o];
    size_t bytes = 0;
    tensor_bytes(out, &bytes);
    void* block = allocator_.allocate(bytes);
    if (!block)
      return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "node '%s' (%s): cannot allocate %zu bytes for output '%s'",
                       node.node.name, node.node.op_type, bytes, graph_.tensors[node.outputs[o]].name);
    out.data = block;
    owned_[node.outputs[o]] = block;
    values_[node.outputs[o]] = out;
  }
  void* workspace = nullptr;
  if (state.info.workspace_bytes) {
    workspace = allocator_.allocate(state.info.workspace_bytes);
    if (!workspace)
      return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "node '%s' (%s): cannot allocate a %zu-byte workspace",
                       node.node.name, node.node.op_type, state.info.workspace_bytes);
  }
  edgert_error local{};
  edgert_status s = kernel->execute(kernel, state.kernel_state, &node.node, state.inputs.data(),
                                    state.outputs.data(), workspace, &local);
  allocator_.release(workspace);
  if (s != EDGERT_OK)
    return set_error(error, s, "node '%s' (%s, kernel %s/%s): %s", node.node.name, node.node.op_type,
                     node.plugin->name.c_str(), kernel->name, local.message);

  // Free activations this node was the last to read (never graph outputs or borrowed memory).
  for (int32_t t : node.inputs) {
    if (t < 0 || graph_.last_use[t] != static_cast<int32_t>(index) || graph_.is_graph_output[t] || !owned_[t])
      continue;
    bool also_output = false;
    for (int32_t o : node.outputs) also_output = also_output || o == t;
    if (also_output) continue;
    allocator_.release(owned_[t]);
    owned_[t] = nullptr;
  }
  // Outputs nobody reads (an unused optional output) go back at once.
  for (int32_t t : node.outputs) {
    if (graph_.last_use[t] == -1 && !graph_.is_graph_output[t] && owned_[t]) {
      allocator_.release(owned_[t]);
      owned_[t] = nullptr;
    }
  }
  return EDGERT_OK;
}

}  // namespace edgert
