// Runs one graph of a LoadedEngine: prepares kernels when shapes change, places activations
// with the context's TensorAllocator, frees each activation after its last reader, and runs
// If / Loop / Scan by executing their subgraphs with child executors.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "loaded_engine.h"
#include "tensor_allocator.h"

namespace edgert {

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

  // Places planned tensors in `arena` (plan.arena_bytes, aligned as the plan says) and node
  // workspaces in `workspace` (plan.workspace_bytes) instead of the allocator; both borrowed
  // for the executor's life. Tensors larger than planned still use the allocator.
  void use_arena(const ArenaPlan* plan, uint8_t* arena, void* workspace);
  // Runs the tactics the engine chose for optimization profile `profile` from the next run on
  // (every kernel is prepared again).
  void set_profile(size_t profile);
  // When set, run() writes each node's wall time in nanoseconds into (*times)[node index].
  void set_layer_times(std::vector<double>* times) { layer_times_ = times; }

  // For control-flow ops: the executor of a subgraph, made on first use and kept (its kernels
  // stay prepared across iterations and runs).
  GraphExecutor& subgraph(int32_t graph_index);
  // Allocates `out` (dtype and shape already set) from the context's allocator as the value
  // of tensor `t`.
  edgert_status allocate_output(int32_t t, edgert_tensor& out, const char* node_name, edgert_error* error);

 private:
  struct NodeState {
    void* kernel_state = nullptr;
    bool prepared = false;
    int64_t tactic = 0;  // the tactic prepared: the engine's, or a fallback for these shapes
    edgert_prepare_info info{};
    std::vector<edgert_tensor> inputs;
    std::vector<edgert_tensor> outputs;
    std::vector<edgert_tensor> last_inputs;
  };

  edgert_status run_node(size_t index, edgert_error* error);
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
  std::map<int32_t, std::unique_ptr<GraphExecutor>> subgraphs_;
  const ArenaPlan* plan_ = nullptr;
  uint8_t* arena_ = nullptr;
  void* workspace_ = nullptr;
  std::vector<double>* layer_times_ = nullptr;
  size_t profile_ = 0;
};

// Tensor helpers shared by the executor and the control-flow ops.
bool tensor_bytes(const edgert_tensor& t, size_t* bytes);
std::string shape_text(const int64_t* dims, int32_t rank);

}  // namespace edgert
