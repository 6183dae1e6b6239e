// The builder and the loader on graphs of tens of thousands of nodes. How fast they are is a
// benchmark's output (tests/bench/graph_scaling), never a test's assertion: these tests check
// what makes the time linear, deterministically.
//   * The passes walk the whole graph a fixed number of times, whatever its length: the builds of
//     a chain and of the same chain ten times longer count the same graph_walks(). A pass that
//     rebuilds its uses per node or per rewrite (the quadratic passes did) counts one walk each.
//   * A node fused from a long chain has a short name, not every member's name.
//   * The 50 000-node builds and loads run under the unit tests' ctest TIMEOUT (30 s): the
//     quadratic builder took minutes on them.
#include <gtest/gtest.h>

#include <string>

#include "board_profile.h"
#include "engine_builder.h"
#include "graph_rewrite.h"
#include "graph_test_support.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {
namespace {

using M = GraphMaker;

// `periods` repetitions of 17 nodes on a [1,16] tensor, food for every pass that rewrites:
// Reshape and Transpose pairs that cancel (shuffle elimination), Identity and x * 1 (identity
// elimination), Softmax -> Log (pattern recognition), a duplicated Tanh (common subexpressions),
// Conv -> Relu (activation fusion, whose rewrites update the uses), Sigmoid -> Tanh (pointwise
// fusion).
onnx::ModelProto rewrite_chain(int periods) {
  M m;
  m.input("x", {1, 16});
  m.ints("s44", {2}, {4, 4});
  m.ints("s116", {2}, {1, 16});
  m.ints("s1611", {4}, {1, 16, 1, 1});
  m.floats("one", {}, {1.0f});
  std::vector<float> identity(16 * 16, 0.0f);
  for (int i = 0; i < 16; ++i) identity[i * 16 + i] = 1.0f;
  m.floats("w", {16, 16, 1, 1}, identity);
  std::string t = "x";
  for (int p = 0; p < periods; ++p) {
    const std::string s = "p" + std::to_string(p) + "_";
    auto step = [&](const std::string& op, std::vector<std::string> extra) -> onnx::NodeProto& {
      std::vector<std::string> inputs = {t};
      inputs.insert(inputs.end(), extra.begin(), extra.end());
      t = s + op + std::to_string(m.model().graph().node_size());
      return m.node(op, inputs, {t});
    };
    step("Relu", {});
    step("Reshape", {"s44"});
    M::attr(step("Transpose", {}), "perm", std::vector<int64_t>{1, 0});
    M::attr(step("Transpose", {}), "perm", std::vector<int64_t>{1, 0});
    step("Reshape", {"s116"});
    step("Identity", {});
    step("Softmax", {});
    step("Log", {});
    step("Mul", {"one"});
    const std::string shared = t;
    m.node("Tanh", {shared}, {s + "tanh_a"});
    m.node("Tanh", {shared}, {s + "tanh_b"});
    m.node("Add", {s + "tanh_a", s + "tanh_b"}, {s + "sum"});
    t = s + "sum";
    step("Reshape", {"s1611"});
    step("Conv", {"w"});
    step("Relu", {});
    step("Reshape", {"s116"});
    step("Sigmoid", {});
  }
  m.node("Tanh", {t}, {"y"});
  m.output("y");
  return m.model();
}

// A chain of `n` Relu nodes named Relu_0 ... Relu_{n-1}.
onnx::ModelProto relu_chain(int n) {
  M m;
  m.input("x", {1, 16});
  std::string t = "x";
  for (int i = 0; i < n; ++i) {
    const std::string y = i + 1 == n ? "y" : "t" + std::to_string(i);
    m.node("Relu", {t}, {y}, "Relu_" + std::to_string(i));
    t = y;
  }
  m.output("y");
  return m.model();
}

struct CountedBuild {
  builder::BuildResult result;
  uint64_t walks = 0;  // graph_walks() during the build
};

CountedBuild build_counting_walks(const onnx::ModelProto& model) {
  TempDir dir;
  save_model(model, dir.file("model.onnx"));
  builder::BuildOptions options;
  options.model_path = dir.file("model.onnx");
  options.board = config::load_board_profile(config::find_board_profile(host_board()));
  const std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  options.tactics = builder::TacticPolicy::kFirst;  // no timing: thousands of Conv nodes
  options.self_test = false;
  CountedBuild out;
  const uint64_t before = builder::graph_walks();
  out.result = builder::build_engine(options);
  out.walks = builder::graph_walks() - before;
  return out;
}

size_t count_ops(const builder::BuildResult& r, const std::string& domain, const std::string& op) {
  size_t c = 0;
  for (const auto& n : r.model.graphs[0].nodes) c += n.domain == domain && n.op_type == op;
  return c;
}

TEST(GraphScaling, PassesWalkTheGraphAFixedNumberOfTimesWhateverItsLength) {
  const CountedBuild small = build_counting_walks(rewrite_chain(300));
  const CountedBuild large = build_counting_walks(rewrite_chain(3000));  // 51 000 nodes
  // Every pass did its rewrites in both: a count that does not grow is not a pass that gave up.
  for (const CountedBuild* b : {&small, &large}) {
    const size_t periods = b == &small ? 300 : 3000;
    EXPECT_EQ(count_ops(b->result, "", "Transpose"), 0u);
    EXPECT_EQ(count_ops(b->result, "", "Identity"), 0u);
    EXPECT_EQ(count_ops(b->result, "", "LogSoftmax"), periods);
    EXPECT_EQ(count_ops(b->result, "edgert", "FusedConv"), periods);
    for (const builder::PassReport& pass : b->result.passes) {
      if (pass.name == "shuffle-elimination" || pass.name == "pattern-recognition" ||
          pass.name == "identity-elimination" || pass.name == "common-subexpression" ||
          pass.name == "activation-fusion") {
        EXPECT_GE(pass.rewrites, static_cast<int>(periods)) << pass.name;
      }
    }
  }
  EXPECT_EQ(large.walks, small.walks) << "a pass walks the graph a number of times that grows with its length";
  EXPECT_LT(small.walks, 100u);
}

TEST(GraphScaling, LongPointwiseChainHasAShortName) {
  const CountedBuild b = build_counting_walks(relu_chain(50000));
  const auto& nodes = b.result.model.graphs[0].nodes;
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].op_type, "PointwiseChain");
  EXPECT_EQ(nodes[0].name, "Relu_0 + ... + Relu_49999 (50000 nodes)");
}

