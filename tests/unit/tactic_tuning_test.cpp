// Tactic tuning and the timing cache, end to end through `edgert build` and `edgert inspect`,
// with the tactictest plugin (tests/unit/plugins/tactics_plugin.c): its Relu lists a slow
// tactic first, a fast one second and a slower reference last.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "board.h"
#include "board_profile.h"
#include "engine_builder.h"
#include "edgert/edgert.hpp"
#include "test_support.h"
#include "tactic_tuner.h"
#include "timing_cache.h"

namespace edgert::test {
namespace {

std::string tactics_plugin_dir() { return binary_dir() + "/test_plugins/tactics"; }

// x [1, 256] -> Relu -> y1 and x2 [4, 64] -> Relu -> y2: two nodes of different signatures.
onnx::ModelProto make_two_relu_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("relus");
  const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> io = {
      {"x", "y1", {1, 256}}, {"x2", "y2", {4, 64}}};
  for (const auto& [in, out, dims] : io) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("Relu");
    n->set_name("relu_" + out);
    n->add_input(in);
    n->add_output(out);
    for (auto* list : {g->mutable_input(), g->mutable_output()}) {
      onnx::ValueInfoProto* v = list->Add();
      v->set_name(list == g->mutable_input() ? in : out);
      auto* tensor = v->mutable_type()->mutable_tensor_type();
      tensor->set_elem_type(onnx::TensorProto::FLOAT);
      for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  return model;
}

class TacticTuningTest : public ::testing::Test {
 protected:
  void SetUp() override { save_model(make_two_relu_model(), dir_.file("relus.onnx")); }

  CommandResult build(const std::string& engine, const std::string& extra) {
    return run_command(edgert_cli() + " build " + dir_.file("relus.onnx") + " -o " + dir_.file(engine) +
                       " --plugin-path " + tactics_plugin_dir() + ":" + cpu_plugin_dir() + " " + extra);
  }
  nlohmann::json inspect(const std::string& engine) {
    auto r = run_command(edgert_cli() + " inspect --json " + dir_.file(engine));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  }
  // "timing cache: H hits, M misses" from a -v build log.
  static std::pair<int, int> hits_misses(const std::string& log) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex(R"(timing cache: (\d+) hits, (\d+) misses)"))) return {-1, -1};
    return {std::stoi(m[1]), std::stoi(m[2])};
  }
  TempDir dir_;
};

TEST_F(TacticTuningTest, TunerPicksTheFastestListedTacticAndTheEngineRecordsIdAndName) {
  auto built = build("tuned.engine", "-v");
  ASSERT_EQ(built.exit_code, 0) << built.output;
  EXPECT_NE(built.output.find("f32-relu-slow-test"), std::string::npos) << built.output;
  EXPECT_NE(built.output.find("timed"), std::string::npos) << built.output;
  EXPECT_NE(built.output.find("not for this board: f32-relu-fastest-neon (board lacks neon)"), std::string::npos)
      << built.output;
  EXPECT_EQ(hits_misses(built.output), std::make_pair(0, 2)) << built.output;
  auto j = inspect("tuned.engine");
  const auto& nodes = j["graphs"][0]["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  for (const auto& n : nodes) {
    EXPECT_EQ(n["kernel"], "tactictest-relu");
    EXPECT_EQ(n["tactic"], 3) << n.dump();
    EXPECT_EQ(n["tactic_name"], "f32-relu-fast-test") << n.dump();
  }
  auto text = run_command(edgert_cli() + " inspect " + dir_.file("tuned.engine"));
  EXPECT_NE(text.output.find("tactic 3 (f32-relu-fast-test)"), std::string::npos) << text.output;
}

