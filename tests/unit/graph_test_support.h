// Tiny ONNX graphs for the pass and memory-plan tests: a model builder, and a helper that
// builds the same model with and without the optimization passes and runs both engines.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "engine_builder.h"

namespace edgert::test {

class GraphMaker {
 public:
  explicit GraphMaker(int opset = 17);
  // A dimension with a name in `dim_names` is dynamic (ONNX dim_param), whatever `dims` says.
  void input(const std::string& name, const std::vector<int64_t>& dims, const std::vector<std::string>& dim_names = {});
  void output(const std::string& name);
  void floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  void ints(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values);
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "");
  static void attr(onnx::NodeProto& node, const std::string& name, int64_t value);
  static void attr(onnx::NodeProto& node, const std::string& name, float value);
  static void attr(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values);
  const onnx::ModelProto& model() const { return model_; }

 private:
  onnx::ModelProto model_;
};

// PyTorch 2's nn.MultiheadAttention as its TorchScript export writes it, into `g` (opset 17 or
// later): input "x" [L, B, H*D] and weights `w` [H*D, 3*H*D]; Q, K and V from one packed
// projection (unflatten to [L, B, 3, E], unsqueeze(0), transpose(0, -2), squeeze(-2), then [0],
// [1], [2]), heads moved to [B*H, L, D] and split to [B, H, L, D], Q and Kt each scaled by
// 1/sqrt(sqrt(D)), the output's heads moved back and merged: output "y" [L*B, H*D].
void packed_attention_graph(GraphMaker& g, int64_t l, int64_t b, int64_t h, int64_t d, const std::vector<float>& w);

struct OptimizedBuild {
  builder::BuildResult optimized, reference;  // with and without the passes
  std::vector<std::vector<float>> optimized_outputs, reference_outputs;
  std::string log;                            // -v output of the optimized build
  // Ops left in the optimized main graph, "domain.op" or "op".
  std::vector<std::string> ops() const;
  size_t count(const std::string& op) const;
};

// Builds `model` twice (passes on and off), runs both on pseudo-random float inputs of the
// given shapes, and returns everything; fails the test on any error.
OptimizedBuild build_both(const onnx::ModelProto& model, const std::vector<std::vector<int64_t>>& input_shapes);

}  // namespace edgert::test
