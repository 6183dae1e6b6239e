#include "test_support.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "board_profile.h"
#include "engine_builder.h"

namespace edgert::test {

// The build and source trees; the environment may move them (tests run from a bundle on the
// GPU machine: tests/gpu/run-on-device).
std::string binary_dir() {
  const char* moved = std::getenv("EDGERT_TEST_BINARY_DIR");
  return moved && *moved ? moved : EDGERT_TEST_BINARY_DIR;
}
std::string source_dir() {
  const char* moved = std::getenv("EDGERT_TEST_SOURCE_DIR");
  return moved && *moved ? moved : EDGERT_TEST_SOURCE_DIR;
}
std::string edgert_cli() { return binary_dir() + "/bin/edgert"; }
std::string cpu_plugin_dir() { return binary_dir() + "/lib/edgert/plugins"; }
std::string host_board() {
#if defined(__aarch64__)
  return "qemu-virt-aarch64";
#else
  return "x86_64-generic";
#endif
}

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/edgert-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::string command = "rm -rf '" + path_ + "'";
  int unused = system(command.c_str());
  (void)unused;
}

namespace {

onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

void add_value_info(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                    const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::ModelProto model_with(const std::vector<onnx::NodeProto>& nodes) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("edgert-tests");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("small");
  *g->add_initializer() = float_tensor("w", {1, 4}, {1.0f, -2.0f, 0.5f, 3.0f});
  *g->add_initializer() = float_tensor("b", {4}, {0.25f, 0.25f, -1.0f, 0.0f});
  for (const auto& n : nodes) *g->add_node() = n;
  add_value_info(g->mutable_input(), "x", {1, 4});
  add_value_info(g->mutable_output(), "y", {1, 4});
  return model;
}

onnx::NodeProto node(const std::string& op, const std::vector<std::string>& in, const std::string& out,
                     const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : in) n.add_input(i);
  n.add_output(out);
  return n;
}

}  // namespace

onnx::ModelProto make_small_model() {
  return model_with({node("Mul", {"x", "w"}, "xw", "scale"), node("Add", {"xw", "b"}, "z", "shift"),
                     node("Relu", {"z"}, "y", "relu")});
}

onnx::ModelProto make_dynamic_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("dynamic");
  *g->add_initializer() = float_tensor("two", {}, {2.0f});
  *g->add_node() = node("Relu", {"x"}, "r", "relu");
  *g->add_node() = node("Mul", {"r", "two"}, "y", "double");
  for (auto* list : {g->mutable_input(), g->mutable_output()}) {
    onnx::ValueInfoProto* v = list->Add();
    v->set_name(list == g->mutable_input() ? "x" : "y");
    auto* tensor = v->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    tensor->mutable_shape()->add_dim()->set_dim_value(1);
    tensor->mutable_shape()->add_dim()->set_dim_param("n");
  }
  return model;
}

onnx::ModelProto make_unsupported_model() {
  return model_with({node("Mul", {"x", "w"}, "xw", "scale"), node("FancyNewOp", {"xw"}, "y", "mystery")});
}

void save_model(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!model.SerializeToOstream(&out)) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> build_engine_bytes(const onnx::ModelProto& model, const std::string& scratch_dir) {
  std::string path = scratch_dir + "/model.onnx";
  save_model(model, path);
  builder::BuildOptions options;
  options.model_path = path;
  options.board = config::load_board_profile(source_dir() + "/board_profiles/" + host_board() + ".yaml");
  static std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  return builder::build_engine(options).engine;
}

}  // namespace edgert::test
