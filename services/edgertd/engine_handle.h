// One loaded engine as a pipeline uses it: the engine and an execution context through the
// public C API (libedgert), its footprint known from the header before loading, and the
// input buffer preprocess writes into.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "edgert/edgert.h"
#include "engine_signing.h"

namespace edgert::daemon {

struct EngineFootprint {
  uint64_t file_bytes = 0;        // mapped read-only (weights used in place)
  uint64_t activation_bytes = 0;  // planned arena, or the sum of activation sizes when unplanned
  // What the kernels keep after prepare (weights packed or transformed for their tactics),
  // beside the mapped file: for a CPU engine as much as its weights again, or more.
  uint64_t kernel_state_bytes = 0;
  // Weights in the file no kernel reads (their readers hold prepared copies): never resident.
  uint64_t unread_weight_bytes = 0;
  // A GPU engine's DEVICE memory: its device arena and workspace, and the copies of the
  // constants its device kernels read (uploaded once at load). Unified (host-mapped) arenas
  // are host memory, in activation_bytes.
  uint64_t device_bytes = 0;
  // What the memory budget holds against it: device memory too where it is the board's DRAM
  // (a Jetson; set_device_memory_is_host), else the host part only (a discrete GPU's memory
  // is checked against the GPU's free memory: device_memory_refusal).
  uint64_t total() const;
};

// Whether DEVICE memory comes out of the host memory budget (unified-memory boards: true, the
// default); the daemon sets it from its board profile at start.
void set_device_memory_is_host(bool is_host);

// "" when `footprint`'s device memory fits the free memory of the GPU of `plugin_path`'s cuda
// plugin (a discrete GPU's own budget, cudaMemGetInfo), else the refusal with the numbers.
// Nothing to check (""), when device memory is host memory or the engine needs none.
std::string device_memory_refusal(const EngineFootprint& footprint, const std::string& plugin_path,
                                  const std::string& what);

// Reads and verifies the header only (no plugins loaded): what loading would cost.
// Throws std::runtime_error with the runtime's message when the file is bad.
EngineFootprint read_engine_footprint(const std::string& path);

// What hot swap checks before loading anything: the header's board and plugins, the
// footprint, whether a self-test vector is stored, and the signature (against `trusted`).
struct EngineFacts {
  EngineFootprint footprint;
  std::string board, fingerprint;
  std::vector<std::string> plugins;
  bool has_self_test = false;
  signing::SignatureCheck signature;
};
// Throws std::runtime_error with the runtime's message when the file is bad (checksum, format).
EngineFacts read_engine_facts(const std::string& path, const std::vector<signing::PublicKey>& trusted);

// Plugins of `plugins` for which no library is found on plugin_path (see plugin_loader.h).
std::vector<std::string> missing_plugins(const std::vector<std::string>& plugins, const std::string& plugin_path);

class EngineHandle {
 public:
  // Loads `path` (plugins from plugin_path, may be empty) and makes one context.
  // Throws std::runtime_error with the runtime's message.
  // `id` names the engine in results (its sha256); empty: computed from the file.
  // `gpu`: how its context shares the GPU (edgert_context_set_priority, _set_gpu_share).
  EngineHandle(const std::string& path, const std::string& plugin_path, const std::string& board, bool mlock_weights,
               const std::string& id = "", const GpuScheduling& gpu = {});
  ~EngineHandle();
  EngineHandle(const EngineHandle&) = delete;
  EngineHandle& operator=(const EngineHandle&) = delete;

  const std::string& path() const { return path_; }
  const std::string& id() const { return id_; }  // the engine file's sha256
  const edgert_tensor_info& input() const { return input_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const EngineFootprint& footprint() const { return footprint_; }
  uint64_t locked_bytes() const { return locked_bytes_; }

  // Runs on `input` (the engine's single image input) and returns the outputs, valid until the
  // next run. Throws std::runtime_error.
  const std::vector<edgert_tensor>& run(const edgert_tensor& input);

  // Whether run_in_place works for this engine: it has a device, and outputs of fixed size (on
  // the first call, host-mapped output buffers are allocated and bound for it).
  bool can_run_in_place();
  // Runs on `input` where it lies: bound as host-mapped memory the device reads in place (a
  // camera frame in host-mapped capture buffers, frame_memory.h), the outputs written into this
  // handle's host-mapped buffers: no copies. Needs can_run_in_place(); throws std::runtime_error.
  const std::vector<edgert_tensor>& run_in_place(const edgert_tensor& input);
  // Device time of the last run in microseconds (engines with a device), else -1.
  double device_us() const {
    const double ms = edgert_context_device_ms(context_);
    return ms < 0 ? -1 : ms * 1000;
  }
  // Copies between memory spaces this pipeline's runs made (0 without a device).
  uint64_t device_copies() const { return edgert_context_device_copies(context_); }

  // Runs the engine's self-test vector `runs` times (the first runs warm up: arena, caches)
  // and compares the last outputs with the stored ones. Returns "" when they match (or when
  // the engine stores none: *had_vector = false), else what differs. Call before the engine
  // serves frames: it uses the same execution context.
  std::string replay_self_test(int runs, bool* had_vector);

 private:
  std::string path_, id_;
  edgert_engine* engine_ = nullptr;
  edgert_context* context_ = nullptr;
  edgert_tensor_info input_{};
  std::vector<std::string> output_names_;
  std::vector<edgert_tensor> outputs_;
  EngineFootprint footprint_;
  uint64_t locked_bytes_ = 0;
  bool in_place_checked_ = false, in_place_ = false;
  std::vector<void*> output_buffers_;  // host-mapped, bound to the outputs (run_in_place)

  void lock_mapping_in_ram();
};

}  // namespace edgert::daemon
