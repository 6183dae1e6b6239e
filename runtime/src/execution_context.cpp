#include "execution_context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "error.h"

namespace edgert {
namespace {

bool same_tensor(const edgert_tensor& a, const edgert_tensor& b) {
  if (a.dtype != b.dtype || a.rank != b.rank || a.data != b.data) return false;
  for (int32_t d = 0; d < a.rank; ++d)
    if (a.dims[d] != b.dims[d]) return false;
  return true;
}

// Whether a kernel of `space` (host, or a device's) can read and write memory of `binding`:
// unified memory serves both sides.
bool reachable(edgert_memory_space space, edgert_memory_space binding) {
  return binding == space || binding == EDGERT_MEMORY_UNIFIED;
}

}  // namespace

ExecutionContext::ExecutionContext(const LoadedEngine& engine)
    : engine_(engine), device_(engine.device()), main_(engine, 0, allocator_, nullptr) {
  const size_t inputs = engine.input_tensors().size(), outputs = engine.output_tensors().size();
  bound_inputs_.assign(inputs, edgert_tensor{});
  bound_input_spaces_.assign(inputs, EDGERT_MEMORY_HOST);
  bound_outputs_.assign(outputs, {nullptr, 0});
  staged_inputs_.resize(inputs);
  host_outputs_.resize(outputs);
  host_output_views_.assign(outputs, edgert_tensor{});
  if (!device_) return;
  device_memory_ = std::make_unique<TensorAllocator>(device_, EDGERT_MEMORY_DEVICE);
  unified_memory_ = std::make_unique<TensorAllocator>(device_, EDGERT_MEMORY_UNIFIED);
  device_run_.device = device_;
  device_run_.device_memory = device_memory_.get();
  device_run_.unified_memory = unified_memory_.get();
  main_.use_device(&device_run_);
}

ExecutionContext::~ExecutionContext() {
  if (device_) {
    edgert_error ignored{};
    if (device_run_.stream) device_run_.synchronize(&ignored);
    drop_graph();
    if (timer_start_) device_->timer_free(timer_start_);
    if (timer_end_) device_->timer_free(timer_end_);
  }
  for (Buffer* b : {&host_arena_, &host_workspace_, &device_arena_, &unified_arena_, &device_workspace_}) release(*b);
  for (Buffer& b : staged_inputs_) release(b);
  for (Buffer& b : host_outputs_) release(b);
  // own_stream_ goes after main_ has released its kernels (they may hold work on it): main_ is
  // destroyed after this body, so the stream is destroyed by a member declared before it.
  if (own_stream_) {
    main_.release_activations();
    device_->stream_destroy(own_stream_);
    own_stream_ = nullptr;
  }
}

const edgert_tensor& ExecutionContext::output(int32_t index) const {
  if (use_host_outputs_ && host_output_views_[index].data) return host_output_views_[index];
  return main_.value(engine_.output_tensors()[index]);
}

namespace {

// A tensor's dims are sizes and its data is there when it has bytes.
edgert_status check_tensor_data(const edgert_tensor& t, const char* name, edgert_error* error) {
  size_t bytes = 0;
  bool ok = t.rank >= 0 && t.rank <= EDGERT_MAX_RANK;
  for (int32_t d = 0; ok && d < t.rank; ++d) ok = t.dims[d] >= 0;
  if (!ok || !tensor_bytes(t, &bytes))
    return set_error(error, EDGERT_ERR_SHAPE, "input '%s': invalid shape %s", name,
                     ok ? shape_text(t.dims, t.rank).c_str() : "(rank or dimension out of range)");
  if (!t.data && bytes > 0) return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "input '%s' has no data", name);
  return EDGERT_OK;
}

// An input of sequence or optional type: a sequence of tensors of the declared dtype, a tensor,
// or (optional) nothing.
edgert_status check_sequence_or_optional(const LoadedTensor& want, const edgert_tensor& got, const char* name,
                                         edgert_error* error) {
  if (got.dtype == EDGERT_DTYPE_UNDEFINED) {
    if (is_optional(want.kind)) return EDGERT_OK;
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "input '%s' is a sequence and was given no value", name);
  }
  const bool wants_sequence = want.kind == ValueKind::Sequence || want.kind == ValueKind::OptionalSequence;
  if (!wants_sequence) {
    if (want.dtype != 0 && got.dtype != want.dtype)
      return set_error(error, EDGERT_ERR_SHAPE, "input '%s': expected dtype %s, got %s", name, dtype_name(want.dtype),
                       dtype_name(got.dtype));
    return check_tensor_data(got, name, error);
  }
  if (got.dtype != EDGERT_DTYPE_SEQUENCE || !got.data)
    return set_error(error, EDGERT_ERR_SHAPE, "input '%s' is a sequence of %s tensors; it was given a %s", name,
                     dtype_name(want.dtype), dtype_name(got.dtype));
  const auto* s = static_cast<const edgert_sequence*>(got.data);
  if (s->count > 0 && !s->items)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "input '%s': a sequence of %zu tensors without items", name,
                     s->count);
  for (size_t i = 0; i < s->count; ++i) {
    const edgert_tensor& item = s->items[i];
    if (want.dtype != 0 && item.dtype != want.dtype)
      return set_error(error, EDGERT_ERR_SHAPE, "input '%s': tensor %zu of the sequence is %s, expected %s", name, i,
                       dtype_name(item.dtype), dtype_name(want.dtype));
    if (edgert_status st = check_tensor_data(item, name, error)) return st;
  }
  return EDGERT_OK;
}

}  // namespace

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
    if (want.kind != ValueKind::Tensor) {
      if (edgert_status s = check_sequence_or_optional(want, got, name, error)) return s;
      continue;
    }
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

