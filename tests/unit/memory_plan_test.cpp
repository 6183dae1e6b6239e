// The memory planner, the plan's verification at load, and the tools that show it: inspect
// --json (its documented fields) and bench --profile.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <regex>
#include <sstream>

#include "board_profile.h"
#include "engine_writer.h"
#include "graph_test_support.h"
#include "kernel_selection.h"
#include "loaded_engine.h"
#include "plugin_loader.h"
#include "tensor_io.h"
#include "test_support.h"

namespace edgert::test {
namespace {

using M = GraphMaker;

// x -> `layers` 3x3 convs, each followed by Softsign (which no pass fuses) -> y.
onnx::ModelProto conv_chain(int64_t channels, int64_t size, int layers) {
  GraphMaker g;
  g.input("x", {1, channels, size, size});
  std::vector<float> w(static_cast<size_t>(channels * channels * 9));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 11) / 50.0f - 0.1f;
  g.floats("w", {channels, channels, 3, 3}, w);
  std::string prev = "x";
  for (int l = 0; l < layers; ++l) {
    std::string c = "c" + std::to_string(l), t = "t" + std::to_string(l);
    M::attr(g.node("Conv", {prev, "w"}, {c}), "pads", std::vector<int64_t>{1, 1, 1, 1});
    g.node("Softsign", {c}, {t});
    prev = t;
  }
  g.node("Identity", {prev}, {"y"});
  g.output("y");
  return g.model();
}

TEST(MemoryPlanner, TensorsWithDisjointLifetimesShareTheArena) {
  OptimizedBuild b = build_both(conv_chain(4, 8, 6), {{1, 4, 8, 8}});
  const builder::MemoryPlan& plan = b.optimized.memory_plan;
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
  EXPECT_EQ(plan.planned_tensors, 12);
  EXPECT_EQ(plan.activation_bytes, 12u * 4 * 8 * 8 * 4);
  EXPECT_EQ(plan.arena_bytes, 2u * 4 * 8 * 8 * 4);  // Softsign runs in place: two buffers ping-pong
  EXPECT_GT(plan.in_place, 0);
  const builder::Graph& graph = b.optimized.model.graphs[0];
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (plan.offsets[v] < 0) continue;
    EXPECT_EQ(plan.offsets[v] % 64, 0);
    EXPECT_LE(plan.offsets[v] + static_cast<int64_t>(plan.sizes[v]), static_cast<int64_t>(plan.arena_bytes));
  }
  EXPECT_EQ(plan.offsets[graph.inputs[0]], -1);  // the caller's memory
}

// Re-serializes `result` with a doctored plan and returns the load error ("" if it loads).
std::string load_with_plan(builder::BuildResult& result, const builder::MemoryPlan& plan) {
  edgert_error error{};
  std::string dir = cpu_plugin_dir();
  std::vector<const LoadedPlugin*> plugins = load_all_plugins(plugin_search_path(dir.c_str()), &error);
  builder::WriterInputs in;
  in.model = &result.model;
  config::BoardProfile board = config::load_board_profile(config::find_board_profile(host_board()));
  in.board = &board;
  in.plugins = plugins;
  in.memory_plans = {&plan};
  std::vector<uint8_t> bytes = builder::serialize_engine(in);
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = dir.c_str();
  auto engine = LoadedEngine::load_memory(bytes.data(), bytes.size(), options, &error);
  return engine ? "" : error.message;
}

