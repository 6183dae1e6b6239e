// ONNX (protobuf, through Debian's libonnx) -> IR.
#pragma once

#include <string>

#include "ir.h"

namespace onnx {
class TensorProto;
}

namespace edgert::builder {

// Reads and converts `path`. Throws BuildError naming the file, node and field at fault.
Model import_onnx(const std::string& path);

// A TensorProto's dtype, shape and little-endian bytes. `what` names it in errors;
// `model_dir` resolves external data.
Value tensor_from_proto(const onnx::TensorProto& proto, const std::string& what, const std::string& model_dir);

}  // namespace edgert::builder
