// GPU engines end to end (label gpu; run on the GPU machine by tests/gpu/run-on-device): models
// built for x86_64-cuda-sm90 with the CUDA plugin next to the CPU plugin, run through the
// runtime, against the same model built CPU-only:
//   - FP32 on the GPU computes what the CPU computes; FP16 stays within 1e-2 (relative L2);
//   - FP16's accuracy check keeps leading layers float32 until within its tolerance;
//   - inputs and outputs bound to unified (host-mapped) memory run with zero copies;
//   - the second identical run is captured as a CUDA graph, later ones replay it with the same
//     results, and a new shape is run (and captured) again;
//   - a node only the CPU has, between GPU nodes, runs with copies on a discrete GPU and in
//     place in unified memory on a board declared unified;
//   - an If's branches read, on the host, a value the GPU wrote (from unified memory);
//   - FP16 MatMuls of rank-4 operands (swin's [B, H, W, C] activations) stay row-major.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "board_profile.h"
#include "edgert/edgert.hpp"
#include "engine_builder.h"
#include "execution_context.h"
#include "graph_test_support.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {
namespace {

using Shape = std::vector<int64_t>;

std::vector<float> seeded(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// x [N,3,16,16] -> Conv 3x3 + Relu -> depthwise 3x3 + Clip -> 1x1 Conv + residual -> GAP ->
// Flatten -> Gemm; with `host_op` a CumSum along W (no CUDA kernel) between the convolutions.
onnx::ModelProto small_net(const Shape& x_shape, bool host_op, const std::vector<std::string>& dim_names = {}) {
  GraphMaker g;
  g.input("x", x_shape, dim_names);
  g.floats("w1", {16, 3, 3, 3}, seeded(16 * 27, 1, 0.3f));
  g.floats("b1", {16}, seeded(16, 2, 0.1f));
  g.floats("wd", {16, 1, 3, 3}, seeded(16 * 9, 3, 0.3f));
  g.floats("bd", {16}, seeded(16, 4, 0.1f));
  g.floats("w2", {16, 16, 1, 1}, seeded(256, 5, 0.3f));
  g.floats("w3", {10, 16}, seeded(160, 6, 0.3f));
  g.floats("b3", {10}, seeded(10, 7, 0.1f));
  g.floats("lo", {}, {0.0f});
  g.floats("hi", {}, {6.0f});
  GraphMaker::attr(g.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Relu", {"c1"}, {"r1"}, "relu1");
  std::string into_depthwise = "r1";
  if (host_op) {
    g.ints("axis", {}, {3});
    g.node("CumSum", {"r1", "axis"}, {"s1"}, "cumsum");
    into_depthwise = "s1";
  }
  auto& dw = g.node("Conv", {into_depthwise, "wd", "bd"}, {"cd"}, "depthwise");
  GraphMaker::attr(dw, "pads", std::vector<int64_t>{1, 1, 1, 1});
  GraphMaker::attr(dw, "group", int64_t{16});
  g.node("Clip", {"cd", "lo", "hi"}, {"d1"}, "relu6");
  g.node("Conv", {"d1", "w2"}, {"c2"}, "project");
  g.node("Add", {"c2", into_depthwise}, {"sum"}, "residual");
  g.node("GlobalAveragePool", {"sum"}, {"pooled"}, "pool");
  GraphMaker::attr(g.node("Flatten", {"pooled"}, {"flat"}, "flatten"), "axis", int64_t{1});
  GraphMaker::attr(g.node("Gemm", {"flat", "w3", "b3"}, {"y"}, "classifier"), "transB", int64_t{1});
  g.output("y");
  return g.model();
}

// x [1,16,12,12] -> Conv 3x3 + Relu -> Conv 3x3 -> Add(x) -> Relu -> GAP -> Flatten -> Gemm: a
// residual block, all of it INT8 but the classifier.
onnx::ModelProto residual_net() {
  GraphMaker g;
  g.input("x", {1, 16, 12, 12});
  g.floats("w1", {16, 16, 3, 3}, seeded(16 * 144, 21, 0.2f));
  g.floats("b1", {16}, seeded(16, 22, 0.1f));
  g.floats("w2", {16, 16, 3, 3}, seeded(16 * 144, 23, 0.2f));
  g.floats("w3", {10, 16}, seeded(160, 24, 0.3f));
  g.floats("b3", {10}, seeded(10, 25, 0.1f));
  GraphMaker::attr(g.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Relu", {"c1"}, {"r1"}, "relu1");
  GraphMaker::attr(g.node("Conv", {"r1", "w2"}, {"c2"}, "conv2"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Add", {"c2", "x"}, {"sum"}, "residual");
  g.node("Relu", {"sum"}, {"r2"}, "relu2");
  g.node("GlobalAveragePool", {"r2"}, {"pooled"}, "pool");
  GraphMaker::attr(g.node("Flatten", {"pooled"}, {"flat"}, "flatten"), "axis", int64_t{1});
  GraphMaker::attr(g.node("Gemm", {"flat", "w3", "b3"}, {"y"}, "classifier"), "transB", int64_t{1});
  g.output("y");
  return g.model();
}

class GpuEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda_usable()) << "no CUDA GPU on this machine: GPU tests run on the GPU machine "
                                  "(tests/gpu/run-on-device)";
  }

  // Whether the CUDA plugin loads and scores above 0 here.
  static bool cuda_usable() {
    edgert_error error{};
    const LoadedPlugin* cuda = load_plugin("cuda", plugin_search_path(plugins().c_str()), &error);
    return cuda && cuda->table->score && cuda->table->score() > 0;
  }

  static const std::string& plugins() {
    static const std::string dir = cpu_plugin_dir();
    return dir;
  }

  std::vector<uint8_t> build(const onnx::ModelProto& model, const std::string& board, bool fp16 = false) {
    return build_result(model, board, fp16).engine;
  }

  builder::BuildResult build_result(const onnx::ModelProto& model, const std::string& board, bool fp16,
                                    double fp16_tolerance = builder::BuildOptions{}.fp16_tolerance,
                                    const std::string& postprocess = "") {
    save_model(model, dir_.file("model.onnx"));
    builder::BuildOptions options;
    options.model_path = dir_.file("model.onnx");
    options.board = config::load_board_profile(board.find('/') == std::string::npos
                                                   ? source_dir() + "/board_profiles/" + board + ".yaml"
                                                   : board);
    options.plugin_path = plugins().c_str();
    options.fp16 = fp16;
    options.fp16_tolerance = fp16_tolerance;
    options.tactics = builder::TacticPolicy::kFirst;
    if (!postprocess.empty()) options.postprocess = builder::parse_output_postprocess(postprocess);
    return builder::build_engine(options);
  }

  // The engine reads its weights in place: the bytes live as long as the fixture.
  std::unique_ptr<LoadedEngine> load(std::vector<uint8_t> bytes) {
    edgert_load_options options;
    edgert_load_options_init(&options);
    options.plugin_path = plugins().c_str();
    options.allow_board_mismatch = 1;
    edgert_error error{};
    const std::vector<uint8_t>& kept = *engines_.emplace_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
    auto engine = LoadedEngine::load_memory(kept.data(), kept.size(), options, &error);
    EXPECT_NE(engine, nullptr) << error.message;
    return engine;
  }

  static std::vector<float> run(ExecutionContext& context, const Shape& shape, const std::vector<float>& x) {
    edgert_tensor t{EDGERT_DTYPE_FLOAT32, static_cast<int32_t>(shape.size()), {}, const_cast<float*>(x.data())};
    for (size_t d = 0; d < shape.size(); ++d) t.dims[d] = shape[d];
    edgert_error error{};
    EXPECT_EQ(context.run(&t, 1, &error), EDGERT_OK) << error.message;
    const edgert_tensor& y = context.output(0);
    const float* p = static_cast<const float*>(y.data);
    return std::vector<float>(p, p + y.dims[0] * y.dims[1]);
  }

  static double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
      num += (got[i] - want[i]) * double(got[i] - want[i]);
      den += want[i] * double(want[i]);
    }
    return got.size() == want.size() && std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-30)) : 1e30;
  }

  // The plugin running the main graph's node of `op_type` ("" when there is none).
  static std::string plugin_of(const LoadedEngine& engine, const std::string& op_type) {
    for (const LoadedNode& node : engine.main_graph().nodes)
      if (node.node.op_type && op_type == node.node.op_type && node.plugin) return node.plugin->name;
    return "";
  }

  static size_t nodes_on(const LoadedEngine& engine, const std::string& plugin) {
    size_t n = 0;
    for (const LoadedNode& node : engine.main_graph().nodes) n += node.plugin && node.plugin->name == plugin;
    return n;
  }

  TempDir dir_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> engines_;  // outlive every engine of a test
};