// Nodes whose weights are too large to hold every candidate prepared at once are timed one
// candidate after the other; the choice must be the same. (together_bytes 0 forces that mode.)
TEST_F(TacticTuningTest, TimingOneCandidateAtATimePicksTheSameTactic) {
  for (const size_t together : {size_t{0}, size_t{512} << 20}) {
    builder::BuildOptions options;
    options.model_path = dir_.file("relus.onnx");
    options.board = config::load_board_profile(source_dir() + "/board_profiles/" + host_board() + ".yaml");
    const std::string plugins = tactics_plugin_dir() + ":" + cpu_plugin_dir();
    options.plugin_path = plugins.c_str();
    options.tuning_together_bytes = together;
    std::string log;
    options.log = [&](const std::string& line) { log += line + "\n"; };
    const builder::BuildResult built = builder::build_engine(options);
    EXPECT_EQ(built.tuning.timed, 2) << log;
    int chosen = 0;
    for (const builder::Node& node : built.model.graphs[0].nodes) {
      EXPECT_EQ(node.tactic, 3) << "together_bytes " << together << "\n" << log;
      ++chosen;
    }
    EXPECT_EQ(chosen, 2);
    // Every listed tactic the board runs was timed, the slow ones cut short or measured.
    EXPECT_NE(log.find("f32-relu-slow-test (7)"), std::string::npos) << log;
    EXPECT_NE(log.find("reference (0)"), std::string::npos) << log;
  }
}

TEST_F(TacticTuningTest, TacticsFirstTakesTheFirstListedWithoutTiming) {
  auto built = build("first.engine", "-v --tactics first");
  ASSERT_EQ(built.exit_code, 0) << built.output;
  EXPECT_EQ(built.output.find("timing cache:"), std::string::npos) << built.output;
  // Held here: a range-for over a member of inspect()'s temporary would read freed memory.
  const nlohmann::json first = inspect("first.engine");
  for (const auto& n : first["graphs"][0]["nodes"]) {
    EXPECT_EQ(n["tactic"], 7);
    EXPECT_EQ(n["tactic_name"], "f32-relu-slow-test");
  }
  ASSERT_EQ(build("no_tune.engine", "--no-tune").exit_code, 0);
  EXPECT_EQ(inspect("no_tune.engine")["graphs"], inspect("first.engine")["graphs"]);
}

TEST_F(TacticTuningTest, ASecondBuildWithTheSameCacheHitsEveryNodeAndChoosesTheSame) {
  const std::string cache = dir_.file("timing.cache");
  auto cold = build("cold.engine", "-v --timing-cache " + cache);
  ASSERT_EQ(cold.exit_code, 0) << cold.output;
  EXPECT_EQ(hits_misses(cold.output), std::make_pair(0, 2)) << cold.output;
  auto warm = build("warm.engine", "-v --timingCacheFile=" + cache);
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  EXPECT_EQ(hits_misses(warm.output), std::make_pair(2, 0)) << warm.output;
  EXPECT_NE(warm.output.find("cache hit"), std::string::npos) << warm.output;
  EXPECT_EQ(inspect("cold.engine")["graphs"], inspect("warm.engine")["graphs"]);

  builder::TimingCache file = builder::TimingCache::open(cache);
  auto entries = file.entries();
  ASSERT_EQ(entries.size(), 2u);
  for (const auto& [key, record] : entries) {
    EXPECT_EQ(key.plugin, "tactictest");
    EXPECT_EQ(key.plugin_version, "1.0.0");
    EXPECT_EQ(key.kernel, "tactictest-relu");
    EXPECT_NE(key.signature.find("op=Relu"), std::string::npos) << key.signature;
    EXPECT_EQ(record.chosen, 3);
    ASSERT_EQ(record.timings.size(), 3u);
    EXPECT_EQ(record.timings[0].name, "f32-relu-slow-test");
    EXPECT_LT(record.timings[1].median_ms, record.timings[0].median_ms);
  }
}

