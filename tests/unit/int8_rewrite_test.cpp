// The int8 rewrite (builder/src/int8_rewrite.h) on small graphs with quantizations given by
// hand: which nodes become int8, when a Relu or Clip is absorbed (only where the output's
// quantization saturates at the clip), Concat inputs taking the Concat's quantization, layers
// kept in float32 by name, and SiLU as a lookup table equal to DequantizeLinear -> x * sigmoid(x)
// -> QuantizeLinear.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph_test_support.h"
#include "int8_rewrite.h"
#include "onnx_import.h"
#include "passes/pass_manager.h"
#include "plugin_loader.h"
#include "test_support.h"

namespace edgert::test {
namespace {

using builder::ActivationQuantization;
using builder::Graph;
using builder::Int8RewriteOptions;
using builder::Int8RewriteReport;
using builder::QuantizationTable;

std::vector<const LoadedPlugin*> cpu_plugins() {
  edgert_error error{};
  const LoadedPlugin* p = load_plugin("cpu", {cpu_plugin_dir()}, &error);
  if (!p) throw std::runtime_error(error.message);
  return {p};
}

struct Rewritten {
  Graph graph;
  Int8RewriteReport report;
  int made = 0;
  size_t count(const std::string& op) const {
    return static_cast<size_t>(std::count_if(graph.nodes.begin(), graph.nodes.end(), [&](const builder::Node& n) {
      return n.op_type == op;
    }));
  }
};

Rewritten rewrite(const GraphMaker& maker, const QuantizationTable& table, Int8RewriteOptions options = {}) {
  TempDir dir;
  save_model(maker.model(), dir.file("m.onnx"));
  builder::Model model = builder::import_onnx(dir.file("m.onnx"));
  Rewritten out;
  const std::vector<const LoadedPlugin*> plugins = cpu_plugins();
  builder::infer_shapes(model.graphs[0], plugins);
  options.plugins = plugins;
  out.made = builder::rewrite_int8(model.graphs[0], table, options, &out.report);
  out.graph = model.graphs[0];
  return out;
}

// x [1, 3, 8, 8] -> Conv 3x3 (4 channels) -> c -> `activation` -> y -> Softmax -> out (the output
// unless the caller adds its own; a float op reads y, as a classifier's head would).
GraphMaker conv_then(const char* activation, float clip_max = 6.0f, bool y_is_output = true) {
  GraphMaker g;
  g.input("x", {1, 3, 8, 8});
  std::vector<float> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i)) * 0.3f;
  g.floats("w", {4, 3, 3, 3}, w);
  g.floats("b", {4}, {0.1f, -0.2f, 0.3f, 0.0f});
  auto& conv = g.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  GraphMaker::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  if (std::string(activation) == "Clip") {
    g.floats("lo", {}, {0.0f});
    g.floats("hi", {}, {clip_max});
    g.node("Clip", {"c", "lo", "hi"}, {"y"}, "act");
  } else {
    g.node(activation, {"c"}, {"y"}, "act");
  }
  if (y_is_output) {
    g.node("Softmax", {"y"}, {"out"}, "head");
    g.output("out");
  }
  return g;
}

ActivationQuantization q(float scale, int zero_point) {
  ActivationQuantization a;
  a.scale = scale;
  a.zero_point = static_cast<uint8_t>(zero_point);
  return a;
}

TEST(Int8Rewrite, ConvAndReluBecomeOneQLinearConvBetweenOneQuantizeAndOneDequantize) {
  const Rewritten r = rewrite(conv_then("Relu"), {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}, {"y", q(0.03f, 0)}});
  EXPECT_EQ(r.made, 1);
  EXPECT_EQ(r.count("QLinearConv"), 1u);
  EXPECT_EQ(r.count("Relu"), 0u);
  EXPECT_EQ(r.count("QuantizeLinear"), 1u);
  EXPECT_EQ(r.count("DequantizeLinear"), 1u);
  EXPECT_EQ(r.report.absorbed_activations, 1);
  ASSERT_EQ(r.report.layers.size(), 1u);
  EXPECT_EQ(r.report.layers[0].outputs, std::vector<std::string>{"y"});  // the Relu's output
  for (const builder::Node& n : r.graph.nodes) {
    if (n.op_type == "QLinearConv") {  // what inspect shows
      EXPECT_EQ(n.precision_note, "int8: quantized");
    }
  }
}

TEST(Int8Rewrite, AClipIsAbsorbedOnlyWhereTheQuantizationSaturatesAtIt) {
  // [0, 6] in 255 steps: saturating at 255 is the clip at 6.
  const Rewritten within = rewrite(conv_then("Clip"), {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}, {"y", q(6.0f / 255, 0)}});
  EXPECT_EQ(within.count("Clip"), 0u);
  EXPECT_EQ(within.report.absorbed_activations, 1);
  // [0, 8]: values in (6, 8] would come through unclipped, so the Clip stays (as a table).
  const Rewritten beyond = rewrite(conv_then("Clip"), {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}, {"y", q(8.0f / 255, 0)}});
  EXPECT_EQ(beyond.report.absorbed_activations, 0);
  EXPECT_EQ(beyond.count("QLinearConv"), 1u);
  EXPECT_EQ(beyond.count("QLookup"), 1u);
}