TEST_F(GpuEngine, Fp32OnTheGpuComputesWhatTheCpuComputesAndFp16StaysClose) {
  const Shape shape = {2, 3, 16, 16};
  auto cpu = load(build(small_net(shape, false), "x86_64-generic"));
  auto gpu = load(build(small_net(shape, false), "x86_64-cuda-sm90"));
  auto half = load(build(small_net(shape, false), "x86_64-cuda-sm90", true));
  ASSERT_TRUE(cpu && gpu && half);
  EXPECT_EQ(nodes_on(*gpu, "cpu"), 0u) << "every node of this model has a CUDA kernel";
  EXPECT_GT(nodes_on(*gpu, "cuda"), 0u);
  ExecutionContext c(*cpu), g(*gpu), h(*half);
  const std::vector<float> x = seeded(2 * 3 * 16 * 16, 11);
  const std::vector<float> want = run(c, shape, x);
  EXPECT_LE(relative_l2(run(g, shape, x), want), 1e-4);
  EXPECT_LE(relative_l2(run(h, shape, x), want), 1e-2);
}

// --int8 on the GPU board: the dense convolutions, the residual add and the pool run in INT8 on
// the GPU (the depthwise convolution stays float there), nothing on the CPU, and the engine
// stays near float32 (8-bit rounding through four layers).
TEST_F(GpuEngine, Int8ConvolutionsRunOnTheGpuAndStayNearFloat32) {
  const Shape shape = {2, 3, 16, 16};
  const onnx::ModelProto model = small_net(shape, false);
  auto cpu = load(build(model, "x86_64-generic"));
  save_model(model, dir_.file("model.onnx"));
  builder::BuildOptions options;
  options.model_path = dir_.file("model.onnx");
  options.board = config::load_board_profile(source_dir() + "/board_profiles/x86_64-cuda-sm90.yaml");
  options.plugin_path = plugins().c_str();
  options.tactics = builder::TacticPolicy::kFirst;
  options.int8 = true;
  int batches = 0;
  options.calibration.next_batch = [&]() -> std::optional<builder::CalibrationBatch> {
    if (batches == 8) return std::nullopt;
    builder::CalibrationTensor x;
    x.name = "x";
    x.shape = shape;
    x.data = seeded(2 * 3 * 16 * 16, 100 + batches++);
    return builder::CalibrationBatch{x};
  };
  const builder::BuildResult built = builder::build_engine(options);
  EXPECT_GE(built.int8.convolutions, 2) << "the stem and the projection in INT8";
  auto int8 = load(built.engine);
  ASSERT_TRUE(cpu && int8);
  EXPECT_EQ(plugin_of(*int8, "QLinearConv"), "cuda");
  EXPECT_EQ(plugin_of(*int8, "QLinearConvAdd"), "cuda") << "the residual add fused into the projection";
  EXPECT_EQ(plugin_of(*int8, "QLinearGlobalAveragePool"), "cuda");
  EXPECT_EQ(nodes_on(*int8, "cpu"), 0u) << "every INT8 node of this model has a CUDA kernel";
  ExecutionContext c(*cpu), q(*int8);
  const std::vector<float> x = seeded(2 * 3 * 16 * 16, 11);
  const double error = relative_l2(run(q, shape, x), run(c, shape, x));
  EXPECT_LE(error, 0.05);
  EXPECT_GT(error, 0.0) << "an INT8 engine that computes float32's exact values did not quantize";
}

