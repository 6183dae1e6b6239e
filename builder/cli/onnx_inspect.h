// `edgert inspect MODEL.onnx`: what an ONNX model holds (IO with dynamic dimension names,
// opsets, op counts, weights) and what the plugins on this machine make of it: for every node,
// the plugin and kernel `edgert build` would select, and the nodes no plugin takes, with why.
// The model is imported and its kernels chosen by the builder's own code (import_onnx,
// find_kernel, shape inference through each kernel's prepare), so the answer is the build's
// as far as the nodes as imported go; the graph passes (folding, fusion) are not run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace edgert::cli {

// True for an ONNX model: never for a file carrying the engine identifier "EDGT"; always for a
// name ending in ".onnx"; otherwise when the file parses as an ONNX ModelProto with a graph and
// an opset (so a corrupt engine still reports as one).
bool looks_like_onnx_model(const std::string& path);

// The model's description as JSON (keys in README.md). `plugin_path`: colon-separated plugin
// directories, or empty for the default search path. Throws BuildError when the model cannot
// be imported or no plugin loads.
nlohmann::ordered_json inspect_onnx_model(const std::string& path, const std::string& plugin_path);

// The same as text; `every_node` lists every node, not only those no preferred kernel takes.
void print_onnx_model(const nlohmann::ordered_json& model, bool every_node);

}  // namespace edgert::cli
