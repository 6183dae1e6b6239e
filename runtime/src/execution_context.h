// The mutable state of one engine run at a time: the main graph's executor and the activation
// allocator shared with its subgraphs. Checks inputs against the engine's bindings and profile.
#pragma once

#include <memory>
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
  // Per-node wall time of the main graph's next runs, in nanoseconds (see GraphExecutor).
  void set_layer_times(std::vector<double>* times) { main_.set_layer_times(times); }
  // Bytes of the planned arena and workspace (0 before the first run or without a plan).
  size_t arena_bytes() const { return arena_bytes_; }
  // The optimization profile of the last run (0 before it or without profiles).
  size_t profile() const { return profile_; }

 private:
  edgert_status check_inputs(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) const;

  // Makes `profile` the one runs use: its tactics, and an arena large enough for its plan.
  edgert_status use_profile(size_t profile, edgert_error* error);

  struct FreeDeleter {
    void operator()(void* p) const;
  };
  const LoadedEngine& engine_;
  // One arena per context for the engine's memory plan, made on the first run; declared
  // before main_, which points into it.
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  std::unique_ptr<uint8_t, FreeDeleter> workspace_;
  size_t arena_bytes_ = 0;
  size_t arena_capacity_ = 0, workspace_capacity_ = 0;  // bytes allocated for arena_, workspace_
  size_t profile_ = 0;
  bool arena_ready_ = false;
  TensorAllocator allocator_;  // declared before main_: the executor releases into it
  GraphExecutor main_;
  std::vector<edgert_tensor> graph_inputs_;
};

}  // namespace edgert
