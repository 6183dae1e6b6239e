#include "graph_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "board_profile.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {

GraphMaker::GraphMaker(int opset) {
  model_.set_ir_version(8);
  model_.set_producer_name("edgert-tests");
  auto* o = model_.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  model_.mutable_graph()->set_name("tiny");
}

void GraphMaker::input(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<std::string>& dim_names) {
  auto* v = model_.mutable_graph()->add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t d = 0; d < dims.size(); ++d) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d < dim_names.size() && !dim_names[d].empty()) dim->set_dim_param(dim_names[d]);
    else dim->set_dim_value(dims[d]);
  }
}

void GraphMaker::output(const std::string& name) {
  auto* v = model_.mutable_graph()->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

void GraphMaker::floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

void GraphMaker::ints(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto& GraphMaker::node(const std::string& op, const std::vector<std::string>& inputs,
                                  const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* n = model_.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? outputs[0] + "_node" : name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

void GraphMaker::attr(onnx::NodeProto& node, const std::string& name, int64_t value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}
void GraphMaker::attr(onnx::NodeProto& node, const std::string& name, float value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}
void GraphMaker::attr(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

std::vector<std::string> OptimizedBuild::ops() const {
  std::vector<std::string> out;
  for (const auto& n : optimized.model.graphs[0].nodes) out.push_back(n.domain.empty() ? n.op_type : n.domain + "." + n.op_type);
  return out;
}

size_t OptimizedBuild::count(const std::string& op) const {
  size_t c = 0;
  for (const auto& o : ops()) c += o == op;
  return c;
}

namespace {

std::vector<std::vector<float>> run_engine(const std::vector<uint8_t>& bytes, const std::vector<std::vector<int64_t>>& shapes) {
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  edgert_error error{};
  auto engine = LoadedEngine::load_memory(bytes.data(), bytes.size(), options, &error);
  EXPECT_NE(engine, nullptr) << error.message;
  if (!engine) return {};
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<std::vector<float>> data;
  std::vector<edgert_tensor> inputs;
  for (const auto& shape : shapes) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    data.emplace_back(n);
    for (float& v : data.back()) v = dist(rng);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    edgert_tensor t{};
    t.dtype = EDGERT_DTYPE_FLOAT32;
    t.rank = static_cast<int32_t>(shapes[i].size());
    for (size_t d = 0; d < shapes[i].size(); ++d) t.dims[d] = shapes[i][d];
    t.data = data[i].data();
    inputs.push_back(t);
  }
  ExecutionContext context(*engine);
  std::vector<std::vector<float>> outputs;
  for (int pass = 0; pass < 2; ++pass) {  // twice: the second run reuses the arena
    EXPECT_EQ(context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error), EDGERT_OK) << error.message;
    outputs.clear();
    for (size_t o = 0; o < engine->output_names().size(); ++o) {
      const edgert_tensor& t = context.output(static_cast<int32_t>(o));
      size_t n = 1;
      for (int32_t d = 0; d < t.rank; ++d) n *= static_cast<size_t>(t.dims[d]);
      const float* p = static_cast<const float*>(t.data);
      outputs.emplace_back(p, p + n);
    }
  }
  return outputs;
}

}  // namespace

OptimizedBuild build_both(const onnx::ModelProto& model, const std::vector<std::vector<int64_t>>& input_shapes) {
  TempDir dir;
  save_model(model, dir.file("model.onnx"));
  OptimizedBuild out;
  builder::BuildOptions options;
  options.model_path = dir.file("model.onnx");
  options.board = config::load_board_profile(config::find_board_profile(host_board()));
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  options.log = [&out](const std::string& line) { out.log += line + "\n"; };
  // Both builds take each kernel's first-listed tactic: timed choices may differ between two
  // builds (and tactics round differently), while these tests compare the passes exactly.
  options.tactics = builder::TacticPolicy::kFirst;
  out.optimized = builder::build_engine(options);
  options.log = nullptr;
  options.optimize = false;
  out.reference = builder::build_engine(options);
  out.optimized_outputs = run_engine(out.optimized.engine, input_shapes);
  out.reference_outputs = run_engine(out.reference.engine, input_shapes);
  return out;
}

void packed_attention_graph(GraphMaker& g, int64_t l, int64_t b, int64_t h, int64_t d, const std::vector<float>& w) {
  const int64_t e = h * d;
  g.input("x", {l, b, e});
  g.floats("w", {e, 3 * e}, w);
  g.ints("unflatten", {4}, {l, b, 3, e});
  g.ints("front", {1}, {0});
  g.ints("fourth", {1}, {-2});
  g.ints("fold_heads", {3}, {l, b * h, d});
  g.ints("split_heads", {4}, {b, h, l, d});
  g.ints("merged", {2}, {l * b, e});
  g.floats("c", {}, {1.0f / std::sqrt(std::sqrt(static_cast<float>(d)))});
  g.node("MatMul", {"x", "w"}, {"proj"}, "in_proj");
  g.node("Reshape", {"proj", "unflatten"}, {"packed"}, "unflatten");
  g.node("Unsqueeze", {"packed", "front"}, {"u"}, "unsqueeze");
  GraphMaker::attr(g.node("Transpose", {"u"}, {"t"}, "transpose"), "perm", std::vector<int64_t>{3, 1, 2, 0, 4});
  g.node("Squeeze", {"t", "fourth"}, {"qkv"}, "squeeze");
  const char* parts[] = {"q", "k", "v"};
  for (int64_t i = 0; i < 3; ++i) {
    const std::string part = parts[i];
    g.ints(part + "_index", {}, {i});
    g.node("Gather", {"qkv", part + "_index"}, {part}, part);
    g.node("Reshape", {part, "fold_heads"}, {part + "f"}, part + "_fold");
    GraphMaker::attr(g.node("Transpose", {part + "f"}, {part + "t"}, part + "_to_heads"), "perm",
                     std::vector<int64_t>{1, 0, 2});
    g.node("Reshape", {part + "t", "split_heads"}, {part + "h"}, part + "_split");
  }
  GraphMaker::attr(g.node("Transpose", {"kh"}, {"kht"}, "keys_t"), "perm", std::vector<int64_t>{0, 1, 3, 2});
  g.node("Mul", {"qh", "c"}, {"qs"}, "scale_q");
  g.node("Mul", {"kht", "c"}, {"kts"}, "scale_k");
  g.node("MatMul", {"qs", "kts"}, {"s"}, "scores");
  GraphMaker::attr(g.node("Softmax", {"s"}, {"p"}, "softmax"), "axis", int64_t{-1});
  g.node("MatMul", {"p", "vh"}, {"o"}, "context");
  GraphMaker::attr(g.node("Transpose", {"o"}, {"ot"}, "merge_heads"), "perm", std::vector<int64_t>{2, 0, 1, 3});
  g.node("Reshape", {"ot", "merged"}, {"y"}, "merge");
  g.output("y");
}

}  // namespace edgert::test