TEST_F(TacticTuningTest, ACorruptOrForeignCacheFileIsAClearErrorUnlessIgnored) {
  const std::string junk = dir_.file("junk.cache");
  std::string text(4096, 'x');
  write_file(junk, std::vector<uint8_t>(text.begin(), text.end()));
  auto corrupt = build("a.engine", "--timing-cache " + junk);
  EXPECT_EQ(corrupt.exit_code, 1) << corrupt.output;
  EXPECT_NE(corrupt.output.find("timing cache '" + junk + "' is not a usable SQLite database"), std::string::npos)
      << corrupt.output;
  EXPECT_NE(corrupt.output.find("--ignore-timing-cache-errors"), std::string::npos) << corrupt.output;

  const std::string other = dir_.file("other.db");
  auto made = run_command("/usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('" + other +
                          "'); c.execute('CREATE TABLE photos(id INTEGER)'); c.commit()\"");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto foreign = build("b.engine", "--timing-cache " + other);
  EXPECT_EQ(foreign.exit_code, 1) << foreign.output;
  EXPECT_NE(foreign.output.find("'" + other + "' is an SQLite database but not an edgert timing cache (tables: photos)"),
            std::string::npos)
      << foreign.output;

  auto ignored = build("c.engine", "--timing-cache " + junk + " --ignore-timing-cache-errors");
  EXPECT_EQ(ignored.exit_code, 0) << ignored.output;
  EXPECT_NE(ignored.output.find("warning: timing cache '" + junk + "'"), std::string::npos) << ignored.output;
  EXPECT_EQ(inspect("c.engine")["graphs"][0]["nodes"][0]["tactic"], 3);  // still tuned
}

TEST_F(TacticTuningTest, ForAnotherBoardNothingIsTimedAndThatBoardsRecordsDecide) {
  const std::string board = "jetson-orin-nano-8gb";
  const config::BoardProfile profile = config::load_board_profile(config::find_board_profile(board));
  const std::string fingerprint = profile.fingerprint();
  const std::string cache = dir_.file("timing.cache");

  auto no_record = build("miss.engine", "-v --board " + board + " --timing-cache " + cache);
  ASSERT_EQ(no_record.exit_code, 0) << no_record.output;
  EXPECT_NE(no_record.output.find("not timing, board " + board + " is not this machine"), std::string::npos)
      << no_record.output;
  EXPECT_EQ(hits_misses(no_record.output), std::make_pair(0, 2)) << no_record.output;
  const nlohmann::json miss = inspect("miss.engine");
  for (const auto& n : miss["graphs"][0]["nodes"]) EXPECT_EQ(n["tactic"], 7);  // first-listed

  // Records as a build on the board would have left them (here: the reference tactic wins).
  ASSERT_EQ(build("here.engine", "--timing-cache " + cache).exit_code, 0);
  {
    builder::TimingCache file = builder::TimingCache::open(cache);
    for (auto [key, record] : file.entries()) {
      key.board = fingerprint;
      key.threads = profile.cpu_cores;  // a build on the board times at its cores (board_tuning.h)
      record.chosen = 0;
      record.chosen_name = "reference";
      file.put(key, record);
    }
    file.save();
  }
  auto from_cache = build("board.engine", "-v --board " + board + " --timing-cache " + cache);
  ASSERT_EQ(from_cache.exit_code, 0) << from_cache.output;
  EXPECT_EQ(hits_misses(from_cache.output), std::make_pair(2, 0)) << from_cache.output;
  EXPECT_EQ(from_cache.output.find("cache miss"), std::string::npos) << from_cache.output;
  auto j = inspect("board.engine");
  EXPECT_EQ(j["board"]["fingerprint"], fingerprint);
  for (const auto& n : j["graphs"][0]["nodes"]) {
    EXPECT_EQ(n["tactic"], 0);
    EXPECT_EQ(n["tactic_name"], "reference");
  }
}

