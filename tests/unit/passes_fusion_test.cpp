// Folding BatchNormalization, fusing epilogues and pointwise chains, recognising patterns.
// Fused kernels round where the separate ops did, so outputs must be bit-identical; BN folding
// and pattern replacement change the arithmetic and are compared with a tolerance.
#include <gtest/gtest.h>

#include <cmath>

#include "graph_test_support.h"

namespace edgert::test {
namespace {

using M = GraphMaker;

void expect_close(const OptimizedBuild& b, float tolerance) {
  ASSERT_EQ(b.optimized_outputs.size(), b.reference_outputs.size());
  for (size_t o = 0; o < b.reference_outputs.size(); ++o) {
    ASSERT_EQ(b.optimized_outputs[o].size(), b.reference_outputs[o].size());
    for (size_t i = 0; i < b.reference_outputs[o].size(); ++i)
      EXPECT_NEAR(b.optimized_outputs[o][i], b.reference_outputs[o][i], tolerance * (1 + std::fabs(b.reference_outputs[o][i])))
          << "output " << o << " element " << i;
  }
}

std::vector<float> ramp(size_t n, float scale, float offset = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.7f + offset) * scale;
  return v;
}

TEST(BatchNormFolding, ConvBatchNormReluBecomesOneFusedConvNamedAfterItsParts) {
  GraphMaker g;
  g.input("x", {1, 3, 8, 8});
  g.floats("w", {4, 3, 3, 3}, ramp(108, 0.5f));
  g.floats("b", {4}, {0.1f, -0.2f, 0.3f, 0});
  g.floats("scale", {4}, {1.5f, 0.5f, 2, 1});
  g.floats("bias", {4}, {0.1f, 0.2f, -0.3f, 0});
  g.floats("mean", {4}, {0.05f, -0.1f, 0.2f, 0.3f});
  g.floats("var", {4}, {1, 0.5f, 2, 0.25f});
  M::attr(g.node("Conv", {"x", "w", "b"}, {"c"}, "conv1"), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"}, "bn1");
  g.node("Relu", {"n"}, {"y"}, "relu1");
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{1, 3, 8, 8}});
  ASSERT_EQ(b.ops(), std::vector<std::string>{"edgert.FusedConv"});
  EXPECT_EQ(b.optimized.model.graphs[0].nodes[0].name, "conv1 + bn1 + relu1");
  expect_close(b, 1e-5f);
}

TEST(BatchNormFolding, GemmBatchNormFoldsIntoWeightsAndBias) {
  GraphMaker g;
  g.input("x", {2, 5});
  g.floats("w", {3, 5}, ramp(15, 1));
  g.floats("c", {3}, {0.5f, -1, 2});
  g.floats("scale", {3}, {2, 0.5f, 1});
  g.floats("bias", {3}, {0, 1, -1});
  g.floats("mean", {3}, {0.1f, 0.2f, 0.3f});
  g.floats("var", {3}, {1, 2, 3});
  M::attr(g.node("Gemm", {"x", "w", "c"}, {"m"}), "transB", int64_t{1});
  g.node("BatchNormalization", {"m", "scale", "bias", "mean", "var"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 5}});
  EXPECT_EQ(b.ops(), std::vector<std::string>{"Gemm"});
  expect_close(b, 1e-5f);
}

