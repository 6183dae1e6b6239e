// Folding and clean-up passes on tiny graphs: each test builds a model with and without the
// passes, checks what the optimized graph holds and that both engines compute the same.
#include <gtest/gtest.h>

#include "graph_test_support.h"

namespace edgert::test {
namespace {

using M = GraphMaker;

TEST(ConstantFolding, ShapeGatherConcatReshapeChainFoldsOnceShapesAreKnown) {
  GraphMaker g;
  g.input("x", {2, 3, 4});
  g.ints("zero", {}, {0});
  g.ints("axes", {1}, {0});
  g.ints("minus_one", {1}, {-1});
  g.node("Shape", {"x"}, {"shape"});
  g.node("Gather", {"shape", "zero"}, {"batch"});
  g.node("Unsqueeze", {"batch", "axes"}, {"batch1"});
  M::attr(g.node("Concat", {"batch1", "minus_one"}, {"target"}), "axis", int64_t{0});
  g.node("Reshape", {"x", "target"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 3, 4}});
  EXPECT_EQ(b.ops(), std::vector<std::string>{"Reshape"});
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
  EXPECT_NE(b.log.find("pass constant-folding: 5 -> 1 nodes"), std::string::npos) << b.log;
}

TEST(ConstantFolding, OpsOnConstantsRunOnceWithThePluginKernel) {
  GraphMaker g;
  g.input("x", {3, 2});
  g.floats("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  g.node("Transpose", {"w"}, {"wt"});
  g.node("Exp", {"wt"}, {"e"});
  g.node("Add", {"x", "e"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{3, 2}});
  EXPECT_EQ(b.ops(), std::vector<std::string>{"Add"});
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);  // same kernels, so bit-identical
}

TEST(DeadCode, NodesNobodyReadsAreRemoved) {
  GraphMaker g;
  g.input("x", {4});
  g.node("Relu", {"x"}, {"unused"});
  g.node("Neg", {"unused"}, {"unused2"});
  g.node("Sigmoid", {"x"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{4}});
  EXPECT_EQ(b.ops(), std::vector<std::string>{"Sigmoid"});
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(CommonSubexpression, EqualNodesAndConstantsAreComputedOnce) {
  GraphMaker g;
  g.input("x", {2, 3});
  g.floats("c1", {3}, {1, 2, 3});
  g.floats("c2", {3}, {1, 2, 3});
  g.node("Mul", {"x", "c1"}, {"m1"});
  g.node("Mul", {"x", "c2"}, {"m2"});
  g.node("Sub", {"m1", "m2"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 3}});
  EXPECT_EQ(b.count("Mul"), 1u);
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(IdentityElimination, IdentityDropoutTimesOneAndPlusZeroAreErased) {
  GraphMaker g;
  g.input("x", {2, 4});
  g.floats("ones", {4}, {1, 1, 1, 1});
  g.floats("zero", {}, {0});
  g.node("Identity", {"x"}, {"i"});
  g.node("Dropout", {"i"}, {"d"});
  g.node("Relu", {"d"}, {"r"});
  g.node("Mul", {"r", "ones"}, {"m"});
  g.node("Add", {"zero", "m"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 4}});
  EXPECT_EQ(b.ops(), std::vector<std::string>{"Relu"});
  EXPECT_EQ(b.optimized.model.graphs[0].values[b.optimized.model.graphs[0].outputs[0]].name, "y");
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(IdentityElimination, AConstantThatBroadcastsIsKept) {
  GraphMaker g;
  g.input("x", {4});
  g.floats("ones", {2, 4}, {1, 1, 1, 1, 1, 1, 1, 1});
  g.node("Mul", {"x", "ones"}, {"y"});  // [4] * [2, 4] -> [2, 4]: not the identity
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{4}});
  EXPECT_EQ(b.count("Mul"), 1u);
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// Swin's pad-to-whole-windows and crop-back at a size that needs neither: Pad by zeros and a
// Slice of every element (an end at the dim, or past any dim) go; a Slice that crops stays.
TEST(IdentityElimination, PadByNothingAndSliceOfEverythingAreErased) {
  GraphMaker g;
  g.input("x", {2, 7, 5});
  g.ints("no_pads", {6}, {0, 0, 0, 0, 0, 0});
  g.ints("zero", {2}, {0, 0});
  g.ints("whole", {2}, {7, INT64_MAX});
  g.ints("axes", {2}, {1, -1});
  g.ints("start", {1}, {0});
  g.ints("crop", {1}, {4});
  g.ints("axis1", {1}, {1});
  g.node("Pad", {"x", "no_pads"}, {"p"});
  g.node("Slice", {"p", "zero", "whole", "axes"}, {"s"});
  g.node("Relu", {"s"}, {"r"});
  g.node("Slice", {"r", "start", "crop", "axis1"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 7, 5}});
  EXPECT_EQ(b.count("Pad"), 0u);
  EXPECT_EQ(b.count("Slice"), 1u);
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

TEST(ShuffleElimination, TransposePairsAndReshapeChainsCollapse) {
  GraphMaker g;
  g.input("x", {2, 3, 4});
  g.ints("s1", {2}, {6, 4});
  g.ints("s2", {3}, {4, 3, 2});
  M::attr(g.node("Transpose", {"x"}, {"t1"}), "perm", std::vector<int64_t>{0, 2, 1});
  M::attr(g.node("Transpose", {"t1"}, {"t2"}), "perm", std::vector<int64_t>{0, 2, 1});
  g.node("Relu", {"t2"}, {"r"});
  g.node("Reshape", {"r", "s1"}, {"a"});
  g.node("Reshape", {"a", "s2"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{2, 3, 4}});
  EXPECT_EQ(b.count("Transpose"), 0u);
  EXPECT_EQ(b.count("Reshape"), 1u);
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// [1, 5, 1, 8] -> perm (1, 0, 3, 2) -> [5, 1, 8, 1]: only unit dims move, so the same bytes in
// the same order (a Reshape, which runs in place); (3, 2, 1, 0) reverses 5 and 8 and stays.
TEST(ShuffleElimination, ATransposeMovingOnlyUnitDimsBecomesAReshape) {
  GraphMaker g;
  g.input("x", {1, 5, 1, 8});
  M::attr(g.node("Transpose", {"x"}, {"t"}), "perm", std::vector<int64_t>{1, 0, 3, 2});
  g.node("Relu", {"t"}, {"r"});
  M::attr(g.node("Transpose", {"r"}, {"y"}), "perm", std::vector<int64_t>{2, 1, 0, 3});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{1, 5, 1, 8}});
  EXPECT_EQ(b.count("Transpose"), 1u) << "the second one moves 5 past 8";
  EXPECT_EQ(b.count("Reshape"), 1u);
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// Heads moved from [L, B*H, D] to [B*H, L, D], then split into [B, H, L, D]: the split goes to
// the Transpose's input side ([L, B, H, D], in place), the Transpose last, bit for bit the same.
TEST(ShuffleElimination, AReshapeSplittingATransposesDimsMovesBeforeIt) {
  GraphMaker g;
  g.input("x", {5, 6, 8});
  g.ints("heads", {4}, {2, 3, 5, 8});
  M::attr(g.node("Transpose", {"x"}, {"t"}, "to_heads"), "perm", std::vector<int64_t>{1, 0, 2});
  g.node("Reshape", {"t", "heads"}, {"h"}, "split_heads");
  g.node("Relu", {"h"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{5, 6, 8}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"Reshape", "Transpose", "Relu"})) << b.log;
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes) {
    if (n.op_type == "Transpose") {
      EXPECT_EQ(n.attribute("perm")->ints, (std::vector<int64_t>{1, 2, 0, 3}));
    }
  }
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// PyTorch 2's packed projection [L, B, 3*E] taken apart: unflatten to [L, B, 3, E], unsqueeze(0),
// transpose(0, -2), squeeze(-2), then [0], [1], [2], each split into heads [L, B, H, D]. The
// Squeeze takes out what the Unsqueeze put in (one Transpose of [L, B, 3, E] is left), each
// Gather reads through that Transpose (axis 2 of [L, B, 3, E]: the Transpose goes), and the heads'
// split moves before the Gathers ([L, B, 3, H, D], in place, one Reshape with the unflatten):
// three Gathers and one Reshape, bit for bit the same.
TEST(ShuffleElimination, APackedProjectionsPartsAreGatheredFromItsSplit) {
  GraphMaker g(17);
  g.input("x", {5, 2, 36});
  g.ints("unflatten", {4}, {5, 2, 3, 12});
  g.ints("front", {1}, {0});
  g.ints("fourth", {1}, {-2});
  g.ints("heads", {4}, {5, 2, 3, 4});
  g.node("Reshape", {"x", "unflatten"}, {"packed"}, "unflatten");
  g.node("Unsqueeze", {"packed", "front"}, {"u"}, "unsqueeze");
  M::attr(g.node("Transpose", {"u"}, {"t"}, "transpose"), "perm", std::vector<int64_t>{3, 1, 2, 0, 4});
  g.node("Squeeze", {"t", "fourth"}, {"qkv"}, "squeeze");
  const char* parts[] = {"q", "k", "v"};
  for (int64_t i = 0; i < 3; ++i) {
    const std::string part = parts[i], index = part + "_index";
    g.ints(index, {}, {i - (i == 2 ? 3 : 0)});  // v by a negative index
    g.node("Gather", {"qkv", index}, {part}, part);
    g.node("Reshape", {part, "heads"}, {part + "h"}, part + "_heads");
    g.node("Relu", {part + "h"}, {part + "y"});
    g.output(part + "y");
  }
  OptimizedBuild b = build_both(g.model(), {{5, 2, 36}});
  EXPECT_EQ(b.count("Transpose"), 0u) << b.log;
  EXPECT_EQ(b.count("Squeeze") + b.count("Unsqueeze"), 0u) << b.log;
  EXPECT_EQ(b.count("Gather"), 3u) << b.log;
  EXPECT_EQ(b.count("Reshape"), 1u) << b.log;
  for (const builder::Node& n : b.optimized.model.graphs[0].nodes) {
    if (n.op_type == "Gather") {
      EXPECT_EQ(n.attribute("axis")->i, 2) << n.name;
    }
  }
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

// A Gather through a Transpose that moves the kept axes out of their order stays a Gather of
// the Transpose: the Transpose still has work to do.
TEST(ShuffleElimination, AGatherThroughATransposeThatReordersTheRestStays) {
  GraphMaker g(17);
  g.input("x", {3, 4, 5});
  g.ints("one", {}, {1});
  M::attr(g.node("Transpose", {"x"}, {"t"}), "perm", std::vector<int64_t>{2, 1, 0});
  g.node("Gather", {"t", "one"}, {"y"});
  g.output("y");
  OptimizedBuild b = build_both(g.model(), {{3, 4, 5}});
  EXPECT_EQ(b.ops(), (std::vector<std::string>{"Transpose", "Gather"})) << b.log;
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
}

}  // namespace
}  // namespace edgert::test
