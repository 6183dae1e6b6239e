// `edgert` on hostile input: malformed models, external data pointing out of the model's folder,
// tensor files that are not files, full disks, an engine written over its model. Each case
// must end in a clear error (exit 1, naming what and where), never a crash, a hang, a silent
// success or a file read from where the model had no business looking.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "graph_test_support.h"
#include "tensor_io.h"
#include "test_support.h"

namespace edgert::test {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
#define EDGERT_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EDGERT_TEST_SANITIZED 1
#endif

// A 4 GiB address-space limit for the child: reading an endless file then fails instead of
// exhausting the machine. Not under a sanitizer, whose shadow memory alone reserves more.
std::string memory_limit() {
#if defined(EDGERT_TEST_SANITIZED)
  return "";
#else
  return "ulimit -v 4194304; ";
#endif
}

class CliHostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    cli::HostTensor x;
    x.name = "x";
    x.dtype = EDGERT_DTYPE_FLOAT32;
    x.shape = {1, 4};
    float values[4] = {1.0f, 1.0f, 4.0f, -1.0f};
    x.data.assign(reinterpret_cast<uint8_t*>(values), reinterpret_cast<uint8_t*>(values) + sizeof values);
    cli::write_tensor_npy(dir_.file("x.npy"), x);
  }
  // Under a timeout (a hang fails instead of stalling the suite) and memory_limit().
  CommandResult edgert(const std::string& args) {
    return run_command(memory_limit() + "timeout 60 " + edgert_cli() + " " + args);
  }
  CommandResult build(const std::string& model, const std::string& extra = "") {
    return edgert("build " + model + " --board x86_64-generic -o " + dir_.file("out.engine") + " " + extra);
  }
  onnx::NodeProto& relu_node(onnx::ModelProto& m) { return *m.mutable_graph()->mutable_node(2); }
  TempDir dir_;
};

#define EXPECT_OUTPUT_HAS(result, text) EXPECT_NE((result).output.find(text), std::string::npos) << (result).output

TEST_F(CliHostileInput, NodeWithoutOutputsIsRefusedNamingNodeAndOp) {
  // A node beside the graph's path (its kernel was prepared with no output array), and the
  // node the graph output needed.
  onnx::ModelProto dangling = make_small_model();
  onnx::NodeProto* extra = dangling.mutable_graph()->add_node();
  extra->set_name("dangling");
  extra->set_op_type("Softmax");
  extra->add_input("z");
  onnx::ModelProto emptied = make_small_model();
  relu_node(emptied).clear_output();
  for (const auto& [model, message] : {std::pair<onnx::ModelProto, std::string>{dangling, "node 'dangling' (Softmax)"},
                                       {emptied, "node 'relu' (Relu)"}}) {
    save_model(model, dir_.file("m.onnx"));
    for (const char* flags : {"", "--no-optimize"}) {
      auto r = build(dir_.file("m.onnx"), flags);
      EXPECT_EQ(r.exit_code, 1) << message << " " << flags << "\n" << r.output;
      EXPECT_OUTPUT_HAS(r, message + " has no outputs");
    }
  }
}

TEST_F(CliHostileInput, NodeMissingRequiredInputsIsRefusedNamingWhatIsMissing) {
  for (const char* op : {"Relu", "Softmax"}) {
    onnx::ModelProto m = make_small_model();
    relu_node(m).set_op_type(op);
    relu_node(m).clear_input();
    save_model(m, dir_.file("m.onnx"));
    for (const char* extra : {"", "--no-optimize"}) {
      auto r = build(dir_.file("m.onnx"), extra);
      EXPECT_EQ(r.exit_code, 1) << op << " " << extra << "\n" << r.output;
      EXPECT_OUTPUT_HAS(r, "node 'relu' (" + std::string(op) + ") has 0 inputs; " + op +
                               " opset 17 needs at least 1 (missing: " + (op[0] == 'R' ? "X" : "input") + ")");
    }
  }
  // A required input named "" is missing too.
  onnx::ModelProto m = make_small_model();
  relu_node(m).set_input(0, "");
  save_model(m, dir_.file("m.onnx"));
  auto r = build(dir_.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "node 'relu' (Relu) leaves input 0 (X) empty");
  // Too many, where the opset's schema is known.
  m = make_small_model();
  relu_node(m).add_input("x");
  save_model(m, dir_.file("m.onnx"));
  r = build(dir_.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "node 'relu' (Relu) has 2 inputs; Relu opset 17 takes at most 1");
}

