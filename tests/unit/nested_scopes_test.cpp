// Values read from enclosing scopes at any depth (ONNX outer-scope references): a value of the
// main graph read by a Loop body inside an If inside an If reaches it through every graph in
// between (the builder keeps it for them, the runtime captures it at each level), and stays
// alive in every graph on the way until the node running the next graph down is done.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "execution_context.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {
namespace {

onnx::NodeProto& add_node(onnx::GraphProto& g, const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(g.name() + "/" + outputs[0]);
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return *n;
}

void add_graph_attribute(onnx::NodeProto& node, const std::string& name, const onnx::GraphProto& graph) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = graph;
}

// A tensor of rank 1 whose length is `length` (a number or the name of a dynamic size), or a
// scalar when `length` is empty.
void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int elem_type,
               const std::string& length) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  if (length.empty()) {
    t->mutable_shape();  // a scalar
  } else if (std::isdigit(static_cast<unsigned char>(length[0]))) {
    t->mutable_shape()->add_dim()->set_dim_value(std::stoll(length));
  } else {
    t->mutable_shape()->add_dim()->set_dim_param(length);
  }
}

void add_floats(onnx::GraphProto& g, const std::string& name, const std::vector<float>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (float v : values) t->add_float_data(v);
}

// A branch running a Loop `trips` times over acc (starting at `init`), each iteration
// acc = op(acc, step), or acc = op(acc, step * scale) when `scale` is given.
onnx::GraphProto loop_branch(const std::string& name, const std::string& init, const std::string& op,
                             const std::string& step, const std::string& scale = "") {
  onnx::GraphProto body;
  body.set_name(name + "_body");
  add_value(body.mutable_input(), "i_" + name, onnx::TensorProto::INT64, "");
  add_value(body.mutable_input(), "c_" + name, onnx::TensorProto::BOOL, "");
  add_value(body.mutable_input(), "acc_" + name, onnx::TensorProto::FLOAT, "");
  add_node(body, "Identity", {"c_" + name}, {"c_out_" + name});
  std::string operand = step;
  if (!scale.empty()) {
    operand = "scaled_" + name;
    add_node(body, "Mul", {step, scale}, {operand});
  }
  add_node(body, op, {"acc_" + name, operand}, {"acc_out_" + name});
  add_value(body.mutable_output(), "c_out_" + name, onnx::TensorProto::BOOL, "");
  add_value(body.mutable_output(), "acc_out_" + name, onnx::TensorProto::FLOAT, "");

  onnx::GraphProto branch;
  branch.set_name(name);
  add_graph_attribute(add_node(branch, "Loop", {"trips", "", init}, {"loop_" + name}), "body", body);
  add_value(branch.mutable_output(), "loop_" + name, onnx::TensorProto::FLOAT, "");
  return branch;
}

// Inputs x (float, length `length`) and cond (bool scalar); output y:
//   s = x * two; w = wa * wb (folded: a constant only the deepest graph reads)
//   t = s + x; u = -t; v = u * x            (s's last read in the main graph is t)
//   y = If(cond,
//          then: If(cond, then: Loop 3x acc = acc + s * w from x,  else: -s),
//          else: If(not_cond, then: Loop 3x acc = acc - s from x,      else: s)) + 0 * v
// The Loop bodies read s (and w) three scopes down: body -> inner If branch -> outer If branch
// -> main graph; the Loops read their trip count `trips` two scopes down. x = [1, 2, 3]: cond
// true gives x + 3 s w, false gives x - 3 s.
onnx::ModelProto nested_model(const std::string& length) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto& g = *model.mutable_graph();
  g.set_name("nested");
  add_value(g.mutable_input(), "x", onnx::TensorProto::FLOAT, length);
  add_value(g.mutable_input(), "cond", onnx::TensorProto::BOOL, "");
  add_floats(g, "two", {2.0f});
  add_floats(g, "zero", {0.0f});
  add_floats(g, "wa", {2.0f, 1.0f, -4.0f});
  add_floats(g, "wb", {0.5f, 0.5f, 0.25f});
  onnx::TensorProto* trips = g.add_initializer();
  trips->set_name("trips");
  trips->set_data_type(onnx::TensorProto::INT64);
  trips->add_int64_data(3);

  add_node(g, "Mul", {"x", "two"}, {"s"});
  add_node(g, "Mul", {"wa", "wb"}, {"w"});
  add_node(g, "Not", {"cond"}, {"not_cond"});
  add_node(g, "Add", {"s", "x"}, {"t"});
  add_node(g, "Neg", {"t"}, {"u"});
  add_node(g, "Mul", {"u", "x"}, {"v"});

  onnx::GraphProto then_then = loop_branch("then_then", "x", "Add", "s", "w");
  onnx::GraphProto then_else;
  then_else.set_name("then_else");
  add_node(then_else, "Neg", {"s"}, {"neg_s"});
  add_value(then_else.mutable_output(), "neg_s", onnx::TensorProto::FLOAT, "");

  onnx::GraphProto then_branch;
  then_branch.set_name("then");
  onnx::NodeProto& inner_then = add_node(then_branch, "If", {"cond"}, {"y_then"});
  add_graph_attribute(inner_then, "then_branch", then_then);
  add_graph_attribute(inner_then, "else_branch", then_else);
  add_value(then_branch.mutable_output(), "y_then", onnx::TensorProto::FLOAT, "");

  onnx::GraphProto else_then = loop_branch("else_then", "x", "Sub", "s");
  onnx::GraphProto else_else;
  else_else.set_name("else_else");
  add_node(else_else, "Identity", {"s"}, {"same_s"});
  add_value(else_else.mutable_output(), "same_s", onnx::TensorProto::FLOAT, "");
  onnx::GraphProto else_branch;
  else_branch.set_name("else");
  onnx::NodeProto& inner_else = add_node(else_branch, "If", {"not_cond"}, {"y_else"});
  add_graph_attribute(inner_else, "then_branch", else_then);
  add_graph_attribute(inner_else, "else_branch", else_else);
  add_value(else_branch.mutable_output(), "y_else", onnx::TensorProto::FLOAT, "");

  onnx::NodeProto& outer = add_node(g, "If", {"cond"}, {"picked"});
  add_graph_attribute(outer, "then_branch", then_branch);
  add_graph_attribute(outer, "else_branch", else_branch);
  add_node(g, "Mul", {"v", "zero"}, {"v0"});
  add_node(g, "Add", {"picked", "v0"}, {"y"});
  add_value(g.mutable_output(), "y", onnx::TensorProto::FLOAT, length);
  return model;
}