TEST(Int8Rewrite, SiluBecomesATableEqualToDequantizeSiluQuantize) {
  GraphMaker silu = conv_then("Sigmoid", 0, false);  // y = Sigmoid(c); SiLU is c * Sigmoid(c)
  silu.node("Mul", {"c", "y"}, {"z"}, "silu_mul");
  silu.node("Softmax", {"z"}, {"out"}, "head");
  silu.output("out");
  const ActivationQuantization in = q(0.05f, 100), out = q(0.02f, 20);
  const Rewritten r = rewrite(silu, {{"x", q(0.01f, 128)}, {"c", in}, {"y", q(1.0f / 255, 0)}, {"z", out}});
  ASSERT_EQ(r.count("QLookup"), 1u);
  EXPECT_EQ(r.count("Sigmoid"), 0u);
  EXPECT_EQ(r.count("Mul"), 0u);
  for (const builder::Node& n : r.graph.nodes) {
    if (n.op_type != "QLookup") continue;
    const uint8_t* table = r.graph.values[n.inputs[1]].data->data();
    for (int level = 0; level < 256; ++level) {
      const float x = static_cast<float>(level - in.zero_point) * in.scale;
      const float silu_x = x * (1.0f / (1.0f + std::exp(-x)));
      const double want = std::clamp(static_cast<double>(std::nearbyint(silu_x / out.scale)) + out.zero_point, 0.0, 255.0);
      EXPECT_NEAR(table[level], want, 1.0) << "level " << level;  // the kernel's exp may differ in the last bit
    }
  }
}

TEST(Int8Rewrite, ConcatInputsTakeTheConcatsQuantizationSoItMovesBytes) {
  GraphMaker g;
  g.input("x", {1, 2, 4, 4});
  g.floats("w1", {3, 2, 1, 1}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  g.floats("w2", {2, 2, 1, 1}, {-0.1f, 0.2f, -0.3f, 0.4f});
  g.node("Conv", {"x", "w1"}, {"a"}, "left");
  g.node("Conv", {"x", "w2"}, {"b"}, "right");
  auto& concat = g.node("Concat", {"a", "b"}, {"y"}, "join");
  GraphMaker::attr(concat, "axis", int64_t{1});
  g.output("y");
  const Rewritten r = rewrite(g, {{"x", q(0.01f, 128)}, {"a", q(0.01f, 50)}, {"b", q(0.02f, 90)}, {"y", q(0.03f, 70)}});
  EXPECT_EQ(r.count("QLinearConv"), 2u);
  EXPECT_EQ(r.count("Concat"), 1u);
  EXPECT_EQ(r.report.moves, 1);
  EXPECT_EQ(r.report.uint8_tensors.at("a").zero_point, 70);
  EXPECT_EQ(r.report.uint8_tensors.at("b").scale, 0.03f);
}

TEST(Int8Rewrite, ALayerWritingAnEngineOutputStaysFloat32) {
  GraphMaker g = conv_then("Relu", 0, false);
  g.output("c");  // the convolution's own output is one of the model's results
  const Rewritten r = rewrite(g, {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}, {"y", q(0.03f, 0)}});
  EXPECT_EQ(r.count("QLinearConv"), 0u);
  EXPECT_EQ(r.count("Conv"), 1u);
  ASSERT_EQ(r.report.kept_float.size(), 1u);
  EXPECT_NE(r.report.kept_float[0].find("engine output"), std::string::npos) << r.report.kept_float[0];
  for (const builder::Node& n : r.graph.nodes) {
    if (n.op_type == "Conv") {
      EXPECT_EQ(n.precision_note, "float32: writes an engine output (kept float32)");
    }
  }
}

TEST(Int8Rewrite, AOneDimensionalConvolutionRunsAsATwoDimensionalOneBetweenReshapes) {
  GraphMaker g;
  g.input("x", {1, 3, 20});
  std::vector<float> w(5 * 3 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(static_cast<float>(i)) * 0.2f;
  g.floats("w", {5, 3, 4}, w);
  auto& conv = g.node("Conv", {"x", "w"}, {"c"}, "conv1d");
  GraphMaker::attr(conv, "strides", std::vector<int64_t>{2});
  GraphMaker::attr(conv, "pads", std::vector<int64_t>{1, 2});
  g.node("Softmax", {"c"}, {"out"}, "head");
  g.output("out");
  const Rewritten r = rewrite(g, {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}});
  ASSERT_EQ(r.count("QLinearConv"), 1u);
  EXPECT_EQ(r.count("Reshape"), 2u);
  for (const builder::Node& n : r.graph.nodes) {
    if (n.op_type != "QLinearConv") continue;
    EXPECT_EQ(r.graph.values[n.inputs[3]].shape.size(), 4u);
    EXPECT_EQ(n.attribute("pads")->ints, (std::vector<int64_t>{0, 1, 0, 2}));
    EXPECT_EQ(n.attribute("strides")->ints, (std::vector<int64_t>{1, 2}));
  }
}

TEST(Int8Rewrite, LayersNamedFloat32StayFloat32) {
  Int8RewriteOptions options;
  options.keep_float = {"conv"};
  const Rewritten r =
      rewrite(conv_then("Relu"), {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}, {"y", q(0.03f, 0)}}, options);
  EXPECT_EQ(r.made, 0);
  EXPECT_EQ(r.count("Conv"), 1u);
  EXPECT_EQ(r.count("QLinearConv"), 0u);
  for (const builder::Node& n : r.graph.nodes) {
    if (n.op_type == "Conv") {
      EXPECT_EQ(n.precision_note, "float32: forced (--layer-precisions)");
    }
  }
  options.fell_back = {"conv"};  // the accuracy guard's
  const Rewritten guarded =
      rewrite(conv_then("Relu"), {{"x", q(0.01f, 128)}, {"c", q(0.05f, 100)}, {"y", q(0.03f, 0)}}, options);
  for (const builder::Node& n : guarded.graph.nodes) {
    if (n.op_type == "Conv") {
      EXPECT_EQ(n.precision_note, "float32: fell back (accuracy guard)");
    }
  }
}

}  // namespace
}  // namespace edgert::test