TEST_F(CliHostileInput, OpsetNewerThanKnownIsRefusedNamingDomainAndVersions) {
  onnx::ModelProto m = make_small_model();
  m.mutable_opset_import(0)->set_version(99);
  save_model(m, dir_.file("m.onnx"));
  auto r = build(dir_.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "imports opset 99 of domain 'ai.onnx'; edgert knows versions 1 to 27 of it");

  m = make_small_model();
  auto* ml = m.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(99);
  save_model(m, dir_.file("m.onnx"));
  r = build(dir_.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "imports opset 99 of domain 'ai.onnx.ml'; edgert knows versions 1 to");
}

TEST_F(CliHostileInput, NegativeInputDimensionIsRefused) {
  onnx::ModelProto m = make_small_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(-4);
  save_model(m, dir_.file("m.onnx"));
  auto r = build(dir_.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "graph input 'x': dimension 1 is -4");
}

// The small model with its weight `w` ({1, 4} float32: 16 bytes) kept as external data at
// `location`, saved as <folder>/m.onnx.
void save_with_external_weight(const std::string& folder, const std::string& location) {
  onnx::ModelProto m = make_small_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  ASSERT_EQ(w->name(), "w");
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", location}, {"offset", "0"},
                                   {"length", "16"}}) {
    auto* entry = w->add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
  save_model(m, folder + "/m.onnx");
}

TEST_F(CliHostileInput, ExternalDataInsideTheModelFolderIsRead) {
  const float w[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  write_file(dir_.file("weights.bin"), std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(w),
                                                            reinterpret_cast<const uint8_t*>(w) + 16));
  mkdir(dir_.file("data").c_str(), 0755);
  ASSERT_EQ(symlink("../weights.bin", dir_.file("data/alias.bin").c_str()), 0);  // a link that stays inside
  for (const char* location : {"weights.bin", "data/alias.bin"}) {
    save_with_external_weight(dir_.path(), location);
    auto built = build(dir_.file("m.onnx"));
    ASSERT_EQ(built.exit_code, 0) << location << "\n" << built.output;
    auto ran = edgert("run " + dir_.file("out.engine") + " --input x=" + dir_.file("x.npy") + " --output-dir " +
                      dir_.file("out"));
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
    EXPECT_FLOAT_EQ(reinterpret_cast<const float*>(cli::read_tensor_pb(dir_.file("out/y.pb")).data.data())[0], 1.25f);
  }
}

TEST_F(CliHostileInput, ExternalDataOutsideTheModelFolderIsRefused) {
  const std::string model_dir = dir_.file("model");
  mkdir(model_dir.c_str(), 0755);
  ASSERT_EQ(symlink("/etc/passwd", (model_dir + "/link.bin").c_str()), 0);
  ASSERT_EQ(symlink("/etc", (model_dir + "/etc").c_str()), 0);
  const struct {
    std::string location, why;
  } cases[] = {
      {"link.bin", "resolves to '/etc/passwd', outside the folder"},
      {"etc/passwd", "resolves to '/etc/passwd', outside the folder"},
      {"/etc/passwd", "is an absolute path"},
      {"../model/../../x.bin", "has a '..' component"},
      {"", "is empty"},
  };
  for (const auto& c : cases) {
    save_with_external_weight(model_dir, c.location);
    auto r = build(model_dir + "/m.onnx");
    EXPECT_EQ(r.exit_code, 1) << c.location << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, "initializer 'w': external data location '" + c.location + "' " + c.why);
    EXPECT_TRUE(read_file(dir_.file("out.engine")).empty()) << c.location;
  }
}