class NestedScopes : public ::testing::Test {
 protected:
  void build(const onnx::ModelProto& model) {
    bytes_ = build_engine_bytes(model, dir_.path());
    ASSERT_FALSE(bytes_.empty());
    edgert_load_options options;
    edgert_load_options_init(&options);
    options.plugin_path = plugins_.c_str();
    edgert_error error{};
    engine_ = LoadedEngine::load_memory(bytes_.data(), bytes_.size(), options, &error);
    ASSERT_NE(engine_, nullptr) << error.message;
  }

  std::vector<float> run(ExecutionContext& context, std::vector<float> x, bool cond) {
    uint8_t c = cond ? 1 : 0;
    edgert_tensor inputs[2] = {};
    inputs[0].dtype = EDGERT_DTYPE_FLOAT32;
    inputs[0].rank = 1;
    inputs[0].dims[0] = static_cast<int64_t>(x.size());
    inputs[0].data = x.data();
    inputs[1].dtype = EDGERT_DTYPE_BOOL;
    inputs[1].rank = 0;
    inputs[1].data = &c;
    edgert_error error{};
    EXPECT_EQ(context.run(inputs, 2, &error), EDGERT_OK) << error.message;
    const edgert_tensor& y = context.output(0);
    if (y.rank != 1 || !y.data) return {};
    const float* p = static_cast<const float*>(y.data);
    return std::vector<float>(p, p + y.dims[0]);
  }

  // The index of the node of graph `g` whose op is `op`, -1 if none.
  int32_t node_index(const LoadedGraph& g, const char* op) const {
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (std::strcmp(g.nodes[n].node.op_type, op) == 0) return static_cast<int32_t>(n);
    return -1;
  }
  int32_t tensor_index(const LoadedGraph& g, const char* name) const {
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (std::strcmp(g.tensors[t].name, name) == 0) return static_cast<int32_t>(t);
    return -1;
  }

  TempDir dir_;
  std::string plugins_ = cpu_plugin_dir();
  std::vector<uint8_t> bytes_;
  std::unique_ptr<LoadedEngine> engine_;
};

TEST_F(NestedScopes, AMainGraphValueReachesALoopBodyThreeScopesDownInBothBranches) {
  ASSERT_NO_FATAL_FAILURE(build(nested_model("3")));
  ExecutionContext context(*engine_);
  // s = [2, 4, 6], w = [1, 0.5, -1]: x + 3 s w and x - 3 s.
  EXPECT_EQ(run(context, {1, 2, 3}, true), (std::vector<float>{7, 8, -15}));
  EXPECT_EQ(run(context, {1, 2, 3}, false), (std::vector<float>{-5, -10, -15}));
  EXPECT_EQ(run(context, {1, 2, 3}, true), (std::vector<float>{7, 8, -15}));  // the kept executors again
}

TEST_F(NestedScopes, OuterValuesStayAliveInEveryGraphUntilTheNodeRunningTheReaderIsDone) {
  // A dynamic length: nothing is planned, so s goes back to the allocator after its last reader
  // and t, u, v (the same size, made after s's last read in the main graph) would take its block.
  ASSERT_NO_FATAL_FAILURE(build(nested_model("n")));
  const LoadedGraph& main = engine_->main_graph();
  const int32_t s = tensor_index(main, "s"), if_node = node_index(main, "If");
  ASSERT_GE(s, 0);
  ASSERT_GE(if_node, 0);
  EXPECT_EQ(main.last_use[s], if_node);
  // Every graph between the main graph and the Loop bodies (the outer branches, running an If,
  // and the inner branches, running a Loop) captures s and keeps it until that node is done.
  int graphs_passing_s_on = 0;
  for (size_t g = 1; g < engine_->graphs().size(); ++g) {
    const LoadedGraph& graph = engine_->graphs()[g];
    const int32_t local = tensor_index(graph, "s");
    const int32_t runner = std::max(node_index(graph, "If"), node_index(graph, "Loop"));
    if (local < 0 || runner < 0) continue;
    ++graphs_passing_s_on;
    bool captured = false;
    for (const auto& [here, outer] : graph.captures) captured = captured || here == local;
    EXPECT_TRUE(captured) << "graph " << g;
    EXPECT_EQ(graph.last_use[local], runner) << "graph " << g;
  }
  EXPECT_EQ(graphs_passing_s_on, 4);

  ExecutionContext context(*engine_);
  EXPECT_EQ(run(context, {1, 2, 3}, true), (std::vector<float>{7, 8, -15}));
  EXPECT_EQ(run(context, {1, 2, 3}, false), (std::vector<float>{-5, -10, -15}));
}

}  // namespace
}  // namespace edgert::test
