// Runs one graph of a LoadedEngine: prepares kernels when shapes change, places activations
// with the context's TensorAllocator, frees each activation after its last reader, runs
// If / Loop / Scan by executing their subgraphs with child executors, and keeps the sequence
// values the sequence ops make (sequence_ops.h).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "loaded_engine.h"
#include "owned_value.h"
#include "tensor_allocator.h"
#include "tensor_extent.h"

namespace edgert {

// What an execution context gives its main graph for device kernels: the device, the stream
// they enqueue on, and the allocators of the device's spaces. `pending` is true while work is
// enqueued that the host has not waited for: a host kernel reading a tensor waits first.
struct DeviceRun {
  const edgert_device* device = nullptr;
  void* stream = nullptr;
  TensorAllocator* device_memory = nullptr;
  TensorAllocator* unified_memory = nullptr;
  bool pending = false;
  bool used_allocator = false;  // a run placed a tensor outside the plan (no graph capture then)
  // Copies between memory spaces this context's runs made: what a pipeline reports per frame.
  // A replayed CUDA graph counts the copies captured in it.
  uint64_t copies = 0;
  // Waits for the device since the run began: host kernels between device ones wait mid-run.
  uint32_t waits = 0;

  // Waits for the enqueued work, if any.
  edgert_status synchronize(edgert_error* error);
};

// Where the planned tensors and the workspaces of one context lie (ExecutionContext's buffers).
struct ArenaBases {
  uint8_t* host = nullptr;
  uint8_t* device = nullptr;
  uint8_t* unified = nullptr;
  void* host_workspace = nullptr;
  void* device_workspace = nullptr;
};

class GraphExecutor {
 public:
  GraphExecutor(const LoadedEngine& engine, int32_t graph_index, TensorAllocator& allocator,
                const GraphExecutor* parent);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  // Runs with one tensor per graph input (borrowed for the duration of the call). Outputs stay
  // valid until the next run or release_activations().
  edgert_status run(const edgert_tensor* inputs, size_t num_inputs, edgert_error* error);
  const edgert_tensor& value(int32_t tensor) const { return values_[tensor]; }
  const edgert_tensor& output(size_t index) const { return values_[graph_.outputs[index]]; }
  const LoadedGraph& graph() const { return graph_; }
  void release_activations();

  // Places planned tensors in the arena of their space (plan's sizes, aligned as the plan says)
  // and node workspaces in the workspace of their kernel's space, instead of the allocators; all
  // borrowed for the executor's life. Tensors larger than planned still use the allocators.
  void use_arena(const ArenaPlan* plan, const ArenaBases& bases);
  // The main graph's device side (null: every kernel runs on the host). Borrowed.
  void use_device(DeviceRun* device) { device_ = device; }
  // Engine output `t` is written straight into caller memory of `capacity` bytes (when it fits)
  // instead of the arena; null unbinds.
  void bind_output(int32_t t, void* data, size_t capacity);
  // Runs the tactics the engine chose for optimization profile `profile` from the next run on
  // (every kernel is prepared again).
  void set_profile(size_t profile);
  // When set, run() writes each node's time in nanoseconds into (*times)[node index]: wall time
  // for host nodes, device time (between timers on the stream) for device nodes, which
  // finish_layer_times() reads once the run's work is done.
  void set_layer_times(std::vector<double>* times) { layer_times_ = times; }
  edgert_status finish_layer_times(edgert_error* error);
  // Every kernel is prepared and none depends on input values for its shapes: the next run
  // with the same inputs enqueues exactly the same work (CUDA graph capture relies on it).
  bool shapes_are_static() const;
  // What the prepared kernels of this graph and of its subgraphs made so far keep
  // (edgert_prepare_info.kernel_state_bytes summed): packed weights, beside the mapped file.
  uint64_t kernel_state_bytes() const;

  // For control-flow ops: the executor of a subgraph, made on first use and kept (its kernels
  // stay prepared across iterations and runs).
  GraphExecutor& subgraph(int32_t graph_index);
  // Allocates `out` (dtype and shape already set) from the context's allocator as the value
  // of tensor `t`.
  edgert_status allocate_output(int32_t t, edgert_tensor& out, const char* node_name, edgert_error* error);
  // Makes `value` (a tensor, a sequence, or nothing: dtype UNDEFINED) the value of tensor `t`,
  // copied: a tensor into memory allocate_output gives, a sequence into an OwnedValue.
  edgert_status set_value(int32_t t, const edgert_tensor& value, const char* node_name, edgert_error* error);
  // Makes `value` the value of tensor `t`, kept by this executor until the next run.
  void adopt_value(int32_t t, OwnedValue value);

 private:
  struct NodeState {
    void* kernel_state = nullptr;
    bool prepared = false;
    int64_t tactic = 0;  // the tactic prepared: the engine's, or a fallback for these shapes
    // Every input the kernel reads on the host (plugin.h: host_inputs) is a constant: a
    // data-dependent kernel then depends on values that never change, and stays prepared.
    bool host_values_fixed = false;
    edgert_prepare_info info{};
    std::vector<edgert_tensor> inputs;
    std::vector<edgert_tensor> outputs;
    std::vector<edgert_tensor> last_inputs;
  };

  edgert_status run_node(size_t index, edgert_error* error);
  edgert_status run_copy(size_t index, edgert_error* error);
  TensorAllocator& allocator_for(edgert_memory_space space);
  edgert_status run_kernel(size_t index, edgert_error* error);
  edgert_status prepare_kernel(size_t index, edgert_error* error);
  void release_kernel_state(size_t index);
  void free_after(size_t index);

  const LoadedEngine& engine_;
  const LoadedGraph& graph_;
  TensorAllocator& allocator_;
  const GraphExecutor* parent_;
  std::vector<NodeState> nodes_;
  std::vector<edgert_tensor> values_;
  std::vector<void*> owned_;
  std::vector<std::unique_ptr<OwnedValue>> owned_values_;  // per tensor: sequences, while alive
  std::map<int32_t, std::unique_ptr<GraphExecutor>> subgraphs_;
  const ArenaPlan* plan_ = nullptr;
  ArenaBases arena_;
  DeviceRun* device_ = nullptr;
  std::vector<std::pair<void*, size_t>> bound_outputs_;  // per tensor; null when not bound
  std::vector<double>* layer_times_ = nullptr;
  std::vector<std::pair<void*, void*>> timers_;  // per node: start, end (device nodes)
  size_t profile_ = 0;
};

}  // namespace edgert
