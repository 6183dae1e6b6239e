// Dynamic shapes on fast kernels: a model with dynamic batch and image size, built with
// optimization profiles, gets the fusions and tactics of a static export at each profile's opt
// shapes and a memory plan at its max, and computes what the unoptimized reference computes at
// every shape the profiles accept.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "board_profile.h"
#include "build_error.h"
#include "execution_context.h"
#include "graph_test_support.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {
namespace {

using Shape = std::vector<int64_t>;

std::vector<float> seeded(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// x [N,3,H,W] -> Conv 3x3 + Relu -> 1x1 Conv + residual -> GlobalAveragePool -> Reshape to
// [N, -1] with N read from Shape(x) at run time -> Gemm: the Shape chain must survive (folded at
// one batch it would break every other), the convolutions fuse as in a static export.
onnx::ModelProto conv_classifier(const Shape& fixed_shape = {}) {
  GraphMaker g;
  if (fixed_shape.empty()) g.input("x", {-1, 3, -1, -1}, {"batch", "", "height", "width"});
  else g.input("x", fixed_shape);
  g.floats("w1", {8, 3, 3, 3}, seeded(8 * 27, 1));
  g.floats("b1", {8}, seeded(8, 2));
  g.floats("w2", {8, 8, 1, 1}, seeded(64, 3));
  g.floats("b2", {8}, seeded(8, 4));
  g.floats("w3", {8, 5}, seeded(40, 5));
  g.floats("b3", {5}, seeded(5, 6));
  g.ints("zero", {}, {0});
  g.ints("axes", {1}, {0});
  g.ints("rest", {1}, {-1});
  GraphMaker::attr(g.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Relu", {"c1"}, {"r1"}, "relu1");
  g.node("Conv", {"r1", "w2", "b2"}, {"c2"}, "conv2");
  g.node("Add", {"c2", "r1"}, {"sum"}, "residual");
  g.node("GlobalAveragePool", {"sum"}, {"pooled"}, "pool");
  g.node("Shape", {"x"}, {"x_shape"}, "shape");
  GraphMaker::attr(g.node("Gather", {"x_shape", "zero"}, {"n"}, "batch_of"), "axis", int64_t{0});
  g.node("Unsqueeze", {"n", "axes"}, {"n1"}, "as_list");
  GraphMaker::attr(g.node("Concat", {"n1", "rest"}, {"flat_shape"}, "flat_shape"), "axis", int64_t{0});
  g.node("Reshape", {"pooled", "flat_shape"}, {"flat"}, "flatten");
  g.node("Gemm", {"flat", "w3", "b3"}, {"y"}, "classifier");
  g.output("y");
  return g.model();
}

builder::ShapeProfile profile(const Shape& min, const Shape& opt, const Shape& max) {
  return {{"x", builder::InputShapeRange{min, opt, max}}};
}

class DynamicShapesTest : public ::testing::Test {
 protected:
  builder::BuildResult build(const onnx::ModelProto& model, std::vector<builder::ShapeProfile> profiles,
                             bool optimize = true) {
    save_model(model, dir_.file("model.onnx"));
    builder::BuildOptions options;
    options.model_path = dir_.file("model.onnx");
    options.board = config::load_board_profile(config::find_board_profile(host_board()));
    options.plugin_path = plugins_.c_str();
    options.profiles = std::move(profiles);
    options.optimize = optimize;
    // First-listed tactics: deterministic, and they depend on the shapes the kernels are shown.
    options.tactics = builder::TacticPolicy::kFirst;
    return builder::build_engine(options);
  }

  std::unique_ptr<LoadedEngine> load(const std::vector<uint8_t>& bytes) {
    edgert_load_options options;
    edgert_load_options_init(&options);
    options.plugin_path = plugins_.c_str();
    edgert_error error{};
    auto engine = LoadedEngine::load_memory(bytes.data(), bytes.size(), options, &error);
    EXPECT_NE(engine, nullptr) << error.message;
    return engine;
  }

  // Runs `context` on x of `shape` (seeded values); the output, or empty with `error` set.
  static std::vector<float> run(ExecutionContext& context, const Shape& shape, edgert_error* error) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> x = seeded(n, static_cast<uint32_t>(n));
    edgert_tensor t{EDGERT_DTYPE_FLOAT32, static_cast<int32_t>(shape.size()), {}, x.data()};
    for (size_t d = 0; d < shape.size(); ++d) t.dims[d] = shape[d];
    if (context.run(&t, 1, error) != EDGERT_OK) return {};
    const edgert_tensor& y = context.output(0);
    const float* p = static_cast<const float*>(y.data);
    return std::vector<float>(p, p + y.dims[0] * y.dims[1]);
  }

  static void expect_close(const std::vector<float>& got, const std::vector<float>& want, const Shape& shape) {
    ASSERT_EQ(got.size(), want.size()) << "at x " << builder::dims_text(shape);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << "element " << i << " at x " << builder::dims_text(shape);
  }

  TempDir dir_;
  std::string plugins_ = cpu_plugin_dir();
};

// "node: tactic" of every node that computes on the image (the Shape chain that makes the
// Reshape's target stays in a dynamic engine and folds away in a static one).
std::vector<std::string> tactic_names(const builder::BuildResult& result) {
  std::vector<std::string> names;
  for (const builder::Node& node : result.model.graphs[0].nodes)
    if (node.op_type != "Shape" && node.op_type != "Gather" && node.op_type != "Unsqueeze" && node.op_type != "Concat")
      names.push_back(node.name + ": " + node.op_type + " " + node.tactic_name);
  return names;
}

// Bytes the plan reserves for each planned value, by name.
std::map<std::string, uint64_t> planned_sizes(const builder::BuildResult& result) {
  std::map<std::string, uint64_t> sizes;
  const builder::Graph& main = result.model.graphs[0];
  for (size_t v = 0; v < main.values.size(); ++v)
    if (result.memory_plan.offsets[v] >= 0) sizes[main.values[v].name] = result.memory_plan.sizes[v];
  return sizes;
}

TEST_F(DynamicShapesTest, EveryShapeInTheProfileMatchesTheUnoptimizedReference) {
  auto dynamic = build(conv_classifier(), {profile({1, 3, 8, 8}, {4, 3, 16, 16}, {8, 3, 24, 24})});
  auto reference = build(conv_classifier(), {}, /*optimize=*/false);
  auto fast = load(dynamic.engine), plain = load(reference.engine);
  ASSERT_TRUE(fast && plain);
  ExecutionContext fast_context(*fast), plain_context(*plain);
  // Shapes change between runs, below, at and above opt, the largest last but one.
  for (const Shape& shape : {Shape{1, 3, 8, 8}, Shape{4, 3, 16, 16}, Shape{3, 3, 11, 9}, Shape{8, 3, 24, 24},
                             Shape{2, 3, 13, 17}}) {
    edgert_error error{};
    std::vector<float> want = run(plain_context, shape, &error);
    ASSERT_FALSE(want.empty()) << error.message;
    std::vector<float> got = run(fast_context, shape, &error);
    ASSERT_FALSE(got.empty()) << error.message;
    expect_close(got, want, shape);
  }
}

TEST_F(DynamicShapesTest, FusionsAndTacticsAreThoseOfAStaticExportAtOpt) {
  auto dynamic = build(conv_classifier(), {profile({1, 3, 8, 8}, {4, 3, 16, 16}, {8, 3, 24, 24})});
  auto at_opt = build(conv_classifier({4, 3, 16, 16}), {});
  const std::vector<std::string> names = tactic_names(dynamic);
  EXPECT_EQ(names, tactic_names(at_opt));
  // Both convolutions fused (with the ReLU, with the residual Add), as in the static export.
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0].rfind("conv1 + relu1: FusedConv", 0), 0u) << names[0];
  EXPECT_EQ(names[1].rfind("conv2 + residual: FusedConv", 0), 0u) << names[1];
  // The engine keeps the dimensions that vary dynamic and the others fixed.
  const builder::Graph& main = dynamic.model.graphs[0];
  const builder::Value& y = main.values[main.outputs[0]];
  ASSERT_EQ(y.shape.size(), 2u);
  EXPECT_EQ(y.shape[0].value, -1);
  EXPECT_EQ(y.shape[1].value, 5);
}