edgert_status ExecutionContext::reserve(Buffer& buffer, edgert_memory_space space, size_t bytes, size_t alignment,
                                        edgert_error* error) {
  bytes = (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  if (buffer.data && buffer.capacity >= bytes && buffer.space == space) return EDGERT_OK;
  // A buffer the device may still use, or a captured graph names, goes only after both.
  if (device_) {
    if (edgert_status s = device_run_.synchronize(error)) return s;
    drop_graph();
  }
  release(buffer);
  if (space == EDGERT_MEMORY_HOST) {
    buffer.data = std::aligned_alloc(alignment, bytes);
    if (!buffer.data)
      return set_error(error, EDGERT_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory", bytes);
  } else if (edgert_status s = device_->allocate(space, bytes, &buffer.data, error)) {
    buffer.data = nullptr;
    return s;
  }
  buffer.capacity = bytes;
  buffer.space = space;
  return EDGERT_OK;
}

void ExecutionContext::release(Buffer& buffer) {
  if (!buffer.data) return;
  if (buffer.space == EDGERT_MEMORY_HOST) std::free(buffer.data);
  else device_->free(buffer.space, buffer.data);
  buffer = Buffer{};
}

edgert_status ExecutionContext::use_profile(size_t profile, edgert_error* error) {
  if (arena_ready_ && profile == profile_) return EDGERT_OK;
  if (profile != profile_) {
    if (device_)
      if (edgert_status s = device_run_.synchronize(error)) return s;
    drop_graph();
    main_.set_profile(profile);
  }
  profile_ = profile;
  const ArenaPlan* plan = engine_.arena_plan(profile);
  arena_ready_ = true;
  if (!plan) return EDGERT_OK;
  // The buffers only grow: switching back and forth between profiles allocates nothing more.
  edgert_status s = reserve(host_arena_, EDGERT_MEMORY_HOST, plan->arena_bytes, plan->alignment, error);
  if (!s && plan->workspace_bytes)
    s = reserve(host_workspace_, EDGERT_MEMORY_HOST, plan->workspace_bytes, plan->alignment, error);
  if (!s && plan->device_arena_bytes)
    s = reserve(device_arena_, EDGERT_MEMORY_DEVICE, plan->device_arena_bytes, plan->alignment, error);
  if (!s && plan->unified_arena_bytes)
    s = reserve(unified_arena_, EDGERT_MEMORY_UNIFIED, plan->unified_arena_bytes, plan->alignment, error);
  if (!s && plan->device_workspace_bytes)
    s = reserve(device_workspace_, EDGERT_MEMORY_DEVICE, plan->device_workspace_bytes, plan->alignment, error);
  if (s) {
    arena_ready_ = false;
    main_.use_arena(nullptr, ArenaBases{});
    prefix_error(error, "the engine's activation arenas (%llu host, %llu device, %llu unified bytes) and workspaces",
                 static_cast<unsigned long long>(plan->arena_bytes),
                 static_cast<unsigned long long>(plan->device_arena_bytes),
                 static_cast<unsigned long long>(plan->unified_arena_bytes));
    return s;
  }
  arena_bytes_ = std::max<size_t>(arena_bytes_, plan->arena_bytes + plan->workspace_bytes + plan->device_arena_bytes +
                                                    plan->unified_arena_bytes + plan->device_workspace_bytes);
  ArenaBases bases;
  bases.host = static_cast<uint8_t*>(host_arena_.data);
  bases.host_workspace = host_workspace_.data;
  bases.device = static_cast<uint8_t*>(device_arena_.data);
  bases.unified = static_cast<uint8_t*>(unified_arena_.data);
  bases.device_workspace = device_workspace_.data;
  main_.use_arena(plan, bases);
  return EDGERT_OK;
}

void ExecutionContext::set_layer_times(std::vector<double>* times) {
  layer_times_ = times;
  main_.set_layer_times(times);
  if (times) drop_graph();  // a graph replay has no per-layer timers
}

void ExecutionContext::set_cuda_graphs(bool on) {
  graphs_allowed_ = on;
  if (!on) drop_graph();
}

edgert_status ExecutionContext::create_own_stream(edgert_error* error) {
  if (gpu_share_ != 100) return device_->stream_create_partitioned(priority_, gpu_share_, &own_stream_, error);
  if (priority_ != 0 && EDGERT_DEVICE_HAS(device_, stream_create_with_priority))
    return device_->stream_create_with_priority(priority_, &own_stream_, error);
  return device_->stream_create(&own_stream_, error);
}

edgert_status ExecutionContext::drop_own_stream(edgert_error* error) {
  // Graphs captured on the old stream go with it.
  if (own_stream_) {
    if (edgert_status s = device_run_.synchronize(error)) return s;
    drop_graph();
    device_->stream_destroy(own_stream_);
    own_stream_ = nullptr;
  }
  return EDGERT_OK;
}

edgert_status ExecutionContext::set_priority(int32_t priority, edgert_error* error) {
  if (device_ && priority != priority_)
    if (edgert_status s = drop_own_stream(error)) return s;
  priority_ = priority;
  return EDGERT_OK;
}

edgert_status ExecutionContext::set_gpu_share(int32_t percent, edgert_error* error) {
  if (percent < 1 || percent > 100)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "GPU share must be 1-100 percent of the device, got %d",
                     percent);
  if (!device_ || percent == gpu_share_) {
    gpu_share_ = percent;
    return EDGERT_OK;
  }
  if (percent != 100 && !EDGERT_DEVICE_HAS(device_, stream_create_partitioned))
    return set_error(error, EDGERT_ERR_UNSUPPORTED, "the engine's device plugin cannot confine a stream to %d%% of "
                     "the device (no stream_create_partitioned)", percent);
  if (edgert_status s = drop_own_stream(error)) return s;
  gpu_share_ = percent;
  return EDGERT_OK;
}

void ExecutionContext::drop_graph() {
  for (CapturedGraph& g : graphs_) device_->graph_free(g.graph);
  graphs_.clear();
}

namespace {

// Same shapes and dtypes and, with `pointers`, the same memory.
bool same_inputs(const std::vector<edgert_tensor>& a, const std::vector<edgert_tensor>& b, bool pointers = true) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    edgert_tensor x = a[i];
    if (!pointers) x.data = b[i].data;
    if (!same_tensor(x, b[i])) return false;
  }
  return true;
}

}  // namespace