// One calibration cache, two boards: the GPU's INT8 engine (its residual add fused into the
// convolution's epilogue) computes the CPU's INT8 bytes; only the float32 classifier's sums
// may differ in order.
TEST_F(GpuEngine, Int8ResidualBlockOnTheGpuComputesWhatTheCpuInt8EngineComputes) {
  save_model(residual_net(), dir_.file("model.onnx"));
  auto options_for = [&](const std::string& board) {
    builder::BuildOptions options;
    options.model_path = dir_.file("model.onnx");
    options.board = config::load_board_profile(source_dir() + "/board_profiles/" + board + ".yaml");
    options.plugin_path = plugins().c_str();
    options.tactics = builder::TacticPolicy::kFirst;
    options.int8 = true;
    options.calibration.cache_path = dir_.file("residual.calib");
    return options;
  };
  builder::BuildOptions gpu_options = options_for("x86_64-cuda-sm90");
  int batches = 0;
  gpu_options.calibration.next_batch = [&]() -> std::optional<builder::CalibrationBatch> {
    if (batches == 6) return std::nullopt;
    builder::CalibrationTensor x;
    x.name = "x";
    x.shape = {1, 16, 12, 12};
    x.data = seeded(16 * 144, 200 + batches++);
    return builder::CalibrationBatch{x};
  };
  auto gpu = load(builder::build_engine(gpu_options).engine);
  auto cpu = load(builder::build_engine(options_for("x86_64-avx512")).engine);  // from the cache alone
  ASSERT_TRUE(gpu && cpu);
  EXPECT_EQ(plugin_of(*gpu, "QLinearConvAdd"), "cuda") << "the residual add rides in the convolution";
  EXPECT_EQ(plugin_of(*cpu, "QLinearAdd"), "cpu");
  ExecutionContext g(*gpu), c(*cpu);
  const Shape shape = {1, 16, 12, 12};
  const std::vector<float> x = seeded(16 * 144, 31);
  EXPECT_LE(relative_l2(run(g, shape, x), run(c, shape, x)), 1e-5);
}

TEST_F(GpuEngine, Fp16AccuracyCheckKeepsLeadingLayersFloat32UntilWithinTheTolerance) {
  const Shape shape = {2, 3, 16, 16};
  const onnx::ModelProto model = small_net(shape, false);
  // No check: every layer that takes float16 in it, nothing measured.
  builder::BuildResult unchecked = build_result(model, "x86_64-cuda-sm90", true, 0.0);
  ASSERT_GT(unchecked.fp16_nodes, 1);
  EXPECT_TRUE(std::isnan(unchecked.fp16_rel_l2));
  // A tolerance float16 meets: measured, nothing kept.
  builder::BuildResult loose = build_result(model, "x86_64-cuda-sm90", true, 0.5);
  EXPECT_EQ(loose.fp16_kept_float32, 0);
  EXPECT_EQ(loose.fp16_nodes, unchecked.fp16_nodes);
  ASSERT_GT(loose.fp16_rel_l2, 0.0) << "float16 rounds something";
  ASSERT_LE(loose.fp16_rel_l2, 0.5);
  // Half of what every layer in float16 gives: leading layers kept float32 until within it.
  const double tolerance = loose.fp16_rel_l2 / 2;
  builder::BuildResult kept = build_result(model, "x86_64-cuda-sm90", true, tolerance);
  EXPECT_GT(kept.fp16_kept_float32, 0);
  EXPECT_EQ(kept.fp16_nodes + kept.fp16_kept_float32, unchecked.fp16_nodes);
  EXPECT_LE(kept.fp16_rel_l2, tolerance);
  EXPECT_DOUBLE_EQ(kept.fp16_rel_l2_all_half, loose.fp16_rel_l2);
  // What it measured holds for the engine it returned, on inputs of its own.
  auto cpu = load(build(model, "x86_64-generic"));
  auto half = load(std::move(kept.engine));
  ASSERT_TRUE(cpu && half);
  ExecutionContext c(*cpu), h(*half);
  const std::vector<float> x = seeded(2 * 3 * 16 * 16, 29);
  EXPECT_LE(relative_l2(run(h, shape, x), run(c, shape, x)), 2 * tolerance);
}