TEST_F(DynamicShapesTest, TheMemoryPlanIsTheStaticPlanAtMax) {
  auto dynamic = build(conv_classifier(), {profile({1, 3, 8, 8}, {4, 3, 16, 16}, {8, 3, 24, 24})});
  auto at_max = build(conv_classifier({8, 3, 24, 24}), {});
  ASSERT_EQ(dynamic.memory_plans.size(), 1u);
  // Every activation of the static engine at max is planned at the same size in the dynamic
  // one, which also plans its few bytes of Shape chain.
  const std::map<std::string, uint64_t> dynamic_sizes = planned_sizes(dynamic), static_sizes = planned_sizes(at_max);
  ASSERT_FALSE(static_sizes.empty());
  for (const auto& [name, bytes] : static_sizes) {
    auto it = dynamic_sizes.find(name);
    ASSERT_NE(it, dynamic_sizes.end()) << name << " is not planned in the dynamic engine";
    EXPECT_EQ(it->second, bytes) << name;
  }
  EXPECT_GE(dynamic.memory_plan.arena_bytes, at_max.memory_plan.arena_bytes);
  EXPECT_LE(dynamic.memory_plan.arena_bytes, at_max.memory_plan.arena_bytes + 4 * 64);
  EXPECT_EQ(dynamic.memory_plan.workspace_bytes, at_max.memory_plan.workspace_bytes);
}

