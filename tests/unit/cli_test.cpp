// The `edgert` binary end to end: build -> inspect -> run, and the errors users meet.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace edgert::test
