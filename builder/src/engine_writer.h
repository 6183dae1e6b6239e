// IR with selected kernels -> engine file bytes (FlatBuffer + aligned weights + trailer).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "board_profile.h"
#include "ir.h"
#include "memory_planner.h"
#include "plugin_loader.h"

namespace edgert::builder {

struct InputShapeRange {
  std::vector<int64_t> min, opt, max;
};

// A float32 tensor of the self-test vector (engine.fbs SelfTestTensor).
struct SelfTestTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SelfTestVector {
  uint64_t seed = 0;
  std::vector<SelfTestTensor> inputs, outputs;
};

// The key that will sign the engine: the writer stores its name and public key and leaves a
// zero signature for signing::sign_engine to fill.
struct SignerRef {
  std::string name;
  std::vector<uint8_t> public_key;
};

struct WriterInputs {
  const Model* model = nullptr;
  // Optimization profiles, each engine input name -> range; empty: none.
  std::vector<std::map<std::string, InputShapeRange>> profiles;
  const config::BoardProfile* board = nullptr;
  std::vector<const LoadedPlugin*> plugins;  // every plugin a node may name
  // The plans of graphs[0], one per profile (one without profiles); empty: none stored.
  std::vector<const MemoryPlan*> memory_plans;
  // Per memory plan: the kernels' state at its shapes (Node::kernel_state_bytes summed).
  std::vector<uint64_t> kernel_state_bytes;
  const SelfTestVector* self_test = nullptr; // null: none stored
  const SignerRef* signer = nullptr;         // null: unsigned
};

// `reuse`: a buffer (an earlier serialization's) whose memory the result may take over.
std::vector<uint8_t> serialize_engine(const WriterInputs& inputs, std::vector<uint8_t> reuse = {});

// Writes to a temporary file beside `path`, fsyncs, renames over `path` and fsyncs the
// directory: a reader sees the old file or the complete new one, never a partial one.
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace edgert::builder