edgert_status ExecutionContext::execute(const std::vector<edgert_tensor>& graph_inputs, void* stream,
                                        edgert_error* error) {
  if (!device_) return main_.run(graph_inputs.data(), graph_inputs.size(), error);
  device_run_.stream = stream;
  device_run_.waits = 0;
  if (device_timing_) {
    if (!timer_start_ && device_->timer_create(&timer_start_, error)) return error->status;
    if (!timer_end_ && device_->timer_create(&timer_end_, error)) return error->status;
    if (edgert_status s = device_->timer_record(timer_start_, stream, error)) return s;
  }
  edgert_status s = EDGERT_OK;
  replayed_ = false;
  const auto captured = std::find_if(graphs_.begin(), graphs_.end(),
                                     [&](const CapturedGraph& g) { return same_inputs(g.inputs, graph_inputs); });
  if (captured != graphs_.end()) {
    s = device_->graph_launch(captured->graph, stream, error);
    if (s == EDGERT_OK) device_run_.copies += captured->copies;
    device_run_.pending = true;
    replayed_ = s == EDGERT_OK;
  } else {
    // Graphs hold the kernels' state as prepared for their shapes: other shapes prepare again.
    if (!graphs_.empty() && !same_inputs(graphs_.front().inputs, graph_inputs, false)) drop_graph();
    // Capture once a run went through with these very inputs, every node a capturable device
    // kernel with its tensors in the arenas: the graph then replays exactly that run.
    const auto seen = std::find_if(seen_inputs_.begin(), seen_inputs_.end(),
                                   [&](const std::vector<edgert_tensor>& inputs) { return same_inputs(inputs, graph_inputs); });
    // The previous run had these shapes, so no kernel prepares (allocates, synchronizes) inside
    // the capture.
    bool capture = graphs_allowed_ && device_->graph_begin && !layer_times_ && !device_run_.used_allocator &&
                   seen != seen_inputs_.end() && same_inputs(last_inputs_, graph_inputs, false);
    for (const LoadedNode& node : engine_.main_graph().nodes)
      capture = capture && node.device && (node.kernel->flags & EDGERT_KERNEL_CAPTURABLE);
    capture = capture && main_.shapes_are_static();
    device_run_.used_allocator = false;
    if (capture && device_->graph_begin(stream, error) == EDGERT_OK) {
      seen_inputs_.erase(seen);
      const uint64_t copies_before = device_run_.copies;
      s = main_.run(graph_inputs.data(), graph_inputs.size(), error);
      const uint64_t captured_copies = device_run_.copies - copies_before;
      edgert_error end_error{};
      void* graph = nullptr;
      const edgert_status ended = device_->graph_end(stream, &graph, &end_error);
      if (s == EDGERT_OK && ended == EDGERT_OK && !device_run_.used_allocator) {
        if (graphs_.size() == kMaxGraphs) {
          device_->graph_free(graphs_.front().graph);
          graphs_.erase(graphs_.begin());
        }
        graphs_.push_back(CapturedGraph{graph_inputs, graph, captured_copies});
        s = device_->graph_launch(graph, stream, error);
        replayed_ = s == EDGERT_OK;
      } else {
        if (graph) device_->graph_free(graph);
        device_run_.copies = copies_before;  // nothing captured ran: the run below makes them
        graphs_allowed_ = graphs_allowed_ && s != EDGERT_OK;  // a run that cannot be captured is not tried again
        if (s == EDGERT_OK) s = main_.run(graph_inputs.data(), graph_inputs.size(), error);
      }
      device_run_.pending = true;
    } else {
      s = main_.run(graph_inputs.data(), graph_inputs.size(), error);
      if (seen == seen_inputs_.end()) {
        if (seen_inputs_.size() == kMaxGraphs) seen_inputs_.erase(seen_inputs_.begin());
        seen_inputs_.push_back(graph_inputs);
      }
    }
  }
  last_inputs_ = graph_inputs;
  if (s == EDGERT_OK && device_timing_) s = device_->timer_record(timer_end_, stream, error);
  return s;
}

