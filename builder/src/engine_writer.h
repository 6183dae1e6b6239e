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

struct WriterInputs {
  const Model* model = nullptr;
  std::map<std::string, InputShapeRange> profile;  // engine input name -> range; empty: none
  const config::BoardProfile* board = nullptr;
  std::vector<const LoadedPlugin*> plugins;  // every plugin a node may name
  const MemoryPlan* memory_plan = nullptr;   // the plan of graphs[0]; null: none stored
};

std::vector<uint8_t> serialize_engine(const WriterInputs& inputs);

// Writes to a temporary file beside `path`, fsyncs, renames over `path` and fsyncs the
// directory: a reader sees the old file or the complete new one, never a partial one.
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace edgert::builder