// `edgert tune` against a stand-in board: `ssh` and `scp` first on PATH run the command (copy
// the file) on this machine, so the board's edgert is whichever `edgert` comes next on PATH.
class BoardTuningTest : public TacticTuningTest {
 protected:
  void SetUp() override {
    TacticTuningTest::SetUp();
    fake_ = dir_.file("stand-in");
    mkdir(fake_.c_str(), 0755);
    const std::string skip_options =
        "while [ $# -gt 0 ]; do case \"$1\" in -o|-p|-i|-P) shift 2 ;; -q) shift ;; *) break ;; esac; done\n";
    script(fake_ + "/ssh", "#!/bin/sh\n" + skip_options + "shift\nexec sh -c \"$*\"\n");
    script(fake_ + "/scp", "#!/bin/sh\n" + skip_options + "exec cp \"${1#*:}\" \"${2#*:}\"\n");
  }
  static void script(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    chmod(path.c_str(), 0755);
  }
  // `edgert ARGS` with PATH = the stand-ins, `board_bin` (where the board's edgert is), the system.
  CommandResult edgert_on_path(const std::string& board_bin, const std::string& args) {
    return run_command("PATH=" + fake_ + ":" + board_bin + ":/usr/bin:/bin EDGERT_PLUGIN_PATH=" + tactics_plugin_dir() +
                       ":" + cpu_plugin_dir() + " " + edgert_cli() + " " + args);
  }
  std::string tune(const std::string& board_bin, const std::string& extra, int* exit_code = nullptr) {
    auto r = edgert_on_path(board_bin, "tune " + dir_.file("relus.onnx") + " --host tester@board -p 2222 " + extra);
    if (exit_code) *exit_code = r.exit_code;
    return r.output;
  }
  std::string board_bin() const { return binary_dir() + "/bin"; }
  std::string fake_;
};

TEST_F(BoardTuningTest, TheBoardTimesAndABuildHereFindsItsRecordsTimingNothing) {
  const std::string cache = dir_.file("tuned.cache");
  int status = -1;
  std::string out = tune(board_bin(), "--board x86_64-generic --timing-cache " + cache + " --board-engine " +
                                          dir_.file("board.engine"), &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("[1/4] tester@board: edgert " EDGERT_VERSION), std::string::npos) << out;
  EXPECT_NE(out.find("[4/4] merged 2 record(s) from tester@board (2 new) for board x86_64-generic"), std::string::npos)
      << out;
  // Keyed by the board's profile and cores (x86_64-generic: 2), whatever this machine has.
  const config::BoardProfile generic = config::load_board_profile(config::find_board_profile("x86_64-generic"));
  {
    auto entries = builder::TimingCache::open(cache).entries();
    ASSERT_EQ(entries.size(), 2u);
    for (const auto& [key, record] : entries) {
      EXPECT_EQ(key.board, generic.fingerprint());
      EXPECT_EQ(key.threads, generic.cpu_cores);
    }
  }
  auto here = build("here.engine", "-v --board x86_64-generic --timing-cache " + cache);
  ASSERT_EQ(here.exit_code, 0) << here.output;
  EXPECT_EQ(hits_misses(here.output), std::make_pair(2, 0)) << here.output;
  EXPECT_NE(here.output.find("timing cache: 2 hits, 0 misses; 0 timed"), std::string::npos) << here.output;
  auto board_nodes = inspect("board.engine")["graphs"][0]["nodes"];
  auto here_nodes = inspect("here.engine")["graphs"][0]["nodes"];
  ASSERT_EQ(board_nodes.size(), here_nodes.size());
  for (size_t i = 0; i < here_nodes.size(); ++i) {
    EXPECT_EQ(here_nodes[i]["name"], board_nodes[i]["name"]);
    EXPECT_EQ(here_nodes[i]["tactic"], board_nodes[i]["tactic"]) << here_nodes[i]["name"];
    EXPECT_EQ(here_nodes[i]["tactic_name"], board_nodes[i]["tactic_name"]) << here_nodes[i]["name"];
  }

  // --threads on both sides: another key, found again.
  out = tune(board_bin(), "--board x86_64-generic --threads 1 --timing-cache " + cache, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("(2 new) for board x86_64-generic (fingerprint " + generic.fingerprint() + ", 1 thread(s))"),
            std::string::npos)
      << out;
  auto one = build("one.engine", "--board x86_64-generic --threads 1 --timing-cache " + cache);
  EXPECT_NE(one.output.find("2 hits, 0 misses; 0 timed"), std::string::npos) << one.output;
}

