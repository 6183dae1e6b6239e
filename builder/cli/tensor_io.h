// Host tensors for the CLI: reading and writing ONNX TensorProto (.pb) and NumPy (.npy) files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgert/types.h"

namespace onnx {
class TensorProto;
}

namespace edgert::cli {

struct HostTensor {
  std::string name;
  edgert_dtype dtype = EDGERT_DTYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numel() const;
  // A view for the C API; valid while this HostTensor lives and is not resized.
  edgert_tensor view() const;
  static HostTensor from(const edgert_tensor& t, const std::string& name);
};

// Chooses the format by extension: .npy is NumPy, anything else ONNX TensorProto.
HostTensor read_tensor_file(const std::string& path);
HostTensor read_tensor_pb(const std::string& path);
HostTensor read_tensor_npy(const std::string& path);
// A TensorProto inside another message; `what` names it in errors, `dir` holds its external data.
HostTensor host_tensor_from_proto(const onnx::TensorProto& proto, const std::string& what, const std::string& dir);
// Writers throw BuildError naming the file and the system's reason when any write or the close
// fails (a full disk); a partly written regular file is removed first.
void write_tensor_pb(const std::string& path, const HostTensor& tensor);
void write_tensor_npy(const std::string& path, const HostTensor& tensor);

// Whether anything (a file, a folder) is at `path`.
bool file_exists(const std::string& path);

// Creates or truncates `path` and writes `bytes`, checking every write and the close, as the
// tensor writers do.
void write_file_checked(const std::string& path, const std::string& bytes);

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace edgert::cli
