// The builder's IR written back as an ONNX model (edgert quantize --export-qdq): the main
// graph's nodes, constants as initializers, inputs and outputs with their dtypes and shapes
// (dynamic dimensions by name), the model's opsets. Graphs with subgraphs (If, Loop, Scan) are
// refused: their bodies refer to outer values by name and are not carried here.
#pragma once

#include <string>

#include "ir.h"

namespace edgert::builder {

// Writes `model` to `path` (replacing it atomically); throws BuildError naming the file or the
// node that cannot be written.
void write_onnx_model(const Model& model, const std::string& path);

}  // namespace edgert::builder