TEST_F(DynamicShapesTest, TheRuntimeTakesTheProfileHoldingTheShapes) {
  auto dynamic = build(conv_classifier(), {profile({1, 3, 8, 8}, {1, 3, 16, 16}, {2, 3, 16, 16}),
                                           profile({3, 3, 8, 8}, {8, 3, 24, 24}, {8, 3, 24, 24})});
  auto reference = build(conv_classifier(), {}, /*optimize=*/false);
  ASSERT_EQ(dynamic.memory_plans.size(), 2u);
  EXPECT_LT(dynamic.memory_plans[0].arena_bytes, dynamic.memory_plans[1].arena_bytes);
  for (const builder::Node& node : dynamic.model.graphs[0].nodes) EXPECT_EQ(node.profile_tactics.size(), 2u) << node.name;
  auto fast = load(dynamic.engine), plain = load(reference.engine);
  ASSERT_TRUE(fast && plain);
  ASSERT_EQ(fast->num_profiles(), 2u);
  ExecutionContext fast_context(*fast), plain_context(*plain);
  const std::vector<std::pair<Shape, size_t>> runs = {
      {{1, 3, 8, 8}, 0}, {{8, 3, 24, 24}, 1}, {{2, 3, 16, 16}, 0}, {{5, 3, 12, 12}, 1}, {{1, 3, 16, 9}, 0}};
  for (const auto& [shape, expected_profile] : runs) {
    edgert_error error{};
    std::vector<float> want = run(plain_context, shape, &error);
    ASSERT_FALSE(want.empty()) << error.message;
    std::vector<float> got = run(fast_context, shape, &error);
    ASSERT_FALSE(got.empty()) << error.message;
    EXPECT_EQ(fast_context.profile(), expected_profile) << builder::dims_text(shape);
    expect_close(got, want, shape);
  }
  edgert_error error{};
  EXPECT_TRUE(run(fast_context, {2, 3, 24, 24}, &error).empty());
  EXPECT_EQ(error.status, EDGERT_ERR_SHAPE);
  const std::string message = error.message;
  EXPECT_NE(message.find("x [2x3x24x24]"), std::string::npos) << message;
  EXPECT_NE(message.find("profile 0: x from min [1x3x8x8] to max [2x3x16x16]"), std::string::npos) << message;
  EXPECT_NE(message.find("profile 1: x from min [3x3x8x8] to max [8x3x24x24]"), std::string::npos) << message;
}

TEST_F(DynamicShapesTest, EveryProfileMustCoverEveryDynamicInput) {
  try {
    build(conv_classifier(), {profile({1, 3, 8, 8}, {4, 3, 16, 16}, {8, 3, 24, 24}), {}});
    FAIL() << "a profile without the dynamic input built";
  } catch (const builder::BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("profile 1: no shapes for dynamic input(s) x"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace edgert::test
