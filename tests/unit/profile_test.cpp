// Dynamic shapes: the optimization profile recorded at build time is what the runtime accepts.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "edgert/edgert.hpp"
#include "test_support.h"

namespace edgert::test {
namespace {

class ProfileTest : public ::testing::Test {
 protected:
  void SetUp() override { save_model(make_dynamic_model(), dir_.file("dynamic.onnx")); }
  CommandResult build(const std::string& extra) {
    return run_command(edgert_cli() + " build " + dir_.file("dynamic.onnx") + " -o " + dir_.file("dynamic.engine") + " " + extra);
  }
  TempDir dir_;
};

TEST_F(ProfileTest, ShapesInsideTheProfileRunAndOutsideAreRefusedWithTheRange) {
  auto built = build("--min-shapes x:1x2 --opt-shapes x:1x4 --max-shapes x:1x8");
  ASSERT_EQ(built.exit_code, 0) << built.output;

  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  Engine engine(dir_.file("dynamic.engine"), &options);
  EXPECT_EQ(engine.input_info(0).dims[1], -1);
  EXPECT_STREQ(engine.input_info(0).dim_names[1], "n");
  Context context(engine);
  for (int64_t n : {2, 5, 8, 3}) {  // shapes change between runs without rebuilding
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) - 1.0f;
    context.run({edgert_tensor{EDGERT_DTYPE_FLOAT32, 2, {1, n}, x.data()}});
    edgert_tensor y = context.output(0);
    ASSERT_EQ(y.dims[1], n);
    const float* v = static_cast<const float*>(y.data);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(v[i], x[i] > 0 ? 2 * x[i] : 0.0f);
  }
  std::vector<float> big(9, 1.0f);
  try {
    context.run({edgert_tensor{EDGERT_DTYPE_FLOAT32, 2, {1, 9}, big.data()}});
    FAIL() << "a shape outside the profile ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), EDGERT_ERR_SHAPE);
    EXPECT_NE(std::string(e.what()).find("outside the engine's optimization profile"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("min [1x2] to max [1x8]"), std::string::npos) << e.what();
  }
}

TEST_F(ProfileTest, InspectShowsTheDynamicDimensionByName) {
  ASSERT_EQ(build("--minShapes=x:1x1 --optShapes=x:1x4 --maxShapes=x:1x16").exit_code, 0);
  auto inspected = run_command(edgert_cli() + " inspect --json " + dir_.file("dynamic.engine"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  auto j = nlohmann::json::parse(inspected.output);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::array({1, "n"}));
}

TEST_F(ProfileTest, BadProfilesFailAtBuildTime) {
  auto unknown = build("--min-shapes z:1x2 --opt-shapes z:1x4 --max-shapes z:1x8");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.output.find("'z', which is not a model input (inputs: x)"), std::string::npos) << unknown.output;
  auto fixed = build("--min-shapes x:2x2 --opt-shapes x:2x4 --max-shapes x:2x8");
  EXPECT_EQ(fixed.exit_code, 1);
  EXPECT_NE(fixed.output.find("dimension 0 is fixed at 1"), std::string::npos) << fixed.output;
  auto order = build("--min-shapes x:1x8 --opt-shapes x:1x4 --max-shapes x:1x2");
  EXPECT_EQ(order.exit_code, 1);
  EXPECT_NE(order.output.find("min <= opt <= max"), std::string::npos) << order.output;
  auto partial = build("--opt-shapes x:1x4");
  EXPECT_EQ(partial.exit_code, 1);
  EXPECT_NE(partial.output.find("needs all of"), std::string::npos) << partial.output;
}

}  // namespace
}  // namespace edgert::test
