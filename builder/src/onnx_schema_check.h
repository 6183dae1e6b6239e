// What the importer checks of a model against the ONNX specification before anything else reads
// it: opset versions it knows, and each node's input and output counts against its operator's
// schema (the schemas of the libonnx edgert is built with). Kernels index their inputs and
// outputs by position, so a node with fewer than its op requires must never reach one.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace onnx {
class NodeProto;
}

namespace edgert::builder {

// Throws BuildError naming the domain, the version and the versions supported when `opsets`
// (domain -> version, "" for ai.onnx) imports an ONNX domain at a version newer than the
// importer knows, or below 1. Domains that are not ONNX's (plugins' own) are left to plugins.
void check_opset_imports(const std::map<std::string, int64_t>& opsets);

// Throws BuildError naming the node, its op and what is missing (or extra) when `node` has
// fewer inputs or outputs than its op's schema requires, leaves a required input empty, or has
// no output at all. `domain` is "" for ai.onnx; `label` names the node in messages.
void check_node_arity(const onnx::NodeProto& node, const std::string& domain, int64_t opset,
                      const std::string& label);

}  // namespace edgert::builder
