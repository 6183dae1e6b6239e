// The `edgert` binary end to end: build -> inspect -> run, and the errors users meet.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "tensor_io.h"
#include "test_support.h"

namespace edgert::test {
namespace {

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    save_model(make_small_model(), dir_.file("small.onnx"));
    cli::HostTensor x;
    x.name = "x";
    x.dtype = EDGERT_DTYPE_FLOAT32;
    x.shape = {1, 4};
    float values[4] = {1.0f, 1.0f, 4.0f, -1.0f};
    x.data.assign(reinterpret_cast<uint8_t*>(values), reinterpret_cast<uint8_t*>(values) + sizeof values);
    cli::write_tensor_npy(dir_.file("x.npy"), x);
  }
  CommandResult edgert(const std::string& args) { return run_command(edgert_cli() + " " + args); }
  CommandResult build_small() {
    return edgert("build " + dir_.file("small.onnx") + " --board x86_64-generic -o " + dir_.file("small.engine"));
  }
  TempDir dir_;
};

TEST_F(CliTest, BuildInspectRunRoundTrip) {
  auto built = build_small();
  ASSERT_EQ(built.exit_code, 0) << built.output;

  auto inspected = edgert("inspect --json " + dir_.file("small.engine"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  auto j = nlohmann::json::parse(inspected.output);
  EXPECT_EQ(j["board"]["name"], "x86_64-generic");
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::array({1, 4}));
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  ASSERT_EQ(j["graphs"][0]["nodes"].size(), 3u);
  EXPECT_EQ(j["graphs"][0]["nodes"][2]["op"], "Relu");
  EXPECT_EQ(j["graphs"][0]["nodes"][2]["plugin"], "cpu");
  EXPECT_EQ(j["plugins"][0]["name"], "cpu");
  EXPECT_EQ(j["totals"]["weight_bytes"], 32);

  auto ran = edgert("run " + dir_.file("small.engine") + " --input x=" + dir_.file("x.npy") + " --output-dir " +
                    dir_.file("out"));
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("latency:"), std::string::npos) << ran.output;
  cli::HostTensor y = cli::read_tensor_pb(dir_.file("out/y.pb"));
  ASSERT_EQ(y.shape, (std::vector<int64_t>{1, 4}));
  const float* v = reinterpret_cast<const float*>(y.data.data());
  EXPECT_FLOAT_EQ(v[0], 1.25f);
  EXPECT_FLOAT_EQ(v[1], 0.0f);
  EXPECT_FLOAT_EQ(v[2], 1.0f);
  EXPECT_FLOAT_EQ(v[3], 0.0f);

  auto npy = edgert("run " + dir_.file("small.engine") + " --input x=" + dir_.file("x.npy") + " --npy --output-dir " +
                    dir_.file("out_npy"));
  ASSERT_EQ(npy.exit_code, 0) << npy.output;
  EXPECT_EQ(cli::read_tensor_npy(dir_.file("out_npy/y.npy")).data, y.data);
}

TEST_F(CliTest, AcceptsTrtexecSpellings) {
  auto built = edgert("build --onnx=" + dir_.file("small.onnx") + " --saveEngine=" + dir_.file("trt.engine"));
  ASSERT_EQ(built.exit_code, 0) << built.output;
  EXPECT_FALSE(read_file(dir_.file("trt.engine")).empty());
}