TEST_F(BoardTuningTest, BuildTuneOnTimesOnTheBoardThenBuilds) {
  auto r = edgert_on_path(board_bin(), "build " + dir_.file("relus.onnx") + " --board x86_64-generic --tune-on "
                                       "tester@board --tune-port 2222 -o " + dir_.file("tuned.engine"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[4/4] merged 2 record(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timing cache: 2 hits, 0 misses; 0 timed"), std::string::npos) << r.output;
  auto native = edgert_on_path(board_bin(), "build " + dir_.file("relus.onnx") + " --tune-on tester@board -o " +
                                            dir_.file("x.engine"));
  EXPECT_EQ(native.exit_code, 1) << native.output;
  EXPECT_NE(native.output.find("--tune-on tester@board needs --board naming the board's profile"), std::string::npos)
      << native.output;
}

TEST_F(BoardTuningTest, WhatStopsItIsSaidPlainly) {
  const std::string cache = " --timing-cache " + dir_.file("errors.cache");
  int status = -1;
  std::string out = tune(dir_.file("empty-bin"), "--board x86_64-generic" + cache, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("tester@board has no 'edgert' on the PATH of an ssh command"), std::string::npos) << out;

  const std::string old_bin = dir_.file("old-bin");
  mkdir(old_bin.c_str(), 0755);
  script(old_bin + "/edgert", "#!/bin/sh\necho edgert 0.0.9\n");
  out = tune(old_bin, "--board x86_64-generic" + cache, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("tester@board runs edgert 0.0.9, this is edgert " EDGERT_VERSION), std::string::npos) << out;

  const std::string other_arch = host_architecture() == "x86_64" ? "qemu-virt-aarch64" : "qemu-virt-x86_64";
  out = tune(board_bin(), "--board " + other_arch + cache, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("tester@board is " + host_architecture() + ", but board profile '" + other_arch + "'"),
            std::string::npos)
      << out;

  out = tune(board_bin(), "--board native" + cache, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("--board native means this machine"), std::string::npos) << out;

  // A real ssh to a port nobody listens on.
  if (run_command("command -v ssh").exit_code == 0) {
    // -o takes one value: the model after it is still the model.
    auto r = run_command(edgert_cli() + " tune --host nobody@127.0.0.1 -p 1 -o ConnectTimeout=5 " +
                         dir_.file("relus.onnx") + " --board x86_64-generic" + cache);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("cannot reach nobody@127.0.0.1 over ssh"), std::string::npos) << r.output;
  }
}

TEST_F(TacticTuningTest, LoadOptionsThreadsReachThePluginsConfigure) {
  ASSERT_EQ(build("threads.engine", "--tactics first").exit_code, 0);
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = tactics_plugin_dir() + ":" + cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  options.num_threads = 3;
  options.pin_threads = 1;
  Engine engine(dir_.file("threads.engine"), &options);
  void* handle = dlopen((tactics_plugin_dir() + "/libedgert_plugin_tactictest.so").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto threads = reinterpret_cast<int32_t (*)()>(dlsym(handle, "tactictest_configured_threads"));
  auto pin = reinterpret_cast<int32_t (*)()>(dlsym(handle, "tactictest_configured_pin"));
  ASSERT_TRUE(threads && pin);
  EXPECT_EQ(threads(), 3);
  EXPECT_EQ(pin(), 1);
  // Settings apply to plugins loaded before too; 0 and 0 leave them alone.
  options.num_threads = 1;
  options.pin_threads = 0;
  Engine again(dir_.file("threads.engine"), &options);
  EXPECT_EQ(threads(), 1);
  EXPECT_EQ(pin(), 0);
  options.num_threads = 0;
  Engine unchanged(dir_.file("threads.engine"), &options);
  EXPECT_EQ(threads(), 1);
  dlclose(handle);  // drops only the reference RTLD_NOLOAD took; the loader's stays
}

TEST_F(TacticTuningTest, LoadOptionsFromAnOlderHeaderLeaveTheThreadSettingsAlone) {
  ASSERT_EQ(build("old.engine", "--tactics first").exit_code, 0);
  // A caller built before num_threads existed: its struct ends at allow_board_mismatch, and
  // whatever lies after it in memory must not be read as thread settings.
  const std::string library = tactics_plugin_dir() + "/libedgert_plugin_tactictest.so";
  auto configured_threads = [&]() -> int32_t {  // -1: configure never called (or not loaded yet)
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!handle) return -1;
    auto fn = reinterpret_cast<int32_t (*)()>(dlsym(handle, "tactictest_configured_threads"));
    int32_t value = fn ? fn() : -2;
    dlclose(handle);  // drops only this reference; the loader's stays
    return value;
  };
  // Other tests of this process may have loaded and configured the plugin already.
  const int32_t before = configured_threads();
  edgert_load_options options;
  std::memset(&options, 0x7f, sizeof options);
  std::string plugins = tactics_plugin_dir() + ":" + cpu_plugin_dir();
  options.struct_size = offsetof(edgert_load_options, num_threads);
  options.plugin_path = plugins.c_str();
  options.expected_board = nullptr;
  options.allow_board_mismatch = 0;
  Engine engine(dir_.file("old.engine"), &options);
  EXPECT_EQ(configured_threads(), before);
}

TEST_F(TacticTuningTest, BenchJsonHasTheDocumentedFields) {
  ASSERT_EQ(build("bench.engine", "").exit_code, 0);
  auto bench = run_command(edgert_cli() + " bench " + dir_.file("bench.engine") + " --iterations 7 --warmup 1 --threads 1 "
                           "--profile --json " + dir_.file("bench.json") + " --plugin-path " + tactics_plugin_dir() +
                           ":" + cpu_plugin_dir());
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("p99"), std::string::npos) << bench.output;
  EXPECT_NE(bench.output.find("inferences/s"), std::string::npos) << bench.output;
  std::vector<uint8_t> bytes = read_file(dir_.file("bench.json"));
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
  for (const char* key : {"engine", "threads", "pin_threads", "warmup_runs", "iterations", "duration_s", "latency_ms",
                          "throughput_ips", "layers", "layers_total_ms"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["iterations"], 7);
  EXPECT_EQ(j["threads"], 1);
  for (const char* key : {"min", "median", "mean", "p90", "p99", "max"}) EXPECT_TRUE(j["latency_ms"].contains(key)) << key;
  EXPECT_LE(j["latency_ms"]["min"].get<double>(), j["latency_ms"]["median"].get<double>());
  EXPECT_LE(j["latency_ms"]["median"].get<double>(), j["latency_ms"]["p99"].get<double>());
  EXPECT_GT(j["throughput_ips"].get<double>(), 0);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0]["kernel"], "tactictest/tactictest-relu");
  EXPECT_EQ(j["layers"][0]["tactic"], 3);
  EXPECT_EQ(j["layers"][0]["tactic_name"], "f32-relu-fast-test");

  auto to_stdout = run_command(edgert_cli() + " bench " + dir_.file("bench.engine") + " --iterations 3 --json - --plugin-path " +
                               tactics_plugin_dir() + ":" + cpu_plugin_dir());
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.output;
  // The text report goes to stderr, written before the JSON (run_command merges both).
  size_t brace = to_stdout.output.find('{');
  ASSERT_NE(brace, std::string::npos) << to_stdout.output;
  auto streamed = nlohmann::json::parse(to_stdout.output.substr(brace));
  EXPECT_EQ(streamed["iterations"], 3);
}

