// Runs a LoadedEngine: prepares kernels when shapes change, places activations with a
// TensorAllocator, and frees each activation after its last reader.
#pragma once

#include <vector>

#include "loaded_engine.h"
#include "tensor_allocator.h"

namespace edgert {

class ExecutionContext {
 public:
  explicit ExecutionContext(const LoadedEngine& engine);
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  edgert_status run(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error);
  // Valid after a successful run, until the next run.
  const edgert_tensor& output(int32_t index) const;
  const LoadedEngine& engine() const { return engine_; }

 private:
  struct NodeState {
    void* kernel_state = nullptr;
    bool prepared = false;
    edgert_prepare_info info{};
    std::vector<edgert_tensor> inputs;        // gathered for each call
    std::vector<edgert_tensor> outputs;       // dtype and shape from the last prepare
    std::vector<edgert_tensor> last_inputs;   // dtype and shape seen by the last prepare
  };

  edgert_status check_inputs(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) const;
  edgert_status run_node(size_t index, edgert_error* error);
  void release_activations();

  const LoadedEngine& engine_;
  const LoadedGraph& graph_;
  TensorAllocator allocator_;
  std::vector<NodeState> nodes_;
  std::vector<edgert_tensor> values_;  // current value of every tensor of the main graph
  std::vector<void*> owned_;           // allocator blocks backing values_ (null if borrowed)
};

}  // namespace edgert