TEST_F(CliTest, RunAndBenchAcceptTrtexecSpellings) {
  ASSERT_EQ(build_small().exit_code, 0);
  const std::string engine = dir_.file("small.engine");
  // --loadEngine for the positional, --shapes for an input not given (synthesised), repeated
  // flags (the last --iterations wins; --shapes add up), --warmUp in milliseconds.
  auto ran = edgert("run --loadEngine=" + engine + " --shapes=x:1x4 --shapes x:1x4 --iterations=2 --iterations=3 "
                    "--warmUp=5 --exportTimes=" + dir_.file("run_times.json"));
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("over 3 run(s)"), std::string::npos) << ran.output;
  auto times = nlohmann::json::parse(read_file(dir_.file("run_times.json")));
  ASSERT_EQ(times.size(), 3u) << times.dump();
  for (const auto& t : times) {
    for (const char* key : {"startComputeMs", "endComputeMs", "computeMs", "latencyMs"})
      EXPECT_TRUE(t.contains(key)) << key << " missing in " << t.dump();
    EXPECT_GE(t["latencyMs"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(t["latencyMs"].get<double>(), t["endComputeMs"].get<double>() - t["startComputeMs"].get<double>());
  }
  EXPECT_LE(times[0]["endComputeMs"].get<double>(), times[1]["startComputeMs"].get<double>());

  auto bench = edgert("bench --loadEngine=" + engine + " --shapes=x:1x4 --warmUp=20 --warmup 1 --iterations=4 "
                      "--duration=0.05 --exportTimes=" + dir_.file("bench_times.json") + " --json " +
                      dir_.file("bench.json"));
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  auto bench_json = nlohmann::json::parse(read_file(dir_.file("bench.json")));
  times = nlohmann::json::parse(read_file(dir_.file("bench_times.json")));
  EXPECT_GE(times.size(), 4u);
  EXPECT_EQ(bench_json["iterations"].get<size_t>(), times.size());
  EXPECT_GE(bench_json["duration_s"].get<double>(), 0.05);
  EXPECT_GE(bench_json["warmup_runs"].get<int>(), 1);

  // --shapes checks a given input, and must name an engine input.
  auto mismatch = edgert("run " + engine + " --input x=" + dir_.file("x.npy") + " --shapes x:1x5");
  EXPECT_EQ(mismatch.exit_code, 1) << mismatch.output;
  EXPECT_NE(mismatch.output.find("input 'x': the --input file has shape [1x4], --shapes says [1x5]"), std::string::npos)
      << mismatch.output;
  auto unknown = edgert("bench " + engine + " --shapes=y:1x4");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_NE(unknown.output.find("--shapes names 'y', which is not an engine input (inputs: x)"), std::string::npos)
      << unknown.output;
  auto wrong = edgert("run " + engine + " --shapes=x:1x5");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("expected shape [1x4], got [1x5]"), std::string::npos) << wrong.output;
  auto bad = edgert("run " + engine + " --shapes=x:1by4");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--shapes: '1by4' is not a dimension in 'x:1by4'"), std::string::npos) << bad.output;
  // run without data for an input names both ways to give it.
  auto none = edgert("run " + engine);
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("give --input x=FILE, or --shapes x:DxD..."), std::string::npos) << none.output;
  auto two = edgert("run " + engine + " --loadEngine " + dir_.file("other.engine") + " --shapes x:1x4");
  EXPECT_EQ(two.exit_code, 1) << two.output;
  EXPECT_NE(two.output.find("two engines given"), std::string::npos) << two.output;
}

TEST_F(CliTest, VerboseIsAcceptedByEveryCommand) {
  ASSERT_EQ(build_small().exit_code, 0);
  const std::string engine = dir_.file("small.engine");
  // build keeps its own -v: it logs every step.
  auto built = edgert("build " + dir_.file("small.onnx") + " -o " + dir_.file("v.engine") + " -v");
  ASSERT_EQ(built.exit_code, 0) << built.output;
  EXPECT_NE(built.output.find("[build"), std::string::npos) << built.output;
  built = edgert("-v build " + dir_.file("small.onnx") + " -o " + dir_.file("v.engine"));
  ASSERT_EQ(built.exit_code, 0) << built.output;
  EXPECT_NE(built.output.find("[build"), std::string::npos) << built.output;
  auto ran = edgert("run " + engine + " -v --input x=" + dir_.file("x.npy"));
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("[run] input x: float32 [1x4]"), std::string::npos) << ran.output;
  for (const std::string& args : {"-v inspect " + engine, "inspect --verbose " + engine, "bench -v " + engine,
                                  "--verbose bench --iterations 1 " + engine, "keygen -v k --dir " + dir_.path()}) {
    auto r = edgert(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  }
  // Commands that fail here for other reasons must not fail on -v.
  for (const std::string& args : {"compare -v " + dir_.file("small.onnx"), "deploy -v " + engine,
                                  "conformance -v " + dir_.file("no-such-folder")}) {
    auto r = edgert(args);
    EXPECT_EQ(r.output.find("not expected"), std::string::npos) << args << "\n" << r.output;
  }
}

