// The mutable state of one engine run at a time: the main graph's executor, the allocators
// shared with its subgraphs, the arenas of the memory plan and, for engines with device
// kernels, the context's stream, its device arenas and a captured CUDA graph. Checks inputs
// against the engine's bindings and profiles.
//
// Two ways to run:
//   run(inputs)  synchronous, on host memory: inputs a device kernel reads are copied to the
//                device first, outputs written there are copied back (each copy counted by the
//                plugin), and the call returns with the outputs ready on the host.
//   enqueue()    TensorRT's enqueueV3: inputs and outputs bound with bind_input/bind_output,
//                work enqueued on a stream, no copies where a binding is in a space the device
//                reads and writes (device or unified memory). synchronize() waits.
// With every node a capturable device kernel, a second run with the same shapes and memory
// is captured as one CUDA graph and later runs replay it (captured again when shapes or
// bindings change; set_cuda_graphs(false) turns it off).
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
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  edgert_status run(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error);
  // Valid after a successful run, until the next run. After enqueue: the output's tensor in
  // its own space (the binding when bound).
  const edgert_tensor& output(int32_t index) const;
  const LoadedEngine& engine() const { return engine_; }

  // Binds engine input `index` (dtype, shape and data of `tensor`, memory of `space`) for the
  // next enqueues; borrowed until the run that reads it has finished.
  edgert_status bind_input(int32_t index, const edgert_tensor& tensor, edgert_memory_space space, edgert_error* error);
  // Engine output `index` is written into `data` (`capacity` bytes of `space`) by enqueue.
  edgert_status bind_output(int32_t index, void* data, size_t capacity, edgert_memory_space space, edgert_error* error);
  // Enqueues a run with the bound inputs and outputs on `stream` (the device's stream type;
  // null: the context's own). Host kernels in the engine make it wait for the device first.
  edgert_status enqueue(void* stream, edgert_error* error);
  // Waits for the last enqueue.
  edgert_status synchronize(edgert_error* error);

  // Per-node time of the main graph's next runs, in nanoseconds (see GraphExecutor).
  void set_layer_times(std::vector<double>* times);
  // Device time of each next run, between timers at its start and end on the stream, in
  // milliseconds (device_ms()); off by default.
  void set_device_timing(bool on) { device_timing_ = on; }
  bool device_timing() const { return device_timing_; }
  double device_ms() const { return device_ms_; }
  // Copies between memory spaces this context's runs made (staging, outputs, copy nodes; a
  // replayed graph its captured ones): 0 a run where every binding is where its kernels read.
  uint64_t device_copies() const { return device_run_.copies; }
  void set_cuda_graphs(bool on);
  // Priority of the context's own stream on its device (larger: scheduled first; 0 default);
  // a no-op for host-only engines.
  edgert_status set_priority(int32_t priority, edgert_error* error);
  // Share of the device's multiprocessors the context's kernels may use (1-100 percent; 100,
  // the default, all): a heavy context confined to part of the GPU leaves the rest to others.
  // EDGERT_ERR_UNSUPPORTED where the device cannot partition; a no-op for host-only engines.
  edgert_status set_gpu_share(int32_t percent, edgert_error* error);
  // Whether the last run was a CUDA graph launch (a replay, or the launch right after capture).
  bool replaying_graph() const { return replayed_; }
  size_t captured_graphs() const { return graphs_.size(); }

  // Bytes of the planned arenas and workspaces of all spaces (0 before the first run or
  // without a plan).
  size_t arena_bytes() const { return arena_bytes_; }
  // What its prepared kernels keep (packed weights; 0 before the first run): the figure the
  // engine's footprint records as kernel state.
  uint64_t kernel_state_bytes() const { return main_.kernel_state_bytes(); }
  // The optimization profile of the last run (0 before it or without profiles).
  size_t profile() const { return profile_; }

 private:
  edgert_status check_inputs(const edgert_tensor* inputs, int32_t num_inputs, edgert_error* error) const;
  // Makes `profile` the one runs use: its tactics, and arenas large enough for its plan.
  edgert_status use_profile(size_t profile, edgert_error* error);
  // The run itself, on `stream`, with graph inputs already in their spaces.
  edgert_status execute(const std::vector<edgert_tensor>& graph_inputs, void* stream, edgert_error* error);
  void drop_graph();  // every captured graph

  // One buffer of a memory space, grown on demand, freed with the context.
  struct Buffer {
    void* data = nullptr;
    size_t capacity = 0;
    edgert_memory_space space = EDGERT_MEMORY_HOST;
  };
  edgert_status reserve(Buffer& buffer, edgert_memory_space space, size_t bytes, size_t alignment, edgert_error* error);
  void release(Buffer& buffer);

  const LoadedEngine& engine_;
  const edgert_device* device_ = nullptr;
  // Arenas and workspaces of the plan (host, device, unified), made on the first run;
  // declared before main_, which points into them.
  Buffer host_arena_, host_workspace_, device_arena_, unified_arena_, device_workspace_;
  size_t arena_bytes_ = 0;
  size_t profile_ = 0;
  bool arena_ready_ = false;
  // Allocators, declared before main_: the executor releases into them.
  TensorAllocator allocator_;
  std::unique_ptr<TensorAllocator> device_memory_, unified_memory_;
  DeviceRun device_run_;
  void* own_stream_ = nullptr;
  int32_t priority_ = 0;
  int32_t gpu_share_ = 100;
  edgert_status create_own_stream(edgert_error* error);
  // Lets the stream go (after its work) so the next run makes it anew as configured.
  edgert_status drop_own_stream(edgert_error* error);
  GraphExecutor main_;
  std::vector<edgert_tensor> graph_inputs_;
  // Device staging of host inputs (run) and host copies of device outputs (run).
  std::vector<Buffer> staged_inputs_, host_outputs_;
  std::vector<edgert_tensor> host_output_views_;
  // Bindings for enqueue: per engine input / output.
  std::vector<edgert_tensor> bound_inputs_;
  std::vector<edgert_memory_space> bound_input_spaces_;
  std::vector<std::pair<void*, size_t>> bound_outputs_;
  bool use_host_outputs_ = false;  // output() returns the host copies (after run)
  // CUDA graphs of the whole run (device engines whose every node is a capturable kernel), one
  // per set of inputs (shapes and pointers) a run was given twice: a camera's frames rotate
  // among a few capture buffers bound in place, and each buffer replays its own graph. At most
  // kMaxGraphs, the oldest dropped first; while any exists the activations stay put.
  struct CapturedGraph {
    std::vector<edgert_tensor> inputs;
    void* graph = nullptr;
    uint64_t copies = 0;  // copies between memory spaces in it: each replay makes them again
  };
  static constexpr size_t kMaxGraphs = 8;
  bool graphs_allowed_ = true, replayed_ = false;
  std::vector<CapturedGraph> graphs_;
  std::vector<std::vector<edgert_tensor>> seen_inputs_;  // recent inputs without a graph, newest last
  std::vector<edgert_tensor> last_inputs_;  // the previous run's: capture only after a run of the same shapes
  void* timer_start_ = nullptr;
  void* timer_end_ = nullptr;
  bool device_timing_ = false;
  double device_ms_ = 0;
  bool file_pages_dropped_ = false;  // see synchronize()
  // Waits for the device's work and reads its timers; synchronize() without the page drop.
  edgert_status wait_for_run(edgert_error* error);
  std::vector<double>* layer_times_ = nullptr;
};

}  // namespace edgert