edgert_status ExecutionContext::synchronize(edgert_error* error) {
  if (edgert_status s = wait_for_run(error)) return s;
  // Every kernel has prepared now (the first run prepares them): the file pages read for that,
  // original weights packed into kernel state or replaced by prepared weights, need not stay
  // resident. Those execution reads fault back in at the next run (from the page cache).
  if (!file_pages_dropped_) {
    engine_.file().drop_resident_pages();
    file_pages_dropped_ = true;
  }
  return EDGERT_OK;
}

edgert_status ExecutionContext::wait_for_run(edgert_error* error) {
  if (!device_) return EDGERT_OK;
  // Device time is what the two timers span when nothing waited between them: host kernels
  // that waited for the device mid-run (or at its end) put their own time in that span.
  const bool timed = device_timing_ && device_run_.pending && device_run_.waits == 0;
  if (edgert_status s = device_run_.synchronize(error)) return s;
  if (timed && timer_start_ && timer_end_) {
    float ms = 0;
    if (edgert_status s = device_->timer_elapsed(timer_start_, timer_end_, &ms, error)) return s;
    device_ms_ = ms;
  } else if (device_timing_) {
    device_ms_ = -1;
  }
  return main_.finish_layer_times(error);
}

edgert_status ExecutionContext::run(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) {
  if (edgert_status s = check_inputs(inputs, num_inputs, error)) return s;
  size_t profile = 0;
  if (edgert_status s = engine_.select_profile(inputs, static_cast<size_t>(num_inputs), &profile, error)) return s;
  if (device_ && !own_stream_)
    if (edgert_status s = create_own_stream(error)) return s;
  // The previous run's outputs stay valid until this one: wait for its work first.
  if (device_)
    if (edgert_status s = device_run_.synchronize(error)) return s;
  if (graphs_.empty()) main_.release_activations();  // a captured graph holds them
  if (edgert_status s = use_profile(profile, error)) return s;
  // Engine inputs are bound in engine order; the main graph lists the same tensors. Inputs a
  // device kernel reads go to that device first (each copy counted by the plugin).
  const LoadedGraph& graph = engine_.main_graph();
  graph_inputs_.assign(graph.inputs.size(), edgert_tensor{});
  for (size_t b = 0; b < engine_.input_tensors().size(); ++b) {
    edgert_tensor value = inputs[b];
    const edgert_memory_space space = graph.tensors[engine_.input_tensors()[b]].space;
    if (space != EDGERT_MEMORY_HOST) {
      size_t bytes = 0;
      tensor_bytes(value, &bytes);
      if (edgert_status s = reserve(staged_inputs_[b], space, bytes, 256, error)) return s;
      if (edgert_status s = device_->copy(staged_inputs_[b].data, space, value.data, EDGERT_MEMORY_HOST, bytes,
                                          own_stream_, error))
        return s;
      ++device_run_.copies;
      device_run_.pending = true;
      value.data = staged_inputs_[b].data;
    }
    for (size_t g = 0; g < graph.inputs.size(); ++g)
      if (engine_.input_tensors()[b] == graph.inputs[g]) graph_inputs_[g] = value;
  }
  for (size_t o = 0; o < bound_outputs_.size(); ++o) main_.bind_output(engine_.output_tensors()[o], nullptr, 0);
  use_host_outputs_ = false;
  if (edgert_status s = execute(graph_inputs_, own_stream_, error)) {
    if (device_) {
      edgert_error ignored{};
      device_run_.synchronize(&ignored);
    }
    return s;
  }
  // Outputs in device memory come back to host memory; unified ones are read in place.
  for (size_t o = 0; device_ && o < engine_.output_tensors().size(); ++o) {
    const int32_t t = engine_.output_tensors()[o];
    const edgert_tensor& value = main_.value(t);
    host_output_views_[o] = edgert_tensor{};
    if (graph.tensors[t].space != EDGERT_MEMORY_DEVICE) continue;
    size_t bytes = 0;
    tensor_bytes(value, &bytes);
    if (edgert_status s = reserve(host_outputs_[o], EDGERT_MEMORY_HOST, bytes, 64, error)) return s;
    if (edgert_status s = device_->copy(host_outputs_[o].data, EDGERT_MEMORY_HOST, value.data, EDGERT_MEMORY_DEVICE,
                                        bytes, own_stream_, error))
      return s;
    ++device_run_.copies;
    host_output_views_[o] = value;
    host_output_views_[o].data = host_outputs_[o].data;
    use_host_outputs_ = true;
  }
  return synchronize(error);
}

