#include "execution_context.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "error.h"

namespace edgert {

ExecutionContext::ExecutionContext(const LoadedEngine& engine)
    : engine_(engine), main_(engine, 0, allocator_, nullptr) {}

const edgert_tensor& ExecutionContext::output(int32_t index) const {
  return main_.value(engine_.output_tensors()[index]);
}

edgert_status ExecutionContext::check_inputs(const edgert_tensor* inputs, int32_t num_inputs,
                                             edgert_error* error) const {
  const auto& bindings = engine_.input_tensors();
  const LoadedGraph& graph = engine_.main_graph();
  if (num_inputs != static_cast<int32_t>(bindings.size()))
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "engine has %zu inputs, %d were given", bindings.size(),
                     num_inputs);
  for (size_t i = 0; i < bindings.size(); ++i) {
    const LoadedTensor& want = graph.tensors[bindings[i]];
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

void ExecutionContext::FreeDeleter::operator()(void* p) const { std::free(p); }

edgert_status ExecutionContext::use_profile(size_t profile, edgert_error* error) {
  if (arena_ready_ && profile == profile_) return EDGERT_OK;
  if (profile != profile_) main_.set_profile(profile);
  profile_ = profile;
  const ArenaPlan* plan = engine_.arena_plan(profile);
  arena_ready_ = true;
  if (!plan) return EDGERT_OK;
  auto aligned = [&](uint64_t bytes) { return (std::max<uint64_t>(bytes, 1) + plan->alignment - 1) / plan->alignment * plan->alignment; };
  // The buffers only grow: switching back and forth between profiles allocates nothing more.
  if (aligned(plan->arena_bytes) > arena_capacity_) {
    arena_.reset(static_cast<uint8_t*>(std::aligned_alloc(plan->alignment, aligned(plan->arena_bytes))));
    arena_capacity_ = arena_ ? aligned(plan->arena_bytes) : 0;
  }
  if (plan->workspace_bytes && aligned(plan->workspace_bytes) > workspace_capacity_) {
    workspace_.reset(static_cast<uint8_t*>(std::aligned_alloc(plan->alignment, aligned(plan->workspace_bytes))));
    workspace_capacity_ = workspace_ ? aligned(plan->workspace_bytes) : 0;
  }
  if (!arena_ || (plan->workspace_bytes && !workspace_)) {
    arena_ready_ = false;
    main_.use_arena(nullptr, nullptr, nullptr);
    return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "cannot allocate the engine's %llu-byte activation arena and "
                     "%llu-byte workspace", static_cast<unsigned long long>(plan->arena_bytes),
                     static_cast<unsigned long long>(plan->workspace_bytes));
  }
  arena_bytes_ = std::max<size_t>(arena_bytes_, plan->arena_bytes + plan->workspace_bytes);
  main_.use_arena(plan, arena_.get(), workspace_.get());
  return EDGERT_OK;
}

edgert_status ExecutionContext::run(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) {
  main_.release_activations();
  if (edgert_status s = check_inputs(inputs, num_inputs, error)) return s;
  size_t profile = 0;
  if (edgert_status s = engine_.select_profile(inputs, static_cast<size_t>(num_inputs), &profile, error)) return s;
  if (edgert_status s = use_profile(profile, error)) return s;
  // Engine inputs are bound in engine order; the main graph lists the same tensors.
  const LoadedGraph& graph = engine_.main_graph();
  graph_inputs_.assign(graph.inputs.size(), edgert_tensor{});
  for (size_t g = 0; g < graph.inputs.size(); ++g)
    for (size_t b = 0; b < engine_.input_tensors().size(); ++b)
      if (engine_.input_tensors()[b] == graph.inputs[g]) graph_inputs_[g] = inputs[b];
  return main_.run(graph_inputs_.data(), graph_inputs_.size(), error);
}

}  // namespace edgert