// --versus: the slow tactic spins 2 ms a run, the fast one takes microseconds, so the pairs
// come out the same way and the ratio far from 1 (in both directions). One pair may go the other
// way: a fast run preempted for more than 2 ms on a busy machine.
TEST_F(TacticTuningTest, BenchVersusTimesTwoEnginesInTurnsAndGivesThePairedRatio) {
  ASSERT_EQ(build("fast.engine", "").exit_code, 0);
  ASSERT_EQ(build("slow.engine", "--tactics first").exit_code, 0);
  const std::string plugins = " --plugin-path " + tactics_plugin_dir() + ":" + cpu_plugin_dir();
  auto versus = [&](const std::string& a, const std::string& b, const std::string& extra) {
    return run_command(edgert_cli() + " bench " + dir_.file(a) + " --versus " + dir_.file(b) + " --threads 1" +
                       plugins + " " + extra);
  };
  auto slower = versus("fast.engine", "slow.engine", "--iterations 6 --warmup 1 --json " + dir_.file("v.json"));
  ASSERT_EQ(slower.exit_code, 0) << slower.output;
  EXPECT_NE(slower.output.find(" of 6 pairs"), std::string::npos) << slower.output;
  std::vector<uint8_t> bytes = read_file(dir_.file("v.json"));
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end());
  for (const char* key : {"engine", "versus", "warmup_runs", "pairs", "duration_s", "latency_ms", "versus_latency_ms",
                          "ratio", "versus_faster_pairs", "threads", "pin_threads"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["pairs"], 6);
  EXPECT_LE(j["versus_faster_pairs"].get<int>(), 1);
  EXPECT_GT(j["ratio"].get<double>(), 2.0);
  EXPECT_GT(j["versus_latency_ms"]["min"].get<double>(), 1.5);  // the 2 ms spin
  EXPECT_LT(j["latency_ms"]["median"].get<double>(), j["versus_latency_ms"]["median"].get<double>());

  auto faster = versus("slow.engine", "fast.engine", "--iterations 4 --json -");
  ASSERT_EQ(faster.exit_code, 0) << faster.output;
  auto streamed = nlohmann::json::parse(faster.output.substr(faster.output.find('{')));
  EXPECT_EQ(streamed["pairs"], 4);
  EXPECT_GE(streamed["versus_faster_pairs"].get<int>(), 3);
  EXPECT_LT(streamed["ratio"].get<double>(), 0.5);

  auto with_profile = versus("fast.engine", "slow.engine", "--profile");
  EXPECT_NE(with_profile.exit_code, 0);
  EXPECT_NE(with_profile.output.find("--profile and --versus"), std::string::npos) << with_profile.output;

  // An engine whose inputs have other names would be fed the wrong tensors: refused, naming both.
  onnx::ModelProto renamed = make_two_relu_model();
  renamed.mutable_graph()->mutable_input(0)->set_name("pixels");
  renamed.mutable_graph()->mutable_node(0)->set_input(0, "pixels");
  save_model(renamed, dir_.file("renamed.onnx"));
  auto built = run_command(edgert_cli() + " build " + dir_.file("renamed.onnx") + " -o " + dir_.file("renamed.engine") +
                           plugins);
  ASSERT_EQ(built.exit_code, 0) << built.output;
  auto mismatch = versus("fast.engine", "renamed.engine", "");
  EXPECT_NE(mismatch.exit_code, 0);
  EXPECT_NE(mismatch.output.find("has inputs (pixels, x2) but"), std::string::npos) << mismatch.output;
}

TEST(TacticIsa, NamesEndingInAnIsaNeedItsFeatures) {
  using builder::tactic_isa_requirements;
  EXPECT_EQ(tactic_isa_requirements("f32-conv-im2col-gemm-8x32-avx512"), std::vector<std::string>{"avx512f"});
  EXPECT_EQ(tactic_isa_requirements("f32-gemm-6x16-avx2"), (std::vector<std::string>{"avx2", "fma"}));
  EXPECT_EQ(tactic_isa_requirements("s8-gemm-4x16-avx512vnni"), (std::vector<std::string>{"avx512f", "avx512vnni"}));
  EXPECT_EQ(tactic_isa_requirements("f32-conv-1x1-gemm-6x16-neon"), std::vector<std::string>{"neon"});
  EXPECT_TRUE(tactic_isa_requirements("f32-pool-2d-rows-portable").empty());
  EXPECT_TRUE(tactic_isa_requirements("reference").empty());
}

}  // namespace
}  // namespace edgert::test
