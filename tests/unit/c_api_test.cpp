// The public C API and its RAII wrapper, through libedgert.so.
#include <gtest/gtest.h>

#include <cstring>

#include "edgert/edgert.hpp"
#include "test_support.h"

namespace edgert::test {
namespace {

TEST(CApi, LoadRunAndReadOutputs) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();

  Engine engine(dir.file("small.engine"), &options);
  ASSERT_EQ(engine.num_inputs(), 1);
  ASSERT_EQ(engine.num_outputs(), 1);
  EXPECT_STREQ(engine.input_info(0).name, "x");
  EXPECT_EQ(engine.input_info(0).dims[1], 4);
  EXPECT_STREQ(edgert_engine_board(engine.get()), host_board().c_str());

  Context context(engine);
  for (float scale : {1.0f, 2.0f}) {  // a second run reuses prepared kernels and memory
    float x[4] = {scale, scale, 4.0f * scale, -scale};
    context.run({edgert_tensor{EDGERT_DTYPE_FLOAT32, 2, {1, 4}, x}});
    edgert_tensor y = context.output(0);
    const float* v = static_cast<const float*>(y.data);
    EXPECT_FLOAT_EQ(v[0], scale + 0.25f);
    EXPECT_FLOAT_EQ(v[2], 2.0f * scale - 1.0f);
  }
}

TEST(CApi, ErrorsComeBackAsStatusAndMessage) {
  edgert_engine* engine = nullptr;
  edgert_error error{};
  EXPECT_EQ(edgert_engine_load("/nonexistent/model.engine", nullptr, &engine, &error), EDGERT_ERR_IO);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::strstr(error.message, "/nonexistent/model.engine"), nullptr) << error.message;
  EXPECT_STREQ(edgert_status_string(EDGERT_ERR_CHECKSUM), "checksum mismatch");
  EXPECT_THROW(Engine("/nonexistent/model.engine"), Error);
}

TEST(CApi, WrongInputCountIsRefused) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  Engine engine(dir.file("small.engine"), &options);
  Context context(engine);
  try {
    context.run({});
    FAIL() << "a run without inputs succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), EDGERT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("1 inputs, 0 were given"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace edgert::test