TEST_F(GpuEngine, PostprocessInTheEngineRunsOnTheGpuAndComputesWhatTheCpuComputes) {
  // Classification: softmax and top-3 of each row of [2, 10] scores.
  const Shape shape = {2, 3, 16, 16};
  const onnx::ModelProto classifier = small_net(shape, false);
  auto cpu = load(build_result(classifier, "x86_64-generic", false, 0, "classification:3").engine);
  auto gpu = load(build_result(classifier, "x86_64-cuda-sm90", false, 0, "classification:3").engine);
  ASSERT_TRUE(cpu && gpu);
  EXPECT_EQ(plugin_of(*gpu, "TopK"), "cuda");
  EXPECT_EQ(plugin_of(*gpu, "Softmax"), "cuda");
  EXPECT_EQ(nodes_on(*gpu, "cpu"), 0u);
  for (uint32_t seed = 0; seed < 4; ++seed) {
    std::vector<float> x = seeded(2 * 3 * 16 * 16, 40 + seed);
    ExecutionContext c(*cpu), g(*gpu);
    edgert_tensor t{EDGERT_DTYPE_FLOAT32, 4, {2, 3, 16, 16}, x.data()};
    edgert_error error{};
    ASSERT_EQ(c.run(&t, 1, &error), EDGERT_OK) << error.message;
    ASSERT_EQ(g.run(&t, 1, &error), EDGERT_OK) << error.message;
    ASSERT_EQ(g.output(1).dtype, EDGERT_DTYPE_INT64);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(static_cast<const int64_t*>(g.output(1).data)[i], static_cast<const int64_t*>(c.output(1).data)[i])
          << "seed " << seed << ", entry " << i;
      EXPECT_NEAR(static_cast<const float*>(g.output(0).data)[i], static_cast<const float*>(c.output(0).data)[i], 1e-5f);
    }
  }
  // Segmentation: the class map of [1, 7, 20, 23] scores, an int64 per pixel.
  GraphMaker m;
  m.input("image", {1, 3, 20, 23});
  m.floats("w", {7, 3, 3, 3}, seeded(7 * 27, 9, 0.5f));
  GraphMaker::attr(m.node("Conv", {"image", "w"}, {"scores"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.output("scores");
  auto cpu_map = load(build_result(m.model(), "x86_64-generic", false, 0, "segmentation").engine);
  auto gpu_map = load(build_result(m.model(), "x86_64-cuda-sm90", false, 0, "segmentation").engine);
  ASSERT_TRUE(cpu_map && gpu_map);
  EXPECT_EQ(plugin_of(*gpu_map, "ArgMax"), "cuda") << "the class map is computed on the GPU";
  std::vector<float> image = seeded(3 * 20 * 23, 61);
  ExecutionContext c(*cpu_map), g(*gpu_map);
  edgert_tensor t{EDGERT_DTYPE_FLOAT32, 4, {1, 3, 20, 23}, image.data()};
  edgert_error error{};
  ASSERT_EQ(c.run(&t, 1, &error), EDGERT_OK) << error.message;
  ASSERT_EQ(g.run(&t, 1, &error), EDGERT_OK) << error.message;
  ASSERT_EQ(g.output(0).dtype, EDGERT_DTYPE_INT64);
  const int64_t* want = static_cast<const int64_t*>(c.output(0).data);
  const int64_t* got = static_cast<const int64_t*>(g.output(0).data);
  EXPECT_EQ(std::vector<int64_t>(got, got + 460), std::vector<int64_t>(want, want + 460));
  // FP16 with its accuracy check: measured on the scores, the top-k appended after.
  builder::BuildResult half = build_result(classifier, "x86_64-cuda-sm90", true, 3e-3, "classification:3");
  EXPECT_GT(half.fp16_nodes, 0);
  EXPECT_LE(half.fp16_rel_l2, 3e-3) << "measured on the scores, not the class indices";
  auto half_engine = load(std::move(half.engine));
  ASSERT_TRUE(half_engine);
  EXPECT_EQ(half_engine->output_names(), (std::vector<std::string>{"scores", "classes"}));
}

TEST_F(GpuEngine, AttentionFusesIntoOneGpuKernelAndComputesWhatTheCpuComputes) {
  // Two heads of 20 tokens, 32 wide: Q, K and V projections, scaled and masked scores, softmax,
  // the product with V: one edgert.FusedAttention on the GPU in float16.
  const Shape shape = {2, 20, 32};
  GraphMaker m;
  m.input("x", shape);
  for (const char* w : {"wq", "wk", "wv"}) m.floats(w, {32, 32}, seeded(32 * 32, w[1], 0.2f));
  m.floats("scale", {}, {0.1767767f});
  std::vector<float> mask = seeded(20 * 20, 7);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 20 > i / 20 + 3 ? -1e4f : mask[i];  // a banded mask
  m.floats("mask", {20, 20}, mask);
  m.node("MatMul", {"x", "wq"}, {"q"});
  m.node("MatMul", {"x", "wk"}, {"k"});
  m.node("MatMul", {"x", "wv"}, {"v"});
  GraphMaker::attr(m.node("Transpose", {"k"}, {"kt"}), "perm", std::vector<int64_t>{0, 2, 1});
  m.node("Mul", {"q", "scale"}, {"qs"});
  m.node("MatMul", {"qs", "kt"}, {"scores"}, "scores");
  m.node("Add", {"scores", "mask"}, {"masked"}, "mask");
  GraphMaker::attr(m.node("Softmax", {"masked"}, {"p"}, "softmax"), "axis", int64_t{-1});
  m.node("MatMul", {"p", "v"}, {"y"}, "context");
  m.output("y");
  auto cpu = load(build(m.model(), "x86_64-generic"));
  auto gpu = load(build(m.model(), "x86_64-cuda-sm90"));
  auto half = load(build(m.model(), "x86_64-cuda-sm90", true));
  ASSERT_TRUE(cpu && gpu && half);
  // Fused in float16 (tensor cores); float32 keeps cuBLASLt's products and the softmax kernel.
  EXPECT_EQ(plugin_of(*half, "FusedAttention"), "cuda");
  EXPECT_EQ(plugin_of(*half, "Softmax"), "") << "the softmax is inside the fused node";
  EXPECT_EQ(plugin_of(*gpu, "FusedAttention"), "");
  EXPECT_EQ(plugin_of(*gpu, "Softmax"), "cuda");
  for (const LoadedEngine* engine : {gpu.get(), half.get()}) EXPECT_EQ(nodes_on(*engine, "cpu"), 0u);
  auto outputs = [&](const LoadedEngine& engine, const std::vector<float>& x) {
    ExecutionContext context(engine);
    edgert_tensor t{EDGERT_DTYPE_FLOAT32, 3, {2, 20, 32}, const_cast<float*>(x.data())};
    edgert_error error{};
    EXPECT_EQ(context.run(&t, 1, &error), EDGERT_OK) << error.message;
    const float* y = static_cast<const float*>(context.output(0).data);
    return std::vector<float>(y, y + 2 * 20 * 32);
  };
  for (uint32_t seed = 0; seed < 3; ++seed) {
    const std::vector<float> x = seeded(2 * 20 * 32, 80 + seed);
    const std::vector<float> want = outputs(*cpu, x);
    EXPECT_LE(relative_l2(outputs(*gpu, x), want), 1e-5) << "seed " << seed;
    EXPECT_LE(relative_l2(outputs(*half, x), want), 1e-2) << "seed " << seed;
  }
}

// PyTorch 2's multi-head attention, Q, K and V taken from one packed projection: in float16 one
// FusedAttention on the GPU reads that projection three times at their offsets (no Gather or
// Transpose left), every node on the GPU, and computes what the CPU computes.
TEST_F(GpuEngine, AttentionReadingAPackedProjectionRunsInFloat16OnTheGpu) {
  constexpr int64_t L = 40, B = 2, H = 2, D = 32, E = H * D;
  GraphMaker m(17);
  packed_attention_graph(m, L, B, H, D, seeded(E * 3 * E, 5, 0.15f));
  auto cpu = load(build(m.model(), "x86_64-generic"));
  auto half = load(build(m.model(), "x86_64-cuda-sm90", true));
  ASSERT_TRUE(cpu && half);
  EXPECT_EQ(plugin_of(*half, "FusedAttention"), "cuda");
  for (const char* gone : {"Gather", "Transpose", "Squeeze"}) EXPECT_EQ(plugin_of(*half, gone), "") << gone;
  EXPECT_EQ(nodes_on(*half, "cpu"), 0u);
  auto outputs = [&](const LoadedEngine& engine, const std::vector<float>& x) {
    ExecutionContext context(engine);
    edgert_tensor t{EDGERT_DTYPE_FLOAT32, 3, {L, B, E}, const_cast<float*>(x.data())};
    edgert_error error{};
    EXPECT_EQ(context.run(&t, 1, &error), EDGERT_OK) << error.message;
    const float* y = static_cast<const float*>(context.output(0).data);
    return std::vector<float>(y, y + L * B * E);
  };
  for (uint32_t seed = 0; seed < 2; ++seed) {
    const std::vector<float> x = seeded(L * B * E, 90 + seed);
    EXPECT_LE(relative_l2(outputs(*half, x), outputs(*cpu, x)), 1e-2) << "seed " << seed;
  }
}

TEST_F(GpuEngine, InputsAndOutputsBoundToUnifiedMemoryRunWithZeroCopies) {
  const Shape shape = {1, 3, 16, 16};
  const std::vector<uint8_t> bytes = build(small_net(shape, false), "x86_64-cuda-sm90");
  write_file(dir_.file("gpu.engine"), bytes);
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = plugins().c_str();
  options.allow_board_mismatch = 1;
  Engine engine(dir_.file("gpu.engine"), &options);
  edgert_error error{};
  void* x_mem = nullptr;
  void* y_mem = nullptr;
  ASSERT_EQ(edgert_engine_allocate(engine.get(), EDGERT_MEMORY_UNIFIED, 3 * 16 * 16 * 4, &x_mem, &error), EDGERT_OK)
      << error.message;
  ASSERT_EQ(edgert_engine_allocate(engine.get(), EDGERT_MEMORY_UNIFIED, 10 * 4, &y_mem, &error), EDGERT_OK)
      << error.message;
  const std::vector<float> x = seeded(3 * 16 * 16, 12);
  std::copy(x.begin(), x.end(), static_cast<float*>(x_mem));
  Context context(engine);
  context.run({edgert_tensor{EDGERT_DTYPE_FLOAT32, 4, {1, 3, 16, 16}, const_cast<float*>(x.data())}});
  const float* ran = static_cast<const float*>(context.output(0).data);
  const std::vector<float> want(ran, ran + 10);

  edgert_tensor bound{EDGERT_DTYPE_FLOAT32, 4, {1, 3, 16, 16}, x_mem};
  ASSERT_EQ(edgert_context_bind_input(context.get(), 0, &bound, EDGERT_MEMORY_UNIFIED, &error), EDGERT_OK) << error.message;
  ASSERT_EQ(edgert_context_bind_output(context.get(), 0, y_mem, 10 * 4, EDGERT_MEMORY_UNIFIED, &error), EDGERT_OK)
      << error.message;
  std::fill(static_cast<float*>(y_mem), static_cast<float*>(y_mem) + 10, std::nanf(""));
  const uint64_t copies_before = edgert_engine_device_copies(engine.get());
  for (int i = 0; i < 3; ++i) {  // eager, captured, replayed
    ASSERT_EQ(edgert_context_enqueue(context.get(), nullptr, &error), EDGERT_OK) << error.message;
    ASSERT_EQ(edgert_context_synchronize(context.get(), &error), EDGERT_OK) << error.message;
  }
  EXPECT_EQ(edgert_engine_device_copies(engine.get()), copies_before) << "a bound run copied";
  const std::vector<float> got(static_cast<float*>(y_mem), static_cast<float*>(y_mem) + 10);
  EXPECT_LE(relative_l2(got, want), 1e-6);
  edgert_engine_free(engine.get(), EDGERT_MEMORY_UNIFIED, x_mem);
  edgert_engine_free(engine.get(), EDGERT_MEMORY_UNIFIED, y_mem);
}

TEST_F(GpuEngine, TheSecondRunIsCapturedAndReplaysUntilTheShapeChanges) {
  auto gpu = load(build(small_net({2, 3, 16, 16}, false), "x86_64-cuda-sm90"));
  ASSERT_TRUE(gpu);
  ExecutionContext context(*gpu);
  const std::vector<float> x = seeded(2 * 3 * 16 * 16, 13);
  const std::vector<float> first = run(context, {2, 3, 16, 16}, x);
  EXPECT_FALSE(context.replaying_graph());
  const std::vector<float> second = run(context, {2, 3, 16, 16}, x);
  EXPECT_TRUE(context.replaying_graph()) << "the second identical run was not captured";
  const std::vector<float> third = run(context, {2, 3, 16, 16}, x);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, third);
  // New input values in the same memory replay the graph on them.
  const std::vector<float> other = seeded(2 * 3 * 16 * 16, 14);
  auto fresh = load(build(small_net({2, 3, 16, 16}, false), "x86_64-cuda-sm90"));
  ExecutionContext eager(*fresh);
  eager.set_cuda_graphs(false);
  EXPECT_EQ(run(context, {2, 3, 16, 16}, other), run(eager, {2, 3, 16, 16}, other));
  EXPECT_FALSE(eager.replaying_graph());
}

TEST_F(GpuEngine, RotatingBoundBuffersEachReplayTheirOwnGraphWithNoCopies) {
  // A camera's capture buffers, bound in place in turn: each gets its graph on its second run.
  const Shape shape = {1, 3, 16, 16};
  auto gpu = load(build(small_net(shape, false), "x86_64-cuda-sm90"));
  auto fresh = load(build(small_net(shape, false), "x86_64-cuda-sm90"));
  ASSERT_TRUE(gpu && fresh);
  ExecutionContext context(*gpu), eager(*fresh);
  eager.set_cuda_graphs(false);
  const size_t count = 3 * 16 * 16;
  edgert_error error{};
  const edgert_device* device = gpu->device();
  ASSERT_NE(device, nullptr);
  std::vector<void*> frames(3, nullptr);
  std::vector<std::vector<float>> want;
  void* y = nullptr;
  ASSERT_EQ(device->allocate(EDGERT_MEMORY_UNIFIED, 10 * sizeof(float), &y, &error), EDGERT_OK) << error.message;
  for (size_t f = 0; f < frames.size(); ++f) {
    ASSERT_EQ(device->allocate(EDGERT_MEMORY_UNIFIED, count * sizeof(float), &frames[f], &error), EDGERT_OK);
    const std::vector<float> x = seeded(count, 40 + static_cast<uint32_t>(f));
    std::copy(x.begin(), x.end(), static_cast<float*>(frames[f]));
    want.push_back(run(eager, shape, x));
  }
  ASSERT_EQ(context.bind_output(0, y, 10 * sizeof(float), EDGERT_MEMORY_UNIFIED, &error), EDGERT_OK) << error.message;
  const uint64_t copies_before = device->copies_made();
  for (int round = 0; round < 3; ++round)
    for (size_t f = 0; f < frames.size(); ++f) {
      edgert_tensor x{EDGERT_DTYPE_FLOAT32, 4, {1, 3, 16, 16}, frames[f]};
      ASSERT_EQ(context.bind_input(0, x, EDGERT_MEMORY_UNIFIED, &error), EDGERT_OK) << error.message;
      ASSERT_EQ(context.enqueue(nullptr, &error), EDGERT_OK) << error.message;
      ASSERT_EQ(context.synchronize(&error), EDGERT_OK) << error.message;
      EXPECT_EQ(context.replaying_graph(), round > 0) << "round " << round << ", buffer " << f;
      const std::vector<float> got(static_cast<float*>(y), static_cast<float*>(y) + 10);
      EXPECT_LE(relative_l2(got, want[f]), 1e-6) << "round " << round << ", buffer " << f;
    }
  EXPECT_EQ(context.captured_graphs(), frames.size());
  EXPECT_EQ(device->copies_made(), copies_before) << "a run bound in place copied";
  EXPECT_EQ(context.device_copies(), 0u) << "the context counts no copy either";
  context.set_cuda_graphs(false);
  EXPECT_EQ(context.captured_graphs(), 0u);
  for (void* f : frames) device->free(EDGERT_MEMORY_UNIFIED, f);
  device->free(EDGERT_MEMORY_UNIFIED, y);
}

TEST_F(GpuEngine, AContextConfinedToAShareOfTheSmsComputesTheSameAndReplaysItsGraph) {
  const Shape shape = {2, 3, 16, 16};
  auto gpu = load(build(small_net(shape, false), "x86_64-cuda-sm90"));
  ASSERT_TRUE(gpu);
  ExecutionContext whole(*gpu), part(*gpu);
  edgert_error error{};
  ASSERT_EQ(part.set_priority(3, &error), EDGERT_OK) << error.message;
  ASSERT_EQ(part.set_gpu_share(25, &error), EDGERT_OK) << error.message;
  const std::vector<float> x = seeded(2 * 3 * 16 * 16, 71);
  const std::vector<float> want = run(whole, shape, x);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(run(part, shape, x), want) << "run " << i << ": the same kernels on fewer SMs";
    EXPECT_EQ(part.replaying_graph(), i > 0) << "run " << i;
  }
  // Back to the whole GPU: a new stream, graphs captured anew.
  ASSERT_EQ(part.set_gpu_share(100, &error), EDGERT_OK) << error.message;
  EXPECT_EQ(part.captured_graphs(), 0u);
  EXPECT_EQ(run(part, shape, x), want);
  EXPECT_EQ(part.set_gpu_share(0, &error), EDGERT_ERR_INVALID_ARGUMENT);
}