TEST_F(CliHostileInput, ExternalDataThatIsNotARegularFileIsRefused) {
  ASSERT_EQ(mkfifo(dir_.file("fifo.bin").c_str(), 0644), 0);
  mkdir(dir_.file("folder").c_str(), 0755);
  ASSERT_EQ(symlink("/dev/zero", dir_.file("zero.bin").c_str()), 0);  // outside, and a device
  const struct {
    std::string location, why;
  } cases[] = {
      {"fifo.bin", "is a FIFO, not a regular file"},
      {"folder", "is a directory, not a regular file"},
      {".", "is the folder itself, not a regular file"},
      {"zero.bin", "resolves to '/dev/zero', outside the folder"},
  };
  for (const auto& c : cases) {
    save_with_external_weight(dir_.path(), c.location);
    auto r = build(dir_.file("m.onnx"));
    EXPECT_EQ(r.exit_code, 1) << c.location << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, "initializer 'w': external data location '" + c.location + "' " + c.why);
  }
}

TEST_F(CliHostileInput, BuildRefusesToWriteTheEngineOverItsModel) {
  save_model(make_small_model(), dir_.file("m.onnx"));
  const std::vector<uint8_t> model = read_file(dir_.file("m.onnx"));
  ASSERT_EQ(symlink("m.onnx", dir_.file("alias.onnx").c_str()), 0);
  ASSERT_EQ(link(dir_.file("m.onnx").c_str(), dir_.file("hard.onnx").c_str()), 0);
  for (const std::string& output : {dir_.file("m.onnx"), dir_.path() + "/./m.onnx", dir_.file("alias.onnx"),
                                    dir_.file("hard.onnx")}) {
    auto r = edgert("build " + dir_.file("m.onnx") + " --board x86_64-generic -o " + output);
    EXPECT_EQ(r.exit_code, 1) << output << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, "is the model '" + dir_.file("m.onnx") + "' itself");
    EXPECT_EQ(read_file(dir_.file("m.onnx")), model) << "the model was overwritten through " << output;
  }
  auto trtexec = edgert("build --onnx=" + dir_.file("m.onnx") + " --saveEngine=" + dir_.file("m.onnx"));
  EXPECT_EQ(trtexec.exit_code, 1) << trtexec.output;
  EXPECT_EQ(read_file(dir_.file("m.onnx")), model);
}

