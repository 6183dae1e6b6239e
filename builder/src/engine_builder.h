// The whole build: ONNX import -> kernel selection and shape inference -> engine bytes.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "board_profile.h"
#include "engine_writer.h"
#include "ir.h"
#include "memory_planner.h"
#include "passes/pass_manager.h"

namespace edgert::builder {

struct BuildOptions {
  std::string model_path;
  config::BoardProfile board;
  const char* plugin_path = nullptr;  // as edgert_load_options.plugin_path
  std::function<void(const std::string&)> log;  // -v output; may be empty
  std::map<std::string, InputShapeRange> profile;  // --min/opt/max-shapes, by input name
  bool optimize = true;  // run the graph passes (PassManager::standard); false: as imported
};

struct BuildResult {
  Model model;                 // after selection: what the engine describes
  std::vector<uint8_t> engine; // the engine file's bytes
  std::vector<PassReport> passes;
  MemoryPlan memory_plan;
};

// Throws BuildError (or config::ConfigError) with a message naming the file and node at fault.
BuildResult build_engine(const BuildOptions& options);

}  // namespace edgert::builder
