// Shared helpers for the unit tests: paths of the build, running the CLI, and ONNX models
// made in C++ with the onnx protobuf API (no Python needed by the tests).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace edgert::test {

std::string binary_dir();
std::string source_dir();
std::string edgert_cli();   // path of the built `edgert`
std::string cpu_plugin_dir();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
CommandResult run_command(const std::string& command);

// A fresh directory under /tmp, removed with its contents when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A small float model: y = Relu(x * w + b) over [1, 4] with constant w, b; opset 17.
onnx::ModelProto make_small_model();
// y = Relu(x) * 2 with x of shape [1, "n"]: a dynamic dimension.
onnx::ModelProto make_dynamic_model();
// A model using an op no plugin implements.
onnx::ModelProto make_unsupported_model();
void save_model(const onnx::ModelProto& model, const std::string& path);

std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// The board profile engines are built for in these tests: x86_64-generic, or qemu-virt-aarch64
// when the tests themselves are aarch64 (the cross build, run under qemu-aarch64-static).
std::string host_board();

// Builds `model` for host_board() with the real builder and returns the engine bytes.
std::vector<uint8_t> build_engine_bytes(const onnx::ModelProto& model, const std::string& scratch_dir);

}  // namespace edgert::test