TEST(GraphScaling, FusedNamesListUpToEightPartsThenCount) {
  EXPECT_EQ(builder::fused_name("a", "b"), "a + b");
  EXPECT_EQ(builder::fused_name("a + b + c + d", "e + f + g + h"), "a + b + c + d + e + f + g + h");
  EXPECT_EQ(builder::fused_name("a + b + c + d + e + f + g + h", "i"), "a + ... + i (9 nodes)");
  EXPECT_EQ(builder::fused_name("a + ... + i (9 nodes)", "j + k"), "a + ... + k (11 nodes)");
  EXPECT_EQ(builder::fused_name("x", "a + ... + i (9 nodes)"), "x + ... + i (10 nodes)");
}

// What inspect lists as a layer's parts: every part, or the first and the last of a shortened
// name with the count apart, never "..." or "last (N nodes)" as if they were nodes.
TEST(GraphScaling, FusedNamePartsAreTheNodesNamed) {
  size_t count = 0;
  EXPECT_EQ(builder::fused_name_parts("conv", &count), std::vector<std::string>{"conv"});
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(builder::fused_name_parts("a + b + c", &count), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(builder::fused_name_parts("Relu_0 + ... + Relu_49999 (50000 nodes)", &count),
            (std::vector<std::string>{"Relu_0", "Relu_49999"}));
  EXPECT_EQ(count, 50000u);
  // A node an exporter named like a shortened name, without the count, is listed as it reads.
  EXPECT_EQ(builder::fused_name_parts("x + ... + y", &count), (std::vector<std::string>{"x", "...", "y"}));
}

TEST(GraphScaling, LoadsAFiftyThousandNodeEngine) {
  // Relu and Softmax alternating: nothing fuses, the engine keeps every node and every tensor
  // takes turns with the others at two offsets of the arena (the loader's overlap check).
  M m;
  m.input("x", {1, 16});
  std::string t = "x";
  const int n = 50000;
  for (int i = 0; i < n; ++i) {
    const std::string y = i + 1 == n ? "y" : "t" + std::to_string(i);
    m.node(i % 2 ? "Softmax" : "Relu", {t}, {y});
    t = y;
  }
  m.output("y");
  const CountedBuild b = build_counting_walks(m.model());
  ASSERT_EQ(b.result.model.graphs[0].nodes.size(), static_cast<size_t>(n));
  edgert_load_options options;
  edgert_load_options_init(&options);
  const std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  edgert_error error{};
  auto engine = LoadedEngine::load_memory(b.result.engine.data(), b.result.engine.size(), options, &error);
  ASSERT_NE(engine, nullptr) << error.message;
  EXPECT_EQ(engine->main_graph().nodes.size(), static_cast<size_t>(n));
  ASSERT_NE(engine->arena_plan(), nullptr);  // the plan passed the overlap check
}

}  // namespace
}  // namespace edgert::test