TEST_F(CliTest, InspectReadsAnOnnxModelAndSaysWhichKernelTakesEachNode) {
  auto inspected = edgert("inspect --json " + dir_.file("small.onnx"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  auto j = nlohmann::json::parse(inspected.output);
  EXPECT_EQ(j["format"], "onnx");
  EXPECT_EQ(j["opsets"]["ai.onnx"], 17);
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["name"], "x");
  EXPECT_EQ(j["inputs"][0]["dtype"], "float32");
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::array({1, 4}));
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  EXPECT_EQ(j["totals"]["nodes"], 3);
  EXPECT_EQ(j["totals"]["supported"], 3);
  EXPECT_EQ(j["totals"]["weight_bytes"], 32);
  EXPECT_TRUE(j["buildable"].get<bool>());
  EXPECT_EQ(j["plugins"][0]["name"], "cpu");
  ASSERT_EQ(j["nodes"].size(), 3u);
  EXPECT_EQ(j["nodes"][2]["name"], "relu");
  EXPECT_EQ(j["nodes"][2]["op"], "Relu");
  EXPECT_EQ(j["nodes"][2]["status"], "supported");
  EXPECT_EQ(j["nodes"][2]["plugin"], "cpu");
  EXPECT_FALSE(j["nodes"][2]["kernel"].get<std::string>().empty());
  // The kernel inspect names is the one the build selects.
  ASSERT_EQ(build_small().exit_code, 0);
  auto engine = nlohmann::json::parse(edgert("inspect --json " + dir_.file("small.engine")).output);
  EXPECT_EQ(j["nodes"][2]["kernel"], engine["graphs"][0]["nodes"][2]["kernel"]);
  bool relu_counted = false;
  for (const auto& op : j["ops"])
    if (op["op"] == "Relu") {
      relu_counted = true;
      EXPECT_EQ(op["count"], 1);
      EXPECT_EQ(op["kernels"][0], "cpu/" + j["nodes"][2]["kernel"].get<std::string>());
    }
  EXPECT_TRUE(relu_counted) << j["ops"].dump();

  // Dynamic dimensions by name; a model is recognised without the .onnx extension too.
  save_model(make_dynamic_model(), dir_.file("dynamic.model"));
  auto dynamic = edgert("inspect --json " + dir_.file("dynamic.model"));
  ASSERT_EQ(dynamic.exit_code, 0) << dynamic.output;
  EXPECT_EQ(nlohmann::json::parse(dynamic.output)["inputs"][0]["shape"], nlohmann::json::array({1, "n"}));

  // What no plugin takes is listed by node and op, in JSON and text.
  save_model(make_unsupported_model(), dir_.file("fancy.onnx"));
  auto fancy = edgert("inspect --json " + dir_.file("fancy.onnx"));
  ASSERT_EQ(fancy.exit_code, 0) << fancy.output;
  auto f = nlohmann::json::parse(fancy.output);
  EXPECT_FALSE(f["buildable"].get<bool>());
  EXPECT_EQ(f["unsupported_ops"], nlohmann::json::array({"FancyNewOp"}));
  EXPECT_EQ(f["totals"]["unsupported"], 1);
  EXPECT_EQ(f["nodes"][1]["name"], "mystery");
  EXPECT_EQ(f["nodes"][1]["status"], "unsupported");
  EXPECT_NE(f["nodes"][1]["reason"].get<std::string>().find("no plugin has a kernel for FancyNewOp"), std::string::npos);
  auto text = edgert("inspect " + dir_.file("fancy.onnx"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("input  x float32 [1x4]"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("opsets ai.onnx 17"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("mystery"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("edgert build would fail: no kernel for FancyNewOp"), std::string::npos) << text.output;
  // -v lists every node, not only those without a kernel.
  auto every = edgert("inspect -v " + dir_.file("fancy.onnx"));
  EXPECT_NE(every.output.find("scale"), std::string::npos) << every.output;
}

TEST_F(CliTest, InspectOfAnEngineKeepsItsDocumentedJsonKeys) {
  ASSERT_EQ(build_small().exit_code, 0);
  auto j = nlohmann::ordered_json::parse(edgert("inspect --json " + dir_.file("small.engine")).output);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"file", "file_bytes", "format_version", "producer", "source_model", "board",
                                            "plugins", "inputs", "outputs", "graphs", "memory_plan", "totals",
                                            "profiles"}));
  // Keys are appended, never reordered: a tensor's memory space comes last.
  std::vector<std::string> tensor_keys;
  for (const auto& [key, value] : j["graphs"][0]["nodes"][0]["outputs"][0].items()) tensor_keys.push_back(key);
  EXPECT_EQ(tensor_keys, (std::vector<std::string>{"name", "dtype", "shape", "arena_offset", "bytes", "memory_space"}));
}

// A one-test ONNX node-test folder of the small model, as `edgert conformance` reads them.
void make_node_test(const std::string& dir, const std::string& model, float y0) {
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/test_data_set_0").c_str(), 0755);
  write_file(dir + "/model.onnx", read_file(model));
  float xs[4] = {1.0f, 1.0f, 4.0f, -1.0f}, ys[4] = {y0, 0.0f, 1.0f, 0.0f};
  for (const char* name : {"x", "y"}) {
    cli::HostTensor t;
    t.name = name;
    t.dtype = EDGERT_DTYPE_FLOAT32;
    t.shape = {1, 4};
    const float* v = name[0] == 'x' ? xs : ys;
    t.data.assign(reinterpret_cast<const uint8_t*>(v), reinterpret_cast<const uint8_t*>(v) + 16);
    cli::write_tensor_pb(dir + "/test_data_set_0/" + (name[0] == 'x' ? "input_0.pb" : "output_0.pb"), t);
  }
}

TEST_F(CliTest, ConformanceExpectNamesEveryTestWhoseStatusChanged) {
  const std::string tests = dir_.file("node");
  mkdir(tests.c_str(), 0755);
  make_node_test(tests + "/test_small", dir_.file("small.onnx"), 1.25f);
  make_node_test(tests + "/test_small_wrong", dir_.file("small.onnx"), 7.0f);  // a reference edgert cannot meet

  auto written = edgert("conformance " + tests + " -q --write-expect " + dir_.file("expected.txt"));
  ASSERT_EQ(written.exit_code, 0) << written.output;
  std::string file(reinterpret_cast<const char*>(read_file(dir_.file("expected.txt")).data()),
                   read_file(dir_.file("expected.txt")).size());
  EXPECT_NE(file.find("\ntest_small pass\n"), std::string::npos) << file;
  EXPECT_NE(file.find("\ntest_small_wrong fail\n"), std::string::npos) << file;
  EXPECT_NE(file.find("--write-expect"), std::string::npos) << file;

  auto same = edgert("conformance " + tests + " -q --expect " + dir_.file("expected.txt"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("every test's status is as expected"), std::string::npos) << same.output;

  // A test that stops passing, one that starts, one the file lacks and one the folder lacks:
  // each is named, and the run fails.
  const std::string text = "# comment\ntest_small fail\ntest_small_wrong pass\ntest_gone pass\n";
  write_file(dir_.file("changed.txt"), std::vector<uint8_t>(text.begin(), text.end()));
  make_node_test(tests + "/test_small_copy", dir_.file("small.onnx"), 1.25f);
  auto changed = edgert("conformance " + tests + " -q --expect " + dir_.file("changed.txt"));
  EXPECT_EQ(changed.exit_code, 1) << changed.output;
  EXPECT_NE(changed.output.find("4 test(s) differ from the expected statuses"), std::string::npos) << changed.output;
  EXPECT_NE(changed.output.find("NOW PASSES       test_small: expected fail, got pass"), std::string::npos)
      << changed.output;
  EXPECT_NE(changed.output.find("NO LONGER PASSES test_small_wrong: expected pass, got fail: test_data_set_0: output 0"),
            std::string::npos) << changed.output;
  EXPECT_NE(changed.output.find("NEW TEST         test_small_copy"), std::string::npos) << changed.output;
  EXPECT_NE(changed.output.find("MISSING          test_gone"), std::string::npos) << changed.output;
  EXPECT_NE(changed.output.find("-q --write-expect " + dir_.file("changed.txt")), std::string::npos) << changed.output;

  // One test folder given: the file's other tests are not missing, only not run.
  auto one = edgert("conformance " + tests + "/test_small_wrong --expect " + dir_.file("expected.txt"));
  EXPECT_EQ(one.exit_code, 0) << one.output;

  write_file(dir_.file("bad.txt"), {'t', 'e', 's', 't', ' ', 'o', 'k', '\n'});
  auto bad = edgert("conformance " + tests + " --expect " + dir_.file("bad.txt"));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("bad.txt:1: 'test ok' must be 'TEST STATUS'"), std::string::npos) << bad.output;
}

TEST_F(CliTest, RunWithoutThePluginNamesItAndThePathSearched) {
  ASSERT_EQ(build_small().exit_code, 0);
  TempDir empty;
  auto ran = run_command("EDGERT_PLUGIN_PATH=" + empty.path() + " " + edgert_cli() + " run " +
                         dir_.file("small.engine") + " --input x=" + dir_.file("x.npy"));
  EXPECT_EQ(ran.exit_code, 1) << ran.output;
  EXPECT_NE(ran.output.find("plugin 'cpu'"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("libedgert_plugin_cpu.so"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find(empty.path()), std::string::npos) << ran.output;
}

TEST_F(CliTest, UnsupportedOpFailsAtBuildNamingOpNodeAndPlugins) {
  save_model(make_unsupported_model(), dir_.file("fancy.onnx"));
  auto built = edgert("build " + dir_.file("fancy.onnx") + " -o " + dir_.file("fancy.engine"));
  EXPECT_EQ(built.exit_code, 1) << built.output;
  EXPECT_NE(built.output.find("FancyNewOp"), std::string::npos) << built.output;
  EXPECT_NE(built.output.find("'mystery'"), std::string::npos) << built.output;
  EXPECT_NE(built.output.find("searched: cpu ("), std::string::npos) << built.output;
  EXPECT_TRUE(read_file(dir_.file("fancy.engine")).empty());
}

TEST_F(CliTest, MalformedOnnxIsAClearError) {
  write_file(dir_.file("bad.onnx"), {0xff, 0xff, 0xff, 0x01, 0x02});
  auto built = edgert("build " + dir_.file("bad.onnx") + " -o " + dir_.file("bad.engine"));
  EXPECT_EQ(built.exit_code, 1) << built.output;
  EXPECT_NE(built.output.find("not a valid ONNX model"), std::string::npos) << built.output;
}

TEST_F(CliTest, WrongInputShapeIsRefusedWithExpectedAndGot) {
  ASSERT_EQ(build_small().exit_code, 0);
  cli::HostTensor x;
  x.dtype = EDGERT_DTYPE_FLOAT32;
  x.shape = {1, 5};
  x.data.resize(20);
  cli::write_tensor_npy(dir_.file("x5.npy"), x);
  auto ran = edgert("run " + dir_.file("small.engine") + " --input x=" + dir_.file("x5.npy"));
  EXPECT_EQ(ran.exit_code, 1) << ran.output;
  EXPECT_NE(ran.output.find("expected shape [1x4], got [1x5]"), std::string::npos) << ran.output;
}

TEST_F(CliTest, CorruptEngineFailsCleanly) {
  ASSERT_EQ(build_small().exit_code, 0);
  auto bytes = read_file(dir_.file("small.engine"));
  bytes.resize(bytes.size() / 2);
  write_file(dir_.file("half.engine"), bytes);
  for (const char* cmd : {"run", "inspect"}) {
    auto r = edgert(std::string(cmd) + " " + dir_.file("half.engine") + " --input x=" + dir_.file("x.npy"));
    if (std::string(cmd) == "inspect") r = edgert("inspect " + dir_.file("half.engine"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
  }
}

// compare against stored outputs (no ONNX Runtime needed): the inputs and references are files
// in folders, the verdict is the exit status and a PASS/FAIL line, --save-outputs keeps edgert's.
TEST_F(CliTest, CompareWithStoredReferencesPassesWithinToleranceAndFailsBeyondIt) {
  ASSERT_EQ(build_small().exit_code, 0);
  const std::string inputs = dir_.file("inputs"), good = dir_.file("good"), bad = dir_.file("bad");
  for (const std::string& d : {inputs, good, bad}) mkdir(d.c_str(), 0755);
  write_file(inputs + "/x.npy", read_file(dir_.file("x.npy")));
  auto tensor = [](std::vector<float> v) {
    cli::HostTensor y;
    y.name = "y";
    y.dtype = EDGERT_DTYPE_FLOAT32;
    y.shape = {1, 4};
    y.data.assign(reinterpret_cast<uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(v.data()) + 16);
    return y;
  };
  cli::write_tensor_npy(good + "/y.npy", tensor({1.25f, 0, 1, 0}));
  cli::write_tensor_npy(bad + "/y.npy", tensor({1.25f, 0, 1.5f, 0}));  // relative L2 error 0.31

  const std::string common = "compare " + dir_.file("small.onnx") + " " + dir_.file("small.engine") + " --inputs " + inputs;
  auto pass = edgert(common + " --reference " + good + " --save-outputs " + dir_.file("saved"));
  EXPECT_EQ(pass.exit_code, 0) << pass.output;
  EXPECT_NE(pass.output.find("PASS: relative L2 error within"), std::string::npos) << pass.output;
  cli::HostTensor saved = cli::read_tensor_npy(dir_.file("saved/y.npy"));
  EXPECT_EQ(saved.data, tensor({1.25f, 0, 1, 0}).data) << "--save-outputs writes edgert's outputs";

  auto fail = edgert(common + " --reference " + bad);
  EXPECT_EQ(fail.exit_code, 1) << fail.output;
  EXPECT_NE(fail.output.find("EXCEEDS"), std::string::npos) << fail.output;
  EXPECT_NE(fail.output.find("FAIL: relative L2 error not within"), std::string::npos) << fail.output;

  auto loose = edgert(common + " --reference " + bad + " --max-rel-l2 0.5");
  EXPECT_EQ(loose.exit_code, 0) << "--max-rel-l2 0.5 admits an error of 0.31: " << loose.output;

  auto missing = edgert(common + " --reference " + dir_.file("nowhere"));
  EXPECT_NE(missing.exit_code, 0) << missing.output;
}

// compare checks first that the engine was built from the model (the same input and output
// names), and says where it looked for ONNX Runtime's runner when there is none, and what else to do.
TEST_F(CliTest, CompareRefusesAnotherModelsEngineAndNamesWhereItLookedForTheRunner) {
  ASSERT_EQ(build_small().exit_code, 0);
  onnx::ModelProto other = make_small_model();
  onnx::GraphProto* g = other.mutable_graph();
  for (onnx::NodeProto& n : *g->mutable_node())
    for (std::string& o : *n.mutable_output())
      if (o == "y") o = "scores";
  g->mutable_output(0)->set_name("scores");
  save_model(other, dir_.file("other.onnx"));
  auto paired = edgert("compare " + dir_.file("other.onnx") + " " + dir_.file("small.engine"));
  EXPECT_NE(paired.exit_code, 0) << paired.output;
  EXPECT_NE(paired.output.find("was not built from model"), std::string::npos) << paired.output;
  EXPECT_NE(paired.output.find("outputs [y]"), std::string::npos) << paired.output;
  EXPECT_NE(paired.output.find("outputs [scores]"), std::string::npos) << paired.output;

  const std::string nowhere = dir_.file("nowhere/ort_reference.js");
  auto runner = run_command("EDGERT_ORT_REFERENCE=" + nowhere + " " + edgert_cli() + " compare " + dir_.file("small.onnx") +
                            " " + dir_.file("small.engine"));
  EXPECT_NE(runner.exit_code, 0) << runner.output;
  EXPECT_NE(runner.output.find("no ONNX Runtime runner: looked for " + nowhere), std::string::npos) << runner.output;
  EXPECT_NE(runner.output.find("share/edgert/ort_reference.js"), std::string::npos) << runner.output;
  EXPECT_NE(runner.output.find("--reference DIR"), std::string::npos) << runner.output;
}

// conformance's verdict: --min-pass-rate sets the bar, --json and --report write every test.
TEST_F(CliTest, ConformanceMinPassRateJsonAndReport) {
  const std::string tests = dir_.file("node");
  mkdir(tests.c_str(), 0755);
  make_node_test(tests + "/test_small", dir_.file("small.onnx"), 1.25f);
  make_node_test(tests + "/test_small_wrong", dir_.file("small.onnx"), 7.0f);

  auto half = edgert("conformance " + tests + " -q --min-pass-rate 0.5 --json " + dir_.file("c.json") + " --report " +
                     dir_.file("c.md"));
  EXPECT_EQ(half.exit_code, 0) << "1 of 2 passing meets 0.5: " << half.output;
  EXPECT_NE(half.output.find("1 passed, 1 failed, 0 skipped"), std::string::npos) << half.output;
  EXPECT_NE(half.output.find("pass rate 50.0%"), std::string::npos) << half.output;
  auto bytes = read_file(dir_.file("c.json"));
  std::string json_text(bytes.begin(), bytes.end());
  EXPECT_NE(json_text.find("test_small_wrong"), std::string::npos) << json_text;
  EXPECT_NE(json_text.find("test_small\""), std::string::npos) << json_text;
  bytes = read_file(dir_.file("c.md"));
  std::string report(bytes.begin(), bytes.end());
  EXPECT_NE(report.find("test_small_wrong"), std::string::npos) << "the report lists the failure: " << report;
  EXPECT_NE(report.find("50.0%"), std::string::npos) << report;

  auto strict = edgert("conformance " + tests + " -q --min-pass-rate 0.9");
  EXPECT_EQ(strict.exit_code, 1) << "1 of 2 passing is below 0.9: " << strict.output;
  auto tolerant = edgert("conformance " + tests + "/test_small_wrong -q --atol 10 --min-pass-rate 1");
  EXPECT_EQ(tolerant.exit_code, 0) << "--atol 10 accepts 1.25 for 7: " << tolerant.output;
  auto relative = edgert("conformance " + tests + "/test_small_wrong -q --rtol 1 --min-pass-rate 1");
  EXPECT_EQ(relative.exit_code, 0) << "--rtol 1 accepts 1.25 for 7 (|7 - 1.25| <= 7): " << relative.output;
  auto parallel = edgert("conformance " + tests + " -q -j 2 --min-pass-rate 0.5");
  EXPECT_EQ(parallel.exit_code, 0) << parallel.output;
  EXPECT_NE(parallel.output.find("1 passed, 1 failed, 0 skipped"), std::string::npos) << "-j 2: " << parallel.output;
}

}  // namespace
}  // namespace edgert::test