// A transformer block's residual stream: the out projection (Gemm with a bias vector, [L*B, E])
// reshaped to [L, B, E] and added to the block's input, then the MLP's second product (MatMul +
// bias) added to that. Each Add joins its product as the residual (input 3); the Reshape stays,
// now writing what the Add wrote. Bit for bit the unfused graph's.
TEST(ActivationFusion, ResidualAddsJoinTheirProductsThroughAReshape) {
  GraphMaker g;
  g.input("x", {6, 8});
  g.input("stream", {3, 2, 8});
  g.floats("w1", {8, 8}, ramp(64, 0.5f));
  g.floats("c1", {8}, ramp(8, 0.2f, 1));
  g.floats("w2", {8, 8}, ramp(64, 0.3f, 2));
  g.floats("b2", {8}, ramp(8, 0.1f, 3));
  g.ints("lbe", {3}, {3, 2, 8});
  M::attr(g.node("Gemm", {"x", "w1", "c1"}, {"proj"}, "out_proj"), "transB", int64_t{1});
  g.node("Reshape", {"proj", "lbe"}, {"unfolded"}, "unfold");
  g.node("Add", {"stream", "unfolded"}, {"h"}, "residual_1");
  g.node("MatMul", {"h", "w2"}, {"m"}, "fc2");
  g.node("Add", {"m", "b2"}, {"mb"}, "fc2_bias");
  g.node("Add", {"h", "mb"}, {"y"}, "residual_2");
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{6, 8}, {3, 2, 8}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedGemm", "Reshape", "edgert.FusedMatMul"})) << b.log;
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes) {
    if (n.domain != "edgert") continue;
    ASSERT_EQ(n.inputs.size(), 4u) << n.name;
    EXPECT_NE(n.name.find("residual"), std::string::npos) << n.name;
  }
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// A residual that broadcasts ([E] added to [L, B, E]) is no residual: the Add stays.
TEST(ActivationFusion, AnAddThatBroadcastsStaysOutOfTheProduct) {
  GraphMaker g;
  g.input("x", {3, 2, 8});
  g.input("row", {8});
  g.floats("w", {8, 8}, ramp(64, 0.5f));
  g.node("MatMul", {"x", "w"}, {"m"});
  g.node("Add", {"m", "row"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{3, 2, 8}, {8}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"MatMul", "Add"})) << b.log;
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(ActivationFusion, ConvResidualAddReluAndConvSiluAreBitIdentical) {
  GraphMaker g;
  g.input("x", {1, 4, 6, 6});
  g.floats("w1", {4, 4, 3, 3}, ramp(144, 0.3f));
  g.floats("w2", {4, 4, 1, 1}, ramp(16, 0.8f, 1));
  g.floats("b2", {4}, {0.1f, 0.2f, 0.3f, 0.4f});
  M::attr(g.node("Conv", {"x", "w1"}, {"c1"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Add", {"c1", "x"}, {"a"});
  g.node("Relu", {"a"}, {"r"});
  g.node("Conv", {"r", "w2", "b2"}, {"c2"});
  g.node("Sigmoid", {"c2"}, {"s"});
  g.node("Mul", {"s", "c2"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{1, 4, 6, 6}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedConv", "edgert.FusedConv"}));
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// Shapes of whole 8x32 tiles (16 channels, 8x8 pixels): on AVX-512 machines the fused epilogue
// then runs in the GEMM micro-kernel's registers, and must still round as the unfused graph.
TEST(ActivationFusion, WholeTileEpiloguesInTheGemmKernelAreBitIdentical) {
  GraphMaker g;
  g.input("x", {1, 16, 8, 8});
  g.floats("w1", {16, 16, 1, 1}, ramp(256, 0.05f));
  g.floats("b1", {16}, ramp(16, 0.1f, 1));
  g.floats("w2", {16, 16, 1, 1}, ramp(256, 0.07f, 2));
  g.floats("w3", {16, 16, 1, 1}, ramp(256, 0.09f, 3));
  g.floats("b3", {16}, ramp(16, 0.2f, 2));
  g.floats("w4", {16, 16, 1, 1}, ramp(256, 0.11f, 1));
  g.floats("lo", {}, {0});
  g.floats("hi", {}, {6});
  g.node("Conv", {"x", "w1", "b1"}, {"c1"});
  g.node("Add", {"c1", "x"}, {"a"});
  g.node("Relu", {"a"}, {"r"});
  g.node("Conv", {"r", "w2"}, {"c2"});
  g.node("Sigmoid", {"c2"}, {"s"});
  g.node("Mul", {"c2", "s"}, {"silu"});
  g.node("Conv", {"silu", "w3", "b3"}, {"c3"});
  g.node("HardSwish", {"c3"}, {"h"});
  g.node("Conv", {"h", "w4"}, {"c4"});
  g.node("Clip", {"c4", "lo", "hi"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{1, 16, 8, 8}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedConv", "edgert.FusedConv", "edgert.FusedConv",
                                               "edgert.FusedConv"}));
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(ActivationFusion, GemmLeakyReluAndMatMulBiasClipAreBitIdentical) {
  GraphMaker g;
  g.input("x", {2, 5});
  g.floats("w", {5, 4}, ramp(20, 1));
  g.floats("bias", {4}, {0.5f, -0.5f, 1, 0});
  g.floats("lo", {}, {0});
  g.floats("hi", {}, {1.5f});
  g.node("Gemm", {"x", "w"}, {"g"});
  M::attr(g.node("LeakyRelu", {"g"}, {"y1"}), "alpha", 0.2f);
  g.node("MatMul", {"x", "w"}, {"m"});
  g.node("Add", {"m", "bias"}, {"a"});
  g.node("Clip", {"a", "lo", "hi"}, {"y2"});
  g.output("y1");
  g.output("y2");
  OptimizedBuild b = build_both(g.model(), {{2, 5}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedGemm", "edgert.FusedMatMul"}));
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(PoolFusion, ConvActivationMaxPoolBecomesOneFusedConvAndStaysBitIdentical) {
  GraphMaker g;
  g.input("x", {1, 3, 17, 15});
  g.floats("w1", {4, 3, 3, 3}, ramp(108, 0.4f));
  g.floats("b1", {4}, {0.1f, -0.2f, 0.3f, 0});
  g.floats("w2", {5, 4, 1, 1}, ramp(20, 0.6f, 2));
  onnx::NodeProto& conv1 = g.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  M::attr(conv1, "pads", std::vector<int64_t>{1, 1, 1, 1});
  M::attr(conv1, "strides", std::vector<int64_t>{2, 2});
  g.node("Relu", {"c1"}, {"r1"}, "relu1");
  onnx::NodeProto& pool1 = g.node("MaxPool", {"r1"}, {"p1"}, "pool1");
  M::attr(pool1, "kernel_shape", std::vector<int64_t>{3, 3});
  M::attr(pool1, "strides", std::vector<int64_t>{2, 2});
  M::attr(pool1, "ceil_mode", int64_t{1});
  g.node("Conv", {"p1", "w2"}, {"c2"}, "conv2");  // no activation: a plain Conv becomes the FusedConv
  onnx::NodeProto& pool2 = g.node("MaxPool", {"c2"}, {"y"}, "pool2");
  M::attr(pool2, "kernel_shape", std::vector<int64_t>{2, 2});
  M::attr(pool2, "pads", std::vector<int64_t>{1, 1, 0, 0});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{1, 3, 17, 15}});
  ASSERT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedConv", "edgert.FusedConv"}));
  EXPECT_EQ(b.optimized.model.graphs[0].nodes[0].name, "conv1 + relu1 + pool1");
  EXPECT_EQ(b.optimized.model.graphs[0].nodes[1].name, "conv2 + pool2");
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(PoolFusion, APoolWithIndicesOrAConvOutputReadElsewhereStaysApart) {
  GraphMaker g;
  g.input("x", {1, 2, 8, 8});
  g.floats("w", {3, 2, 3, 3}, ramp(54, 0.5f));
  g.node("Conv", {"x", "w"}, {"c1"});
  M::attr(g.node("MaxPool", {"c1"}, {"p1", "i1"}), "kernel_shape", std::vector<int64_t>{2, 2});  // Indices
  g.node("Conv", {"x", "w"}, {"c2"});
  M::attr(g.node("MaxPool", {"c2"}, {"p2"}), "kernel_shape", std::vector<int64_t>{2, 2});
  g.output("p1");
  g.output("i1");
  g.output("p2");
  g.output("c2");  // the convolution's output is an engine output too
  OptimizedBuild b = build_both(g.model(), {{1, 2, 8, 8}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"Conv", "MaxPool", "Conv", "MaxPool"}));
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// Squeeze-and-excitation: x * sigmoid(fc(mean(x))) feeding a 1x1 projection with a residual.
TEST(ChannelScaleFusion, TheExcitationMultiplyGoesIntoTheProjectionAndStaysBitIdentical) {
  GraphMaker g;
  g.input("x", {2, 6, 5, 7});
  g.floats("w_se", {6, 6, 1, 1}, ramp(36, 0.3f));
  g.floats("b_se", {6}, ramp(6, 0.2f, 1));
  g.floats("w_proj", {6, 6, 1, 1}, ramp(36, 0.5f, 2));
  g.floats("b_proj", {6}, ramp(6, 0.1f, 3));
  g.node("GlobalAveragePool", {"x"}, {"m"});
  g.node("Conv", {"m", "w_se", "b_se"}, {"f"});
  g.node("Sigmoid", {"f"}, {"s"});
  g.node("Mul", {"x", "s"}, {"scaled"}, "excite");
  g.node("Conv", {"scaled", "w_proj", "b_proj"}, {"p"}, "project");
  g.node("Add", {"p", "x"}, {"y"}, "residual");
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 6, 5, 7}});
  ASSERT_EQ(b.ops(), (std::vector<std::string>{"GlobalAveragePool", "edgert.FusedConv", "edgert.FusedConv"}));
  EXPECT_EQ(b.optimized.model.graphs[0].nodes[2].name, "excite + project + residual");
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// An inverted residual's expansion (1x1 + Clip) and depthwise convolution (3x3 s2 + Relu): one
// FusedConv with the 1x1 as its pre-convolution when the expanded tensor is large (64 x 112 x
// 112 floats, 3.2 MB), computed band by band; kept apart when small or read by anyone else.
void expansion_block(GraphMaker& g, int64_t size) {
  g.input("x", {1, 8, size, size});
  g.floats("w_exp", {64, 8, 1, 1}, ramp(512, 0.4f));
  g.floats("b_exp", {64}, ramp(64, 0.3f, 1));
  g.floats("lo", {}, {0});
  g.floats("hi", {}, {6});
  g.floats("w_dw", {64, 1, 3, 3}, ramp(576, 0.5f, 2));
  g.node("Conv", {"x", "w_exp", "b_exp"}, {"e"}, "expand");
  g.node("Clip", {"e", "lo", "hi"}, {"ec"}, "clip");
  onnx::NodeProto& dw = g.node("Conv", {"ec", "w_dw"}, {"d"}, "dw");
  M::attr(dw, "group", int64_t{64});
  M::attr(dw, "strides", std::vector<int64_t>{2, 2});
  M::attr(dw, "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Relu", {"d"}, {"y"}, "relu");
  g.output("y");
}

TEST(ExpandDepthwiseFusion, ALargeExpansionAndItsDepthwiseBecomeOneBandedConv) {
  GraphMaker g;
  expansion_block(g, 112);
  OptimizedBuild b = build_both(g.model(), {{1, 8, 112, 112}});
  ASSERT_EQ(b.ops(), std::vector<std::string>{"edgert.FusedConv"});
  EXPECT_EQ(b.optimized.model.graphs[0].nodes[0].name, "expand + clip + dw + relu");
  // The same GEMM micro-kernel and depthwise kernel as the two nodes, band by band.
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);

  GraphMaker small;
  expansion_block(small, 40);
  OptimizedBuild kept = build_both(small.model(), {{1, 8, 40, 40}});
  EXPECT_EQ(kept.ops(), (std::vector<std::string>{"edgert.FusedConv", "edgert.FusedConv"})) << "0.4 MB stays in cache";
  EXPECT_EQ(kept.optimized_outputs, kept.reference_outputs);

  GraphMaker read;
  expansion_block(read, 112);
  read.output("ec");
  OptimizedBuild apart = build_both(read.model(), {{1, 8, 112, 112}});
  EXPECT_EQ(apart.ops(), (std::vector<std::string>{"edgert.FusedConv", "edgert.FusedConv"}))
      << "the expanded tensor is an output";
  EXPECT_EQ(apart.optimized_outputs, apart.reference_outputs);
}

TEST(PointwiseFusion, AChainOfElementwiseOpsBecomesOneKernel) {
  GraphMaker g;
  g.input("x", {3, 5});
  g.floats("two", {}, {2});
  g.floats("half", {1}, {0.5f});
  g.node("Mul", {"x", "two"}, {"m"});
  g.node("Sub", {"half", "m"}, {"s"});
  g.node("HardSigmoid", {"s"}, {"h"});
  g.node("Tanh", {"h"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{3, 5}});
  EXPECT_EQ(b.ops(), std::vector<std::string>{"edgert.PointwiseChain"});
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// Q / sqrt(d) -> MatMul(Q', Kt) -> * c -> + mask -> Softmax(last) -> MatMul(P, V), heads in the
// batch, as nn.MultiheadAttention exports: one edgert.FusedAttention named after its six parts,
// equal to the unfused graph (the softmax's float exp against the reference's double one).
void attention_graph(GraphMaker& g, bool softmax_read_twice) {
  g.input("q", {2, 4, 5, 8});
  g.input("kt", {2, 4, 8, 7});
  g.input("v", {2, 4, 7, 6});
  g.floats("sqrt_d", {}, {2.828427f});
  g.floats("c", {}, {0.5f});
  g.floats("mask", {2, 1, 1, 7}, {0, 0, 0, -1e4f, 0, 0, -1e4f, 0, -1e4f, 0, 0, 0, 0, 0});
  g.node("Div", {"q", "sqrt_d"}, {"qs"}, "scale_q");
  g.node("MatMul", {"qs", "kt"}, {"s"}, "scores");
  g.node("Mul", {"s", "c"}, {"sc"}, "scale_scores");
  g.node("Add", {"sc", "mask"}, {"sm"}, "mask_add");
  M::attr(g.node("Softmax", {"sm"}, {"p"}, "softmax"), "axis", int64_t{-1});
  g.node("MatMul", {"p", "v"}, {"o"}, "context");
  g.output("o");
  if (softmax_read_twice) g.output("p");
}

TEST(AttentionFusion, ScaledMaskedAttentionBecomesOneNodeNamedAfterItsParts) {
  GraphMaker g(17);
  attention_graph(g, false);
  OptimizedBuild b = build_both(g.model(), {{2, 4, 5, 8}, {2, 4, 8, 7}, {2, 4, 7, 6}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedAttention"}));
  bool named = false;
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes)
    named = named || n.name == "scale_q + scores + scale_scores + mask_add + softmax + context";
  EXPECT_TRUE(named) << b.log;
  expect_close(b, 1e-5f);
}

// torchvision's ViT: Q and Kt each scaled by 1/sqrt(sqrt(d)), Kt a Transpose of K's last two
// axes. The node reads K untransposed (keys_transposed 0), the keys' scale goes to the scores,
// and the Transpose and both Muls are among its parts.
TEST(AttentionFusion, TransposedAndScaledKeysAreReadUntransposed) {
  GraphMaker g(17);
  g.input("q", {2, 4, 5, 8});
  g.input("k", {2, 4, 7, 8});
  g.input("v", {2, 4, 7, 6});
  g.floats("c", {}, {0.5946f});
  g.node("Mul", {"q", "c"}, {"qs"}, "scale_q");
  M::attr(g.node("Transpose", {"k"}, {"kt"}, "keys_t"), "perm", std::vector<int64_t>{0, 1, 3, 2});
  g.node("Mul", {"kt", "c"}, {"kts"}, "scale_k");
  g.node("MatMul", {"qs", "kts"}, {"s"}, "scores");
  M::attr(g.node("Softmax", {"s"}, {"p"}, "softmax"), "axis", int64_t{-1});
  g.node("MatMul", {"p", "v"}, {"o"}, "context");
  g.output("o");
  OptimizedBuild b = build_both(g.model(), {{2, 4, 5, 8}, {2, 4, 7, 8}, {2, 4, 7, 6}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedAttention"}));
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes) {
    const builder::Attribute* keys = n.attribute("keys_transposed");
    ASSERT_NE(keys, nullptr) << b.log;
    EXPECT_EQ(keys->i, 0);
    EXPECT_NE(n.name.find("keys_t"), std::string::npos) << n.name;
    EXPECT_NE(n.name.find("scale_k"), std::string::npos) << n.name;
  }
  expect_close(b, 1e-5f);
}

// PyTorch's nn.MultiheadAttention around the attention: heads moved from [L, B*H, D] to
// [B*H, L, D] by Transposes (Kt by perm [1, 2, 0]) and back after it. The fused node reads the
// Transposes' inputs and writes the output's Transpose in place: no Transpose is left, and the
// result is the unfused graph's.
TEST(AttentionFusion, HeadTransposesAroundTheAttentionAreReadThrough) {
  GraphMaker g(17);
  g.input("q", {5, 6, 8});
  g.input("k", {7, 6, 8});
  g.input("v", {7, 6, 4});
  g.input("mask", {6, 5, 7});
  M::attr(g.node("Transpose", {"q"}, {"qh"}, "q_heads"), "perm", std::vector<int64_t>{1, 0, 2});
  M::attr(g.node("Transpose", {"k"}, {"kt"}, "k_heads"), "perm", std::vector<int64_t>{1, 2, 0});
  M::attr(g.node("Transpose", {"v"}, {"vh"}, "v_heads"), "perm", std::vector<int64_t>{1, 0, 2});
  g.floats("c", {}, {0.35f});
  g.node("Div", {"qh", "c"}, {"qs"}, "scale_q");
  g.node("MatMul", {"qs", "kt"}, {"s"}, "scores");
  g.node("Add", {"s", "mask"}, {"sm"}, "masked");
  M::attr(g.node("Softmax", {"sm"}, {"p"}, "softmax"), "axis", int64_t{-1});
  g.node("MatMul", {"p", "vh"}, {"o"}, "context");
  M::attr(g.node("Transpose", {"o"}, {"y"}, "merge_heads"), "perm", std::vector<int64_t>{1, 0, 2});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{5, 6, 8}, {7, 6, 8}, {7, 6, 4}, {6, 5, 7}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"edgert.FusedAttention"})) << b.log;
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes) {
    const std::pair<const char*, std::vector<int64_t>> views[] = {
        {"q_perm", {1, 0, 2}}, {"k_perm", {1, 0, 2}}, {"v_perm", {1, 0, 2}}, {"y_perm", {1, 0, 2}}};
    for (const auto& [name, perm] : views) {
      const builder::Attribute* a = n.attribute(name);
      ASSERT_NE(a, nullptr) << name;
      EXPECT_EQ(a->ints, perm) << name;
    }
    ASSERT_NE(n.attribute("keys_transposed"), nullptr);
    EXPECT_EQ(n.attribute("keys_transposed")->i, 0);
    EXPECT_NE(n.name.find("merge_heads"), std::string::npos) << n.name;
  }
  expect_close(b, 1e-5f);
}

// The same as PyTorch 2 exports it: each Transpose's [B*H, L, D] split into [B, H, L, D] by a
// Reshape before the attention, the keys then swapped for the scores, Q and Kt scaled. The split
// moves before the Transpose (shuffle elimination), and the attention reads all three through.
TEST(AttentionFusion, HeadsSplitAfterTheirTransposesAreReadThrough) {
  GraphMaker g(17);
  g.input("q", {5, 6, 8});
  g.input("k", {7, 6, 8});
  g.input("v", {7, 6, 4});
  g.ints("q_heads", {4}, {2, 3, 5, 8});
  g.ints("k_heads", {4}, {2, 3, 7, 8});
  g.ints("v_heads", {4}, {2, 3, 7, 4});
  const char* names[] = {"q", "k", "v"};
  for (const char* n : names) {
    const std::string t = std::string(n) + "t", h = std::string(n) + "h";
    M::attr(g.node("Transpose", {n}, {t}, t), "perm", std::vector<int64_t>{1, 0, 2});
    g.node("Reshape", {t, std::string(n) + "_heads"}, {h}, h);
  }
  M::attr(g.node("Transpose", {"kh"}, {"kht"}, "keys_t"), "perm", std::vector<int64_t>{0, 1, 3, 2});
  g.floats("c", {}, {0.59f});  // PyTorch scales Q and Kt by the square root of the scale each
  g.node("Mul", {"qh", "c"}, {"qs"}, "scale_q");
  g.node("Mul", {"kht", "c"}, {"kts"}, "scale_k");
  g.node("MatMul", {"qs", "kts"}, {"s"}, "scores");
  M::attr(g.node("Softmax", {"s"}, {"p"}, "softmax"), "axis", int64_t{-1});
  g.node("MatMul", {"p", "vh"}, {"y"}, "context");
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{5, 6, 8}, {7, 6, 8}, {7, 6, 4}});
  EXPECT_EQ(b.count("Transpose"), 0u) << b.log;
  EXPECT_EQ(b.count("edgert.FusedAttention"), 1u) << b.log;
  expect_close(b, 1e-5f);
}

// PyTorch 2's nn.MultiheadAttention whole: Q, K and V from one packed projection (unflatten,
// unsqueeze, transpose, squeeze, then [0], [1], [2]), heads moved to [B*H, L, D] and split to
// [B, H, L, D], Q and Kt scaled, the output's heads moved back. One FusedAttention reads the
// packed projection three times at Q's, K's and V's offsets: no Gather, Transpose or Squeeze is
// left, and the result is the unfused graph's.
TEST(AttentionFusion, APackedProjectionIsReadInPlaceAtQKAndVsOffsets) {
  constexpr int64_t L = 5, B = 2, H = 3, D = 4, E = H * D;
  GraphMaker g(17);
  packed_attention_graph(g, L, B, H, D, ramp(E * 3 * E, 0.4f));
  OptimizedBuild b = build_both(g.model(), {{L, B, E}});
  EXPECT_EQ(b.count("edgert.FusedAttention"), 1u) << b.log;
  for (const char* gone : {"Gather", "Transpose", "Squeeze", "Unsqueeze"}) EXPECT_EQ(b.count(gone), 0u) << gone << "\n" << b.log;
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes) {
    if (n.op_type != "FusedAttention") continue;
    ASSERT_EQ(n.inputs.size(), 3u);
    EXPECT_EQ(n.inputs[0], n.inputs[1]);
    EXPECT_EQ(n.inputs[1], n.inputs[2]);
    const std::pair<const char*, std::vector<int64_t>> picks[] = {
        {"q_select", {2, 0}}, {"k_select", {2, 1}}, {"v_select", {2, 2}}};
    for (const auto& [name, select] : picks) {
      const builder::Attribute* a = n.attribute(name);
      ASSERT_NE(a, nullptr) << name;
      EXPECT_EQ(a->ints, select) << name;
    }
  }
  expect_close(b, 1e-5f);
}

// ONNX's Attention (opset 23), 4-D with a float mask and a scale: one edgert.FusedAttention
// reading K untransposed, equal to the Attention kernel; a causal one keeps that kernel.
TEST(AttentionFusion, OnnxAttentionOfFourDimensionalHeadsBecomesTheFusedNode) {
  for (bool causal : {false, true}) {
    GraphMaker g(23);
    g.input("q", {2, 3, 5, 8});
    g.input("k", {2, 3, 7, 8});
    g.input("v", {2, 3, 7, 6});
    g.floats("mask", {1, 1, 5, 7}, ramp(35, 1.5f));
    auto& attention = g.node("Attention", {"q", "k", "v", "mask"}, {"y"}, "attention");
    M::attr(attention, "scale", 0.3f);
    if (causal) M::attr(attention, "is_causal", int64_t{1});
    g.output("y");
    OptimizedBuild b = build_both(g.model(), {{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}});
    EXPECT_EQ(b.ops(), (std::vector<std::string>{causal ? "Attention" : "edgert.FusedAttention"})) << b.log;
    expect_close(b, 1e-5f);
  }
}

TEST(AttentionFusion, ProbabilitiesReadElsewhereStayUnfused) {
  GraphMaker g(17);
  attention_graph(g, true);
  OptimizedBuild b = build_both(g.model(), {{2, 4, 5, 8}, {2, 4, 8, 7}, {2, 4, 7, 6}});
  EXPECT_EQ(b.count("edgert.FusedAttention"), 0u);
  EXPECT_EQ(b.count("Softmax"), 1u);
  expect_close(b, 1e-5f);
}

TEST(PatternRecognition, GeluLayerNormAndLogSoftmaxAreRecognised) {
  GraphMaker g;
  g.input("x", {2, 8});
  g.floats("sqrt2", {}, {1.4142135f});
  g.floats("one", {}, {1});
  g.floats("half", {}, {0.5f});
  g.floats("two", {}, {2});
  g.floats("eps", {}, {1e-5f});
  g.floats("gamma", {8}, ramp(8, 1, 2));
  g.floats("beta", {8}, ramp(8, 0.5f, 3));
  g.node("Div", {"x", "sqrt2"}, {"d"});
  g.node("Erf", {"d"}, {"e"});
  g.node("Add", {"e", "one"}, {"a"});
  g.node("Mul", {"x", "a"}, {"m"});
  g.node("Mul", {"m", "half"}, {"gelu"});
  M::attr(g.node("ReduceMean", {"x"}, {"mean"}), "axes", std::vector<int64_t>{-1});
  g.node("Sub", {"x", "mean"}, {"xc"});
  g.node("Pow", {"xc", "two"}, {"sq"});
  M::attr(g.node("ReduceMean", {"sq"}, {"var"}), "axes", std::vector<int64_t>{-1});
  g.node("Add", {"var", "eps"}, {"ve"});
  g.node("Sqrt", {"ve"}, {"std"});
  g.node("Div", {"xc", "std"}, {"norm"});
  g.node("Mul", {"norm", "gamma"}, {"scaled"});
  g.node("Add", {"scaled", "beta"}, {"ln"});
  M::attr(g.node("Softmax", {"x"}, {"sm"}), "axis", int64_t{-1});
  g.node("Log", {"sm"}, {"lsm"});
  g.output("gelu");
  g.output("ln");
  g.output("lsm");
  OptimizedBuild b = build_both(g.model(), {{2, 8}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"Gelu", "LayerNormalization", "LogSoftmax"}));
  expect_close(b, 1e-5f);
}

TEST(PassManager, VerboseBuildLogsNodeCountsPerPass) {
  GraphMaker g;
  g.input("x", {4});
  g.node("Identity", {"x"}, {"i"});
  g.node("Relu", {"i"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{4}});
  for (const char* pass : {"constant-folding", "identity-elimination", "shuffle-elimination", "common-subexpression",
                           "dead-code", "batchnorm-folding", "pattern-recognition", "activation-fusion",
                           "pool-fusion", "channel-scale-fusion", "expand-depthwise-fusion", "pointwise-fusion"})
    EXPECT_NE(b.log.find(std::string("pass ") + pass + ": "), std::string::npos) << pass << "\n" << b.log;
  EXPECT_NE(b.log.find("pass identity-elimination: 2 -> 1 nodes (1 rewrites)"), std::string::npos) << b.log;
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

}  // namespace
}  // namespace edgert::test