TEST(MemoryPlanner, AHostilePlanIsRefusedAtLoad) {
  OptimizedBuild b = build_both(conv_chain(4, 8, 3), {{1, 4, 8, 8}});
  builder::MemoryPlan good = b.optimized.memory_plan;
  EXPECT_EQ(load_with_plan(b.optimized, good), "");
  const builder::Graph& graph = b.optimized.model.graphs[0];
  int32_t first = graph.nodes[0].outputs[0], second = graph.nodes[2].outputs[0];

  builder::MemoryPlan outside = good;
  outside.offsets[first] = static_cast<int64_t>(good.arena_bytes);  // past the end
  EXPECT_NE(load_with_plan(b.optimized, outside).find("outside the"), std::string::npos);

  builder::MemoryPlan misaligned = good;
  misaligned.offsets[first] = 8;
  EXPECT_NE(load_with_plan(b.optimized, misaligned).find("misaligned"), std::string::npos);

  builder::MemoryPlan huge = good;
  huge.sizes[first] = UINT64_MAX;
  EXPECT_NE(load_with_plan(b.optimized, huge).find("memory plan"), std::string::npos);

  builder::MemoryPlan input = good;
  input.offsets[graph.inputs[0]] = 0;  // engine inputs are the caller's memory
  EXPECT_NE(load_with_plan(b.optimized, input).find("not written by a plugin kernel"), std::string::npos);

  builder::MemoryPlan overlap = good;  // the second conv writes over part of the t0 it reads
  overlap.offsets[first] = 0;
  overlap.offsets[graph.nodes[1].outputs[0]] = 0;
  overlap.offsets[second] = 64;
  EXPECT_NE(load_with_plan(b.optimized, overlap).find("overlaps"), std::string::npos);

  builder::MemoryPlan short_table = good;
  short_table.offsets.pop_back();
  EXPECT_NE(load_with_plan(b.optimized, short_table).find("for each of the"), std::string::npos);
}