edgert_status ExecutionContext::bind_input(int32_t index, const edgert_tensor& tensor, edgert_memory_space space,
                                           edgert_error* error) {
  if (index < 0 || static_cast<size_t>(index) >= bound_inputs_.size())
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "the engine has %zu inputs; there is no input %d",
                     bound_inputs_.size(), index);
  if (space != EDGERT_MEMORY_HOST && !device_)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "input '%s': the engine has no device, so it takes host "
                     "memory only", engine_.input_names()[index].c_str());
  bound_inputs_[index] = tensor;
  bound_input_spaces_[index] = space;
  return EDGERT_OK;
}

edgert_status ExecutionContext::bind_output(int32_t index, void* data, size_t capacity, edgert_memory_space space,
                                            edgert_error* error) {
  if (index < 0 || static_cast<size_t>(index) >= bound_outputs_.size())
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "the engine has %zu outputs; there is no output %d",
                     bound_outputs_.size(), index);
  const LoadedTensor& tensor = engine_.main_graph().tensors[engine_.output_tensors()[index]];
  if (data && !reachable(tensor.space, space))
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "output '%s' is written in %s memory; bind %s or unified "
                     "memory to it", engine_.output_names()[index].c_str(),
                     tensor.space == EDGERT_MEMORY_HOST ? "host" : "device",
                     tensor.space == EDGERT_MEMORY_HOST ? "host" : "device");
  bound_outputs_[index] = {data, capacity};
  return EDGERT_OK;
}