TEST_F(GpuEngine, AHostOnlyNodeBetweenGpuNodesRunsWithCopiesOrInUnifiedMemory) {
  const Shape shape = {2, 3, 16, 16};
  auto cpu = load(build(small_net(shape, true), "x86_64-generic"));
  auto discrete = load(build(small_net(shape, true), "x86_64-cuda-sm90"));
  // The same GPU declared unified (Jetson-like): host and device share the crossing tensors.
  std::ifstream in(source_dir() + "/board_profiles/x86_64-cuda-sm90.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  yaml.replace(yaml.find("unified_memory: false"), 21, "unified_memory: true");
  yaml.replace(yaml.find("name: x86_64-cuda-sm90"), 22, "name: unified-cuda-sm90");
  std::ofstream(dir_.file("unified.yaml")) << yaml;
  auto unified = load(build(small_net(shape, true), dir_.file("unified.yaml")));
  ASSERT_TRUE(cpu && discrete && unified);
  EXPECT_EQ(nodes_on(*discrete, "cpu"), 1u) << "CumSum runs on the CPU";
  size_t copies = 0, unified_tensors = 0;
  for (const LoadedNode& node : discrete->main_graph().nodes) copies += node.builtin == BuiltinOp::Copy;
  for (const LoadedTensor& t : unified->main_graph().tensors) unified_tensors += t.space == EDGERT_MEMORY_UNIFIED;
  EXPECT_EQ(copies, 2u) << "to the host for CumSum and back to the device";
  for (const LoadedNode& node : unified->main_graph().nodes) EXPECT_NE(node.builtin, BuiltinOp::Copy);
  EXPECT_GE(unified_tensors, 2u);
  ExecutionContext c(*cpu), d(*discrete), u(*unified);
  const std::vector<float> x = seeded(2 * 3 * 16 * 16, 15);
  const std::vector<float> want = run(c, shape, x);
  // Each context counts its own copies, the process's counter every context's: per run of the
  // discrete engine, the input in, the two copy nodes, the output out.
  const uint64_t process_before = discrete->device()->copies_made();
  const uint64_t d_before = d.device_copies(), u_before = u.device_copies();
  for (int i = 0; i < 2; ++i) {
    const uint64_t before = d.device_copies();
    EXPECT_LE(relative_l2(run(d, shape, x), want), 1e-4);
    EXPECT_EQ(d.device_copies() - before, 4u) << "run " << i;
    EXPECT_LE(relative_l2(run(u, shape, x), want), 1e-4);
  }
  EXPECT_EQ(discrete->device()->copies_made() - process_before,
            (d.device_copies() - d_before) + (u.device_copies() - u_before));
  // Device time: none to tell where the host kernel waited for the device mid-run; a run all
  // on the device has its own.
  d.set_device_timing(true);
  run(d, shape, x);
  EXPECT_EQ(d.device_ms(), -1);
  auto all_gpu = load(build(small_net(shape, false), "x86_64-cuda-sm90"));
  ASSERT_TRUE(all_gpu);
  ExecutionContext g(*all_gpu);
  g.set_device_timing(true);
  run(g, shape, x);  // the first run prepares its kernels, which may wait for the device
  run(g, shape, x);
  EXPECT_GT(g.device_ms(), 0);
}

// x [1,4,8,8] -> Conv 3x3 + Relu (the GPU) -> r; If(cond) over r: then ReduceSum, else
// ReduceMax, both over every axis. The branches read r by name, on the host: detectors'
// post-processing reads the GPU's scores and boxes this way.
onnx::ModelProto branch_net() {
  GraphMaker g;
  g.input("x", {1, 4, 8, 8});
  g.floats("w", {4, 4, 3, 3}, seeded(4 * 36, 31, 0.3f));
  GraphMaker::attr(g.node("Conv", {"x", "w"}, {"c"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Relu", {"c"}, {"r"}, "relu");
  onnx::NodeProto& branch = g.node("If", {"cond"}, {"y"}, "pick");
  for (const auto& [attribute, reduce] : {std::pair{"then_branch", "ReduceSum"}, std::pair{"else_branch", "ReduceMax"}}) {
    onnx::AttributeProto& a = *branch.add_attribute();
    a.set_name(attribute);
    a.set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto& body = *a.mutable_g();
    body.set_name(attribute);
    onnx::NodeProto& node = *body.add_node();
    node.set_op_type(reduce);
    node.add_input("r");
    node.add_output("reduced");
    onnx::AttributeProto& keep = *node.add_attribute();
    keep.set_name("keepdims");
    keep.set_type(onnx::AttributeProto::INT);
    keep.set_i(0);
    onnx::ValueInfoProto& out = *body.add_output();
    out.set_name("reduced");
    out.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  g.output("y");
  onnx::ModelProto model = g.model();
  onnx::ValueInfoProto& cond = *model.mutable_graph()->add_input();
  cond.set_name("cond");
  cond.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  cond.mutable_type()->mutable_tensor_type()->mutable_shape();
  return model;
}

TEST_F(GpuEngine, IfBranchesReadWhatTheGpuWroteFromUnifiedMemory) {
  auto cpu = load(build(branch_net(), "x86_64-generic"));
  auto gpu = load(build(branch_net(), "x86_64-cuda-sm90"));
  ASSERT_TRUE(cpu && gpu);
  EXPECT_GE(nodes_on(*gpu, "cuda"), 1u) << "the convolution runs on the GPU";
  bool r_unified = false;
  for (const LoadedTensor& t : gpu->main_graph().tensors)
    if (std::string(t.name) == "r") r_unified = t.space == EDGERT_MEMORY_UNIFIED;
  EXPECT_TRUE(r_unified) << "r, written on the GPU and read by the branches, is in unified memory";
  const std::vector<float> x = seeded(4 * 8 * 8, 32);
  ExecutionContext c(*cpu), d(*gpu);
  for (bool pick : {true, false, true}) {
    float results[2] = {};
    for (int which = 0; which < 2; ++which) {
      ExecutionContext& context = which == 0 ? c : d;
      bool flag = pick;
      const edgert_tensor inputs[2] = {{EDGERT_DTYPE_FLOAT32, 4, {1, 4, 8, 8}, const_cast<float*>(x.data())},
                                       {EDGERT_DTYPE_BOOL, 0, {}, &flag}};
      edgert_error error{};
      ASSERT_EQ(context.run(inputs, 2, &error), EDGERT_OK) << error.message;
      const edgert_tensor& y = context.output(0);
      ASSERT_EQ(y.rank, 0);
      results[which] = *static_cast<const float*>(y.data);
    }
    EXPECT_NEAR(results[1], results[0], 1e-4f * (1.0f + std::fabs(results[0]))) << (pick ? "ReduceSum" : "ReduceMax");
  }
}

// x [2,3,5,8] -> MatMul [8,6] -> Relu -> MatMul [2,3,6,7]: products of rank-4 activations, as
// swin's MLPs ([B, H, W, C] x [C, 4C]) and window attention ([B, heads, L, D] x [B, heads, D, L]).
TEST_F(GpuEngine, Fp16ProductsOfRank4OperandsComputeWhatTheCpuComputes) {
  GraphMaker g;
  g.input("x", {2, 3, 5, 8});
  g.floats("w", {8, 6}, seeded(48, 41, 0.5f));
  g.floats("kt", {2, 3, 6, 7}, seeded(2 * 3 * 42, 42, 0.5f));
  g.node("MatMul", {"x", "w"}, {"a"}, "linear");
  g.node("Relu", {"a"}, {"r"}, "relu");
  g.node("MatMul", {"r", "kt"}, {"y"}, "scores");
  g.output("y");
  auto cpu = load(build(g.model(), "x86_64-generic"));
  auto gpu = load(build_result(g.model(), "x86_64-cuda-sm90", true, 0.0).engine);
  ASSERT_TRUE(cpu && gpu);
  EXPECT_EQ(plugin_of(*gpu, "MatMul"), "cuda");
  const std::vector<float> x = seeded(2 * 3 * 5 * 8, 43);
  std::vector<float> outputs[2];
  ExecutionContext c(*cpu), d(*gpu);
  for (int which = 0; which < 2; ++which) {
    ExecutionContext& context = which == 0 ? c : d;
    const edgert_tensor in{EDGERT_DTYPE_FLOAT32, 4, {2, 3, 5, 8}, const_cast<float*>(x.data())};
    edgert_error error{};
    ASSERT_EQ(context.run(&in, 1, &error), EDGERT_OK) << error.message;
    const edgert_tensor& y = context.output(0);
    ASSERT_EQ(y.rank, 4);
    const float* p = static_cast<const float*>(y.data);
    outputs[which].assign(p, p + 2 * 3 * 5 * 7);
  }
  EXPECT_LE(relative_l2(outputs[1], outputs[0]), 1e-2);
}

// A dynamic batch and no optimization profile: nothing is known of the batch at build time, and
// the FP16 engine still computes what the CPU computes at the batches it meets.
TEST_F(GpuEngine, Fp16WithADynamicBatchAndNoProfileComputesWhatTheCpuComputes) {
  const onnx::ModelProto model = small_net({1, 3, 16, 16}, false, {"batch"});
  auto cpu = load(build(model, "x86_64-generic"));
  auto gpu = load(build_result(model, "x86_64-cuda-sm90", true, 0.0).engine);
  ASSERT_TRUE(cpu && gpu);
  EXPECT_GE(nodes_on(*gpu, "cuda"), 3u);
  ExecutionContext c(*cpu), d(*gpu);
  for (int64_t batch : {1, 3, 2}) {
    const Shape shape = {batch, 3, 16, 16};
    const std::vector<float> x = seeded(static_cast<size_t>(batch) * 3 * 16 * 16, 50 + static_cast<uint32_t>(batch));
    EXPECT_LE(relative_l2(run(d, shape, x), run(c, shape, x)), 1e-2) << "batch " << batch;
  }
}

}  // namespace
}  // namespace edgert::test