// x -> two 3x3 convs -> Concat along channels -> Softsign -> y; `extra` adds a reader of the
// first conv's output: "output" makes it an engine output too, "later" reads it after the
// Concat (a Neg into a second output).
onnx::ModelProto two_convs_concat(int64_t channels, int64_t size, const std::string& extra = "") {
  GraphMaker g;
  g.input("x", {1, channels, size, size});
  std::vector<float> w(static_cast<size_t>(channels * channels * 9));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 29) % 13) / 40.0f - 0.15f;
  g.floats("w", {channels, channels, 3, 3}, w);
  M::attr(g.node("Conv", {"x", "w"}, {"a"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  M::attr(g.node("Conv", {"x", "w"}, {"b0"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  g.node("Softsign", {"b0"}, {"b"});
  M::attr(g.node("Concat", {"a", "b"}, {"c"}), "axis", int64_t{1});
  g.node("Softsign", {"c"}, {"y"});
  g.output("y");
  if (extra == "output") g.output("a");
  if (extra == "later") {
    g.node("Neg", {"a"}, {"z"});
    g.output("z");
  }
  return g.model();
}

int32_t value_named(const builder::Graph& graph, const std::string& name) {
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (graph.values[v].name == name) return static_cast<int32_t>(v);
  ADD_FAILURE() << "no value " << name;
  return 0;
}

TEST(MemoryPlanner, ConcatInputsAreWrittenAtTheirPlaceInItsOutput) {
  OptimizedBuild b = build_both(two_convs_concat(4, 8), {{1, 4, 8, 8}});
  const builder::MemoryPlan& plan = b.optimized.memory_plan;
  const builder::Graph& graph = b.optimized.model.graphs[0];
  ASSERT_EQ(plan.concats_in_place, 1);
  const int64_t c = plan.offsets[value_named(graph, "c")];
  EXPECT_EQ(plan.offsets[value_named(graph, "a")], c);
  EXPECT_EQ(plan.offsets[value_named(graph, "b")], c + 4 * 8 * 8 * 4);
  EXPECT_EQ(b.optimized_outputs, b.reference_outputs);
  EXPECT_EQ(load_with_plan(b.optimized, plan), "");  // the loader's verification accepts it

  // The oracle: the same graph with the first conv's output an engine output as well, which
  // keeps it out of the Concat's bytes (so the Concat copies it).
  OptimizedBuild copied = build_both(two_convs_concat(4, 8, "output"), {{1, 4, 8, 8}});
  EXPECT_EQ(copied.optimized.memory_plan.concats_in_place, 0);
  ASSERT_FALSE(copied.optimized_outputs.empty());
  EXPECT_EQ(b.optimized_outputs[0], copied.optimized_outputs[0]);

  // A member moved off its place overlaps the other member while both are alive.
  builder::MemoryPlan moved = plan;
  moved.offsets[value_named(graph, "b")] = c + 512;
  EXPECT_NE(load_with_plan(b.optimized, moved).find("overlaps"), std::string::npos);
}

TEST(MemoryPlanner, ConcatCopiesInputsThatAreReadLaterOrWouldBeMisaligned) {
  // Read after the Concat: its bytes would be the Concat output's, which a later node may
  // overwrite in place.
  OptimizedBuild later = build_both(two_convs_concat(4, 8, "later"), {{1, 4, 8, 8}});
  EXPECT_EQ(later.optimized.memory_plan.concats_in_place, 0);
  EXPECT_EQ(later.optimized_outputs, later.reference_outputs);
  // 3 x 5 x 5 floats = 300 bytes: the second input's place is not 64-byte aligned.
  OptimizedBuild odd = build_both(two_convs_concat(3, 5), {{1, 3, 5, 5}});
  EXPECT_EQ(odd.optimized.memory_plan.concats_in_place, 0);
  EXPECT_EQ(odd.optimized_outputs, odd.reference_outputs);
}

class ToolsTest : public ::testing::Test {
 protected:
  // What a run's prepared kernels keep, as `edgert run -v` reports it after the first run.
  uint64_t run_kernel_state(const std::string& engine) {
    auto run = run_command(edgert_cli() + " run -v -q --iterations 1 --warmup 0 --shapes x:1x16x48x48 " + engine +
                           " --plugin-path " + cpu_plugin_dir());
    EXPECT_EQ(run.exit_code, 0) << run.output;
    std::smatch m;
    if (!std::regex_search(run.output, m, std::regex(R"(first run in [0-9.]+ ms \(kernels prepared, ([0-9]+) bytes of kernel state\))"))) {
      ADD_FAILURE() << run.output;
      return ~uint64_t{0};
    }
    return std::stoull(m[1]);
  }
  // A float32 [1, 16, 48, 48] input of seeded random values.
  void save_random_input(const std::string& path) {
    cli::HostTensor x;
    x.name = "x";
    x.dtype = EDGERT_DTYPE_FLOAT32;
    x.shape = {1, 16, 48, 48};
    std::vector<float> values(16 * 48 * 48);
    uint32_t state = 12345;
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
    }
    x.data.assign(reinterpret_cast<const uint8_t*>(values.data()),
                  reinterpret_cast<const uint8_t*>(values.data() + values.size()));
    cli::write_tensor_npy(path, x);
  }
  void SetUp() override {
    save_model(conv_chain(16, 48, 4), dir_.file("chain.onnx"));
    auto built = run_command(edgert_cli() + " build " + dir_.file("chain.onnx") + " -o " + dir_.file("chain.engine") +
                             " --plugin-path " + cpu_plugin_dir());
    ASSERT_EQ(built.exit_code, 0) << built.output;
  }
  TempDir dir_;
};

TEST_F(ToolsTest, InspectJsonListsLayersPlacementsAndTotalsStably) {
  auto first = run_command(edgert_cli() + " inspect --json " + dir_.file("chain.engine"));
  auto second = run_command(edgert_cli() + " inspect --json " + dir_.file("chain.engine"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, second.output);
  auto j = nlohmann::json::parse(first.output);
  const auto& nodes = j["graphs"][0]["nodes"];
  ASSERT_EQ(nodes.size(), 8u);  // the Identity is gone
  for (const char* key : {"name", "parts", "op", "plugin", "kernel", "tactic", "precision", "inputs", "outputs"})
    EXPECT_TRUE(nodes[0].contains(key)) << key;
  EXPECT_EQ(nodes[0]["op"], "Conv");
  EXPECT_EQ(nodes[0]["precision"], "float32");
  EXPECT_EQ(nodes[0]["parts"], nlohmann::json::array({nodes[0]["name"]}));
  EXPECT_EQ(nodes[0]["outputs"][0]["bytes"], 16 * 48 * 48 * 4);
  EXPECT_EQ(nodes[0]["outputs"][0]["arena_offset"].get<int64_t>() % 64, 0);
  EXPECT_TRUE(nodes[0]["inputs"][0]["arena_offset"].is_null());  // the engine input
  const auto& totals = j["totals"];
  EXPECT_EQ(totals["arena_bytes"], 2 * 16 * 48 * 48 * 4);
  EXPECT_EQ(totals["footprint_bytes"].get<uint64_t>(),
            j["file_bytes"].get<uint64_t>() - totals["unread_weight_bytes"].get<uint64_t>() +
                totals["kernel_state_bytes"].get<uint64_t>() + totals["arena_bytes"].get<uint64_t>() +
                totals["workspace_bytes"].get<uint64_t>());
  EXPECT_EQ(j["memory_plan"]["planned_tensors"], 8);
  EXPECT_EQ(j["memory_plan"]["largest_tensor_bytes"], 16 * 48 * 48 * 4);
}

// Without prepared weights in the file, the weights the kernels pack at load are memory the
// engine holds beside the mapped file: the header counts them per node and in the footprint
// edgertd admits engines by, and a run's prepared kernels keep exactly what the header says.
TEST_F(ToolsTest, TheFootprintCountsWhatThePreparedKernelsKeep) {
  auto built = run_command(edgert_cli() + " build " + dir_.file("chain.onnx") + " --no-prepared-weights -o " +
                           dir_.file("packed_at_load.engine") + " --plugin-path " + cpu_plugin_dir());
  ASSERT_EQ(built.exit_code, 0) << built.output;
  auto inspected = run_command(edgert_cli() + " inspect --json " + dir_.file("packed_at_load.engine"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  auto j = nlohmann::json::parse(inspected.output);
  uint64_t per_node = 0;
  for (const auto& node : j["graphs"][0]["nodes"]) {
    // Each convolution packs (or Winograd-transforms) its 16 x 16 x 3 x 3 weights at least once.
    if (node["op"] == "Conv") {
      EXPECT_GE(node["kernel_state_bytes"].get<uint64_t>(), 16u * 16 * 9 * 4) << node["name"];
    }
    per_node += node["kernel_state_bytes"].get<uint64_t>();
    EXPECT_EQ(node["prepared_bytes"], 0) << node["name"];
  }
  const auto& totals = j["totals"];
  const uint64_t state = totals["kernel_state_bytes"].get<uint64_t>();
  EXPECT_GE(state, 4u * 16 * 16 * 9 * 4);
  EXPECT_EQ(state, per_node);
  EXPECT_EQ(j["memory_plan"]["kernel_state_bytes"].get<uint64_t>(), state);
  EXPECT_EQ(totals["unread_weight_bytes"], 0);
  EXPECT_EQ(totals["footprint_bytes"].get<uint64_t>(),
            j["file_bytes"].get<uint64_t>() + state + totals["arena_bytes"].get<uint64_t>() +
                totals["workspace_bytes"].get<uint64_t>());

  EXPECT_EQ(run_kernel_state(dir_.file("packed_at_load.engine")), state);
}

// By default the builder stores each convolution's weights in the layout its tactic reads
// (packed GEMM panels, Winograd-transformed filters) and a load borrows them from the mapped
// file: the kernels keep (almost) nothing, the file holds what they kept before, and the
// results are those of kernels that pack at load, bit for bit (the same tactics: untimed).
TEST_F(ToolsTest, PreparedWeightsInTheFileReplaceWhatKernelsPackAtLoad) {
  for (const char* flags : {"", " --no-prepared-weights"}) {
    auto built = run_command(edgert_cli() + " build " + dir_.file("chain.onnx") + " --tactics first" + flags +
                             " -o " + dir_.file(*flags ? "packed.engine" : "prepared.engine") + " --plugin-path " +
                             cpu_plugin_dir());
    ASSERT_EQ(built.exit_code, 0) << built.output;
  }
  auto inspect = [&](const std::string& engine) {
    auto r = run_command(edgert_cli() + " inspect --json " + dir_.file(engine));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  };
  const auto prepared = inspect("prepared.engine"), packed = inspect("packed.engine");
  const auto& nodes = prepared["graphs"][0]["nodes"];
  ASSERT_EQ(nodes.size(), packed["graphs"][0]["nodes"].size());
  uint64_t stored = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& with = nodes[i];
    const auto& without = packed["graphs"][0]["nodes"][i];
    ASSERT_EQ(with["tactic"], without["tactic"]) << with["name"];
    if (with["op"] != "Conv") continue;
    // What the kernel packed at load is now in the file, and the kernel keeps none of it.
    EXPECT_GE(with["prepared_bytes"].get<uint64_t>(), without["kernel_state_bytes"].get<uint64_t>()) << with["name"];
    EXPECT_GE(with["prepared_bytes"].get<uint64_t>(), 16u * 16 * 9 * 4) << with["name"];
    EXPECT_EQ(with["kernel_state_bytes"], 0) << with["name"];
    stored += with["prepared_bytes"].get<uint64_t>();
  }
  EXPECT_EQ(prepared["totals"]["prepared_bytes"].get<uint64_t>(), stored);
  EXPECT_EQ(prepared["totals"]["kernel_state_bytes"], 0);
  EXPECT_GE(prepared["file_bytes"].get<uint64_t>(), packed["file_bytes"].get<uint64_t>() + stored);
  // The four convolutions share one W, which every one of them holds prepared: no kernel reads
  // it, and the footprint leaves it out.
  const uint64_t unread = prepared["totals"]["unread_weight_bytes"].get<uint64_t>();
  EXPECT_EQ(unread, 16u * 16 * 9 * 4);
  EXPECT_EQ(prepared["totals"]["footprint_bytes"].get<uint64_t>(),
            prepared["file_bytes"].get<uint64_t>() - unread + prepared["totals"]["arena_bytes"].get<uint64_t>() +
                prepared["totals"]["workspace_bytes"].get<uint64_t>());
  EXPECT_EQ(run_kernel_state(dir_.file("prepared.engine")), 0u);

  save_random_input(dir_.file("x.npy"));
  std::vector<uint8_t> outputs[2];
  for (int e = 0; e < 2; ++e) {
    const std::string out = dir_.file(e ? "out_packed" : "out_prepared");
    auto run = run_command(edgert_cli() + " run " + dir_.file(e ? "packed.engine" : "prepared.engine") + " -i x=" +
                           dir_.file("x.npy") + " --output-dir " + out + " --plugin-path " + cpu_plugin_dir());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    outputs[e] = read_file(out + "/y.pb");
  }
  EXPECT_FALSE(outputs[0].empty());
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST_F(ToolsTest, BenchProfileLayerTimesAddUpToTheRun) {
  auto bench = run_command(edgert_cli() + " bench " + dir_.file("chain.engine") + " --profile --iterations 21 --plugin-path " +
                           cpu_plugin_dir());
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(bench.output, m, std::regex(R"(layers total: [0-9.]+ ms = ([0-9.]+)% of the median run)")))
      << bench.output;
  double share = std::stod(m[1]);
  EXPECT_GT(share, 90.0) << bench.output;
  EXPECT_LT(share, 110.0) << bench.output;
  // One row per layer, sorted by cost: medians never increase down the table. (Which layer
  // is dearest is the machine's business: on a busy one a preempted Softsign can outlast a
  // small convolution.)
  size_t header = bench.output.find("median ms");
  ASSERT_NE(header, std::string::npos);
  std::istringstream rows(bench.output.substr(bench.output.find('\n', header) + 1));
  std::string row;
  std::vector<double> medians;
  bool conv = false, softsign = false;
  while (std::getline(rows, row) && std::regex_search(row, m, std::regex(R"(^\s*([0-9.]+)\s+[0-9.]+%)"))) {
    medians.push_back(std::stod(m[1]));
    conv = conv || row.find("Conv") != std::string::npos;
    softsign = softsign || row.find("Softsign") != std::string::npos;
  }
  EXPECT_TRUE(conv && softsign) << bench.output;
  EXPECT_TRUE(std::is_sorted(medians.rbegin(), medians.rend())) << bench.output;
}

}  // namespace
}  // namespace edgert::test