edgert_status ExecutionContext::enqueue(void* stream, edgert_error* error) {
  for (size_t i = 0; i < bound_inputs_.size(); ++i)
    if (bound_inputs_[i].dtype == EDGERT_DTYPE_UNDEFINED)
      return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "input '%s' is not bound (bind every input first)",
                       engine_.input_names()[i].c_str());
  if (edgert_status s = check_inputs(bound_inputs_.data(), static_cast<int32_t>(bound_inputs_.size()), error)) return s;
  size_t profile = 0;
  if (edgert_status s = engine_.select_profile(bound_inputs_.data(), bound_inputs_.size(), &profile, error)) return s;
  if (device_ && !stream && !own_stream_)
    if (edgert_status s = create_own_stream(error)) return s;
  if (!stream) stream = own_stream_;
  if (graphs_.empty()) main_.release_activations();  // a captured graph holds them
  if (edgert_status s = use_profile(profile, error)) return s;
  const LoadedGraph& graph = engine_.main_graph();
  graph_inputs_.assign(graph.inputs.size(), edgert_tensor{});
  for (size_t b = 0; b < bound_inputs_.size(); ++b) {
    edgert_tensor value = bound_inputs_[b];
    const edgert_memory_space space = graph.tensors[engine_.input_tensors()[b]].space;
    // Memory the kernels reading it reach is used where it is; other memory is copied once.
    if (!reachable(space, bound_input_spaces_[b])) {
      size_t bytes = 0;
      tensor_bytes(value, &bytes);
      if (edgert_status s = reserve(staged_inputs_[b], space, bytes, 256, error)) return s;
      if (edgert_status s = device_->copy(staged_inputs_[b].data, space, value.data, bound_input_spaces_[b], bytes,
                                          stream, error))
        return s;
      ++device_run_.copies;
      device_run_.pending = true;
      value.data = staged_inputs_[b].data;
    }
    for (size_t g = 0; g < graph.inputs.size(); ++g)
      if (engine_.input_tensors()[b] == graph.inputs[g]) graph_inputs_[g] = value;
  }
  for (size_t o = 0; o < bound_outputs_.size(); ++o)
    main_.bind_output(engine_.output_tensors()[o], bound_outputs_[o].first, bound_outputs_[o].second);
  use_host_outputs_ = false;
  if (edgert_status s = execute(graph_inputs_, stream, error)) return s;
  // An output that did not fit its binding (or was written elsewhere) is copied into it; one
  // larger than its binding is an error, with or without a device (the executor then wrote it
  // to the context's own memory, and success would leave the caller's buffer unwritten).
  for (size_t o = 0; o < bound_outputs_.size(); ++o) {
    const int32_t t = engine_.output_tensors()[o];
    const edgert_tensor& value = main_.value(t);
    if (!bound_outputs_[o].first || value.data == bound_outputs_[o].first) continue;
    size_t bytes = 0;
    tensor_bytes(value, &bytes);
    if (bytes > bound_outputs_[o].second)
      return set_error(error, EDGERT_ERR_SHAPE, "output '%s' has %zu bytes; its binding holds %zu",
                       engine_.output_names()[o].c_str(), bytes, bound_outputs_[o].second);
    if (!device_) {
      std::memcpy(bound_outputs_[o].first, value.data, bytes);
      continue;
    }
    if (edgert_status s = device_->copy(bound_outputs_[o].first, graph.tensors[t].space, value.data,
                                        graph.tensors[t].space, bytes, stream, error))
      return s;
    ++device_run_.copies;
  }
  return EDGERT_OK;
}

}  // namespace edgert
