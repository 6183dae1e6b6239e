// One loaded engine as a pipeline uses it: the engine and an execution context through the
// public C API (libedgert), its footprint known from the header before loading, and the
// input buffer preprocess writes into.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "edgert/edgert.h"

namespace edgert::daemon {

struct EngineFootprint {
  uint64_t file_bytes = 0;        // mapped read-only (weights used in place)
  uint64_t activation_bytes = 0;  // planned arena, or the sum of activation sizes when unplanned
  uint64_t total() const { return file_bytes + activation_bytes; }
};

// Reads and verifies the header only (no plugins loaded): what loading would cost.
// Throws std::runtime_error with the runtime's message when the file is bad.
EngineFootprint read_engine_footprint(const std::string& path);

class EngineHandle {
 public:
  // Loads `path` (plugins from plugin_path, may be empty) and makes one context.
  // Throws std::runtime_error with the runtime's message.
  EngineHandle(const std::string& path, const std::string& plugin_path, const std::string& board, bool mlock_weights);
  ~EngineHandle();
  EngineHandle(const EngineHandle&) = delete;
  EngineHandle& operator=(const EngineHandle&) = delete;

  const std::string& path() const { return path_; }
  const std::string& id() const { return id_; }  // file name; the engine store names files by sha256
  const edgert_tensor_info& input() const { return input_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const EngineFootprint& footprint() const { return footprint_; }
  uint64_t locked_bytes() const { return locked_bytes_; }

  // Runs on `input` (the engine's single image input) and returns the outputs, valid until the
  // next run. Throws std::runtime_error.
  const std::vector<edgert_tensor>& run(const edgert_tensor& input);

 private:
  std::string path_, id_;
  edgert_engine* engine_ = nullptr;
  edgert_context* context_ = nullptr;
  edgert_tensor_info input_{};
  std::vector<std::string> output_names_;
  std::vector<edgert_tensor> outputs_;
  EngineFootprint footprint_;
  uint64_t locked_bytes_ = 0;

  void lock_mapping_in_ram();
};

}  // namespace edgert::daemon
