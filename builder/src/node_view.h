// An IR node seen through the plugin ABI: the edgert_node and input tensors a kernel's
// supports/tactics/prepare receive at build time. Borrows from the graph; rebuild after edits.
#pragma once

#include <vector>

#include "edgert/plugin.h"
#include "ir.h"

namespace edgert::builder {

class NodeView {
 public:
  // Throws BuildError for a node without outputs: every kernel call of the builder goes through
  // a NodeView, and plugin.h promises kernels at least one output.
  NodeView(const Graph& graph, const Node& node);
  NodeView(const NodeView&) = delete;
  NodeView& operator=(const NodeView&) = delete;

  const edgert_node* node() const { return &node_; }
  // One per node input; dims of unknown size are -1, data is set for constants only. Never NULL,
  // as plugin.h promises kernels, even for a node without inputs.
  const edgert_tensor* inputs() const { return inputs_.empty() ? &no_input_ : inputs_.data(); }
  // True when every input has a known dtype and a static shape, so prepare can infer outputs.
  bool inputs_static() const { return inputs_static_; }

 private:
  edgert_node node_{};
  std::vector<edgert_attribute> attributes_;
  std::vector<std::vector<const char*>> strings_;
  std::vector<edgert_tensor> tensor_attributes_;
  std::vector<edgert_tensor> inputs_;
  edgert_tensor no_input_{};
  bool inputs_static_ = true;
};

edgert_tensor tensor_of(const Value& value);

}  // namespace edgert::builder
