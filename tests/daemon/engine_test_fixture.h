// Engines built in a test from a tiny ONNX model (graph_test_support.h) for the x86_64-generic
// board with the CPU plugin, loaded from memory and run: what the daemon-side tests of engines
// that do part of edgertd's work (camera engines, postprocessing inside the engine) compare
// against edgertd's own code.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "board_profile.h"
#include "engine_builder.h"
#include "execution_context.h"
#include "graph_test_support.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {

class BuiltEngineTest : public ::testing::Test {
 protected:
  // `configure` sets what the test is about (a camera input, a postprocess) on the options.
  std::unique_ptr<LoadedEngine> build(const onnx::ModelProto& model,
                                      const std::function<void(builder::BuildOptions&)>& configure) {
    save_model(model, dir_.file("model.onnx"));
    builder::BuildOptions options;
    options.model_path = dir_.file("model.onnx");
    options.board = config::load_board_profile(source_dir() + "/board_profiles/x86_64-generic.yaml");
    options.plugin_path = plugin_dir_.c_str();
    options.tactics = builder::TacticPolicy::kFirst;
    configure(options);
    auto& bytes = *engines_.emplace_back(std::make_unique<std::vector<uint8_t>>(builder::build_engine(options).engine));
    edgert_load_options load;
    edgert_load_options_init(&load);
    load.plugin_path = plugin_dir_.c_str();
    load.allow_board_mismatch = 1;
    edgert_error error{};
    auto engine = LoadedEngine::load_memory(bytes.data(), bytes.size(), load, &error);
    EXPECT_NE(engine, nullptr) << error.message;
    return engine;
  }

  // Runs `engine` on one input; the context holds the outputs. Null when the run's status is not
  // `expect` (a test failure) or, as expected, not OK (`message` gets the error).
  static std::unique_ptr<ExecutionContext> run_once(const LoadedEngine& engine, edgert_dtype dtype,
                                                    const std::vector<int64_t>& dims, void* data,
                                                    edgert_status expect = EDGERT_OK, std::string* message = nullptr) {
    auto context = std::make_unique<ExecutionContext>(engine);
    edgert_tensor t{dtype, static_cast<int32_t>(dims.size()), {}, data};
    for (size_t d = 0; d < dims.size(); ++d) t.dims[d] = dims[d];
    edgert_error error{};
    EXPECT_EQ(context->run(&t, 1, &error), expect) << error.message;
    if (message) *message = error.message;
    return expect == EDGERT_OK ? std::move(context) : nullptr;
  }

  std::string plugin_dir_ = cpu_plugin_dir();
  TempDir dir_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> engines_;
};

}  // namespace edgert::test