TEST_F(CliHostileInput, Int8BuildsRefuseWhatTheyCannotCalibrateFrom) {
  save_model(make_small_model(), dir_.file("m.onnx"));
  const std::string avx512 = "build " + dir_.file("m.onnx") + " -o " + dir_.file("q.engine") + " --board x86_64-avx512 ";
  // A board whose precisions leave out int8.
  auto fp32_only = edgert("build " + dir_.file("m.onnx") + " -o " + dir_.file("q.engine") +
                          " --board qemu-virt-x86_64 --int8 --calib " + dir_.path());
  EXPECT_EQ(fp32_only.exit_code, 1);
  EXPECT_OUTPUT_HAS(fp32_only, "--int8: board qemu-virt-x86_64 allows precisions fp32 only");
  // No calibration given, calibration without --int8, an empty or missing directory.
  auto bare = edgert(avx512 + "--int8");
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_OUTPUT_HAS(bare, "--int8 needs activation ranges");
  auto stray = edgert(avx512 + "--calib " + dir_.path() + "/calib");
  EXPECT_EQ(stray.exit_code, 1);
  EXPECT_OUTPUT_HAS(stray, "add --int8");
  ASSERT_EQ(mkdir(dir_.file("empty").c_str(), 0755), 0);
  auto empty = edgert(avx512 + "--int8 --calib " + dir_.file("empty"));
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_OUTPUT_HAS(empty, "no .npy file or sample directory in it");
  // A calibration input of the wrong shape names the file.
  ASSERT_EQ(mkdir(dir_.file("calib").c_str(), 0755), 0);
  cli::HostTensor wrong;
  wrong.dtype = EDGERT_DTYPE_FLOAT32;
  wrong.shape = {1, 3};
  wrong.data.assign(12, 0);
  cli::write_tensor_npy(dir_.file("calib/000.npy"), wrong);
  auto shape = edgert(avx512 + "--int8 --calib " + dir_.file("calib"));
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_OUTPUT_HAS(shape, dir_.file("calib/000.npy"));
  // A cache that is not one, and a missing cache with nothing to make it from.
  write_file(dir_.file("bad.cache"), {'n', 'o', 't', '\n'});
  auto bad = edgert(avx512 + "--int8 --calib-cache " + dir_.file("bad.cache"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_OUTPUT_HAS(bad, "bad.cache");
  auto missing = edgert(avx512 + "--int8 --calib-cache " + dir_.file("none.cache"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_OUTPUT_HAS(missing, "does not exist and no calibration inputs");
  // A layer name the model does not have.
  cli::write_tensor_npy(dir_.file("calib/000.npy"), [] {
    cli::HostTensor x;
    x.dtype = EDGERT_DTYPE_FLOAT32;
    x.shape = {1, 4};
    x.data.assign(16, 0);
    return x;
  }());
  auto layer = edgert(avx512 + "--int8 --calib " + dir_.file("calib") + " --layer-precisions nosuch:fp32");
  EXPECT_EQ(layer.exit_code, 1);
  EXPECT_OUTPUT_HAS(layer, "no layer named 'nosuch'");
}

TEST_F(CliHostileInput, Int8CalibratesAModelOfSeveralInputsFromSampleDirectories) {
  // c = x + y, then a float op reading it: the Add runs in int8 with both inputs calibrated.
  GraphMaker g;
  g.input("x", {1, 4});
  g.input("y", {1, 4});
  g.node("Add", {"x", "y"}, {"c"}, "sum");
  g.node("Softmax", {"c"}, {"out"}, "head");
  g.output("out");
  save_model(g.model(), dir_.file("two.onnx"));
  for (int sample = 0; sample < 3; ++sample) {
    const std::string dir = dir_.file("calib2/" + std::to_string(sample));
    ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
    for (const char* name : {"x", "y"}) {
      cli::HostTensor t;
      t.dtype = EDGERT_DTYPE_FLOAT32;
      t.shape = {1, 4};
      const float values[4] = {0.5f * sample, -1.0f, 2.0f, 0.25f};
      t.data.assign(reinterpret_cast<const uint8_t*>(values), reinterpret_cast<const uint8_t*>(values) + sizeof values);
      cli::write_tensor_npy(dir + "/" + name + ".npy", t);
    }
  }
  auto built = edgert("build " + dir_.file("two.onnx") + " -o " + dir_.file("two.engine") +
                      " --board x86_64-avx512 --int8 --calib " + dir_.file("calib2"));
  EXPECT_EQ(built.exit_code, 0) << built.output;
  EXPECT_OUTPUT_HAS(built, "1 add(s)");
  EXPECT_OUTPUT_HAS(built, "3 sample(s)");
  // A sample directory without the second input names itself.
  ASSERT_EQ(remove(dir_.file("calib2/1/y.npy").c_str()), 0);
  auto missing = edgert("build " + dir_.file("two.onnx") + " -o " + dir_.file("two.engine") +
                        " --board x86_64-avx512 --int8 --calib " + dir_.file("calib2"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_OUTPUT_HAS(missing, dir_.file("calib2/1/x.npy"));
}

class CliHostileRun : public CliHostileInput {
 protected:
  void SetUp() override {
    CliHostileInput::SetUp();
    save_model(make_small_model(), dir_.file("small.onnx"));
    auto built = build(dir_.file("small.onnx"));
    ASSERT_EQ(built.exit_code, 0) << built.output;
    engine_ = dir_.file("out.engine");
  }
  std::string engine_;
};

TEST_F(CliHostileRun, InputsThatAreNotRegularFilesAreRefused) {
  ASSERT_EQ(symlink("/dev/zero", dir_.file("zero.npy").c_str()), 0);
  ASSERT_EQ(mkfifo(dir_.file("fifo.pb").c_str(), 0644), 0);
  const struct {
    std::string file, why;
  } cases[] = {
      {"/dev/zero", "is a character device, not a regular file"},
      {dir_.file("zero.npy"), "is a character device, not a regular file"},
      {dir_.file("fifo.pb"), "is a FIFO, not a regular file"},
      {dir_.path(), "is a directory, not a regular file"},
  };
  for (const auto& c : cases) {
    auto r = edgert("run " + engine_ + " --input x=" + c.file);
    EXPECT_EQ(r.exit_code, 1) << c.file << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, "cannot read tensor file '" + c.file + "': " + c.why);
  }
}

// A .npy file: magic, version 1.0, `header` padded to 64 bytes (ending in a newline, as numpy
// writes it, unless `newline` is false), then `data_bytes` zero bytes.
void write_npy_header(const std::string& path, std::string header, size_t data_bytes, bool newline = true);

void write_npy(const std::string& path, const std::string& shape, size_t data_bytes) {
  write_npy_header(path, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", data_bytes);
}

void write_npy_header(const std::string& path, std::string header, size_t data_bytes, bool newline) {
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back(newline ? '\n' : ' ');
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(data_bytes, '\0');
  write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

TEST_F(CliHostileRun, NpyShapesThatOverflowOrDisagreeWithTheFileAreRefused) {
  write_npy(dir_.file("overflow.npy"), "(4611686018427387904, 4)", 16);
  auto r = edgert("run " + engine_ + " --input x=" + dir_.file("overflow.npy"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "shape [4611686018427387904x4] of float32 overflows");
  EXPECT_EQ(r.output.find("needs 0 bytes"), std::string::npos) << r.output;

  write_npy(dir_.file("short.npy"), "(1000000, 4)", 16);
  r = edgert("run " + engine_ + " --input x=" + dir_.file("short.npy"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, "shape [1000000x4] of float32 needs 16000000 bytes, the file holds 16");

  write_npy(dir_.file("negative.npy"), "(-1, 4)", 16);
  r = edgert("run " + engine_ + " --input x=" + dir_.file("negative.npy"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_OUTPUT_HAS(r, ".npy shape entry '-1' is not a dimension");
}

// A zero dim empties a tensor whatever its other dims are, even where their product overflows
// int64 (a TensorProto the fuzzer wrote): the tensor has no elements and no bytes, and the
// element count says so instead of reporting the overflow.
TEST_F(CliHostileRun, AZeroDimEmptiesATensorWhoseOtherDimsOverflow) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::UINT8);
  for (int64_t d : {60, 117, 49, 105, 111, 110, 97, 108, 95, 24, 0, 14886}) proto.add_dims(d);
  std::string bytes;
  ASSERT_TRUE(proto.SerializeToString(&bytes));
  write_file(dir_.file("empty.pb"), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  const cli::HostTensor t = cli::read_tensor_pb(dir_.file("empty.pb"));
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.data.empty());

  cli::HostTensor overflowing;
  overflowing.shape = {int64_t{1} << 62, 4};
  EXPECT_EQ(overflowing.numel(), -1);
}

// Headers the fuzzer wrote: each field's text is checked before it is cut, so a malformed one
// gets a message instead of std::out_of_range (which ended the process).
TEST_F(CliHostileRun, MalformedNpyHeadersAreRefusedWithAMessage) {
  const struct {
    std::string header, message;
  } cases[] = {
      {"{'descr': <f4, 'fortran_order': False, 'shape': (4,), }", ".npy 'descr' is not a quoted string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 4, }", ".npy 'shape' is not a tuple"},
      // fortran_order's value is all blanks, to the header's end.
      {"{'descr': '<f4', 'shape': (1000,), 'fortran_order':", "needs 4000 bytes, the file holds 16"},
  };
  for (const auto& c : cases) {
    write_npy_header(dir_.file("bad.npy"), c.header, 16, false);
    auto r = edgert("run " + engine_ + " --input x=" + dir_.file("bad.npy"));
    EXPECT_EQ(r.exit_code, 1) << c.header << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, c.message);
  }
}

// The output file is /dev/full: every write fails with ENOSPC, as on a full disk.
TEST_F(CliHostileRun, OutputsThatCannotBeWrittenFailTheRun) {
  mkdir(dir_.file("out").c_str(), 0755);
  for (const char* format : {"", " --npy"}) {
    const std::string file = dir_.file(std::string("out/y") + (*format ? ".npy" : ".pb"));
    unlink(file.c_str());
    ASSERT_EQ(symlink("/dev/full", file.c_str()), 0);
    auto r = edgert("run " + engine_ + " --input x=" + dir_.file("x.npy") + " --output-dir " + dir_.file("out") +
                    format);
    EXPECT_EQ(r.exit_code, 1) << format << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, "cannot write '" + file + "'");
    EXPECT_OUTPUT_HAS(r, std::strerror(ENOSPC));
  }
  auto times = edgert("run " + engine_ + " --input x=" + dir_.file("x.npy") + " --exportTimes /dev/full");
  EXPECT_EQ(times.exit_code, 1) << times.output;
  EXPECT_OUTPUT_HAS(times, "cannot write '/dev/full'");
  auto bench = edgert("bench " + engine_ + " --iterations 1 --json /dev/full");
  EXPECT_EQ(bench.exit_code, 1) << bench.output;
  EXPECT_OUTPUT_HAS(bench, "cannot write '/dev/full'");
  // What run prints is its result too.
  auto printed = run_command("( " + memory_limit() + edgert_cli() + " run " + engine_ + " --input x=" +
                             dir_.file("x.npy") + " >/dev/full )");
  EXPECT_EQ(printed.exit_code, 1) << printed.output;
  EXPECT_OUTPUT_HAS(printed, "cannot write standard output");
}

// A real full filesystem: a 64 KiB tmpfs filled up. Needs root (mount); skipped otherwise, the
// /dev/full case above covers the same code path.
TEST_F(CliHostileRun, OutputsOnAFullFilesystemFailTheRunAndLeaveNoTruncatedFile) {
  const std::string mnt = dir_.file("full");
  mkdir(mnt.c_str(), 0755);
  if (geteuid() != 0 || mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  // Fill it: one file takes every block, the output's directory entry still fits.
  mkdir((mnt + "/out").c_str(), 0755);
  int fd = open((mnt + "/filler").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::vector<char> block(4096, 'x');
  while (write(fd, block.data(), block.size()) > 0) {
  }
  close(fd);
  for (const char* format : {"", " --npy"}) {
    const std::string file = mnt + "/out/y" + (*format ? ".npy" : ".pb");
    auto r = edgert("run " + engine_ + " --input x=" + dir_.file("x.npy") + " --output-dir " + mnt + "/out" + format);
    EXPECT_EQ(r.exit_code, 1) << format << "\n" << r.output;
    EXPECT_OUTPUT_HAS(r, "cannot write '" + file + "'");
    EXPECT_OUTPUT_HAS(r, std::strerror(ENOSPC));
    struct stat st {};
    EXPECT_NE(stat(file.c_str(), &st), 0) << file << " was left behind (" << st.st_size << " bytes)";
  }
}

TEST_F(CliHostileRun, ReluOfNaNIsNaN) {
  cli::HostTensor x;
  x.name = "x";
  x.dtype = EDGERT_DTYPE_FLOAT32;
  x.shape = {1, 4};
  float values[4] = {std::numeric_limits<float>::quiet_NaN(), 1.0f, 4.0f, -1.0f};
  x.data.assign(reinterpret_cast<uint8_t*>(values), reinterpret_cast<uint8_t*>(values) + sizeof values);
  cli::write_tensor_npy(dir_.file("nan.npy"), x);
  auto r = edgert("run " + engine_ + " --input x=" + dir_.file("nan.npy") + " --output-dir " + dir_.file("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const cli::HostTensor out = cli::read_tensor_pb(dir_.file("out/y.pb"));
  const float* y = reinterpret_cast<const float*>(out.data.data());
  EXPECT_TRUE(std::isnan(y[0])) << y[0];  // Relu(NaN * 1 + 0.25)
  EXPECT_FLOAT_EQ(y[1], 0.0f);
}

TEST_F(CliHostileRun, MoreThreadsThanCpusIsWarnedAbout) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  auto r = edgert("run " + engine_ + " --input x=" + dir_.file("x.npy") + " --threads " + std::to_string(cpus + 1));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_OUTPUT_HAS(r, "warning: --threads " + std::to_string(cpus + 1) + " is more than the " +
                           std::to_string(cpus) + " CPU(s)");
  auto fits = edgert("run " + engine_ + " --input x=" + dir_.file("x.npy") + " --threads " + std::to_string(cpus));
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_EQ(fits.output.find("warning"), std::string::npos) << fits.output;
}

}  // namespace
}  // namespace edgert::test
