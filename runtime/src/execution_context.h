// The mutable state of one engine run at a time: the main graph's executor and the activation
// allocator shared with its subgraphs. Checks inputs against the engine's bindings and profile.
#pragma once

#include <vector>

#include "graph_executor.h"
#include "loaded_engine.h"
#include "tensor_allocator.h"

namespace edgert {

class ExecutionContext {
 public:
  explicit ExecutionContext(const LoadedEngine& engine);
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  edgert_status run(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error);
  // Valid after a successful run, until the next run.
  const edgert_tensor& output(int32_t index) const;
  const LoadedEngine& engine() const { return engine_; }

 private:
  edgert_status check_inputs(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) const;

  const LoadedEngine& engine_;
  TensorAllocator allocator_;  // declared before main_: the executor releases into it
  GraphExecutor main_;
  std::vector<edgert_tensor> graph_inputs_;
};

}  // namespace edgert
