// Sequences and optionals as values of the runtime: engine inputs and outputs of sequence type
// through the C++ execution context, the sequence ops, Loop and If carrying them, and the
// errors a caller gets for values of the wrong kind. Also the narrow element types' conversions
// (edgert/narrow_types.h) against values worked out by hand from the formats' definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "edgert/narrow_types.h"
#include "execution_context.h"
#include "graph_test_support.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {
namespace {

void set_sequence_type(onnx::ValueInfoProto& v, const std::string& name, int elem_type, bool optional = false) {
  v.set_name(name);
  onnx::TypeProto* type = v.mutable_type();
  if (optional) type = type->mutable_optional_type()->mutable_elem_type();
  type->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

// An engine built from `model` and loaded from memory, which it borrows: both live here.
struct BuiltEngine {
  std::vector<uint8_t> bytes;
  std::unique_ptr<LoadedEngine> engine;
};

BuiltEngine build_and_load(const onnx::ModelProto& model, const TempDir& dir) {
  BuiltEngine built;
  built.bytes = build_engine_bytes(model, dir.path());
  edgert_load_options options;
  edgert_load_options_init(&options);
  static std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  edgert_error error{};
  built.engine = LoadedEngine::load_memory(built.bytes.data(), built.bytes.size(), options, &error);
  EXPECT_NE(built.engine, nullptr) << error.message;
  return built;
}

edgert_tensor vector_tensor(std::vector<float>& values) {
  edgert_tensor t{EDGERT_DTYPE_FLOAT32, 1, {}, values.data()};
  t.dims[0] = static_cast<int64_t>(values.size());
  return t;
}

std::vector<float> floats_of(const edgert_tensor& t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t.rank; ++d) n *= t.dims[d];
  const float* p = static_cast<const float*>(t.data);
  return std::vector<float>(p, p + n);
}

// seq (input) -> SequenceInsert(x at 0) -> out_seq; SequenceLength; ConcatFromSequence; SequenceAt(-1).
onnx::ModelProto sequence_model() {
  GraphMaker g(17);
  onnx::ModelProto model = g.model();
  onnx::GraphProto* graph = model.mutable_graph();
  set_sequence_type(*graph->add_input(), "seq", onnx::TensorProto::FLOAT);
  onnx::ValueInfoProto* x = graph->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("n");
  auto add_node = [&](const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    onnx::NodeProto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + out[0]);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  };
  onnx::TensorProto* zero = graph->add_initializer();
  zero->set_name("zero");
  zero->set_data_type(onnx::TensorProto::INT64);
  zero->add_int64_data(0);
  onnx::TensorProto* last = graph->add_initializer();
  last->set_name("last");
  last->set_data_type(onnx::TensorProto::INT64);
  last->add_int64_data(-1);
  add_node("SequenceInsert", {"seq", "x", "zero"}, {"inserted"});
  add_node("SequenceLength", {"inserted"}, {"length"});
  onnx::NodeProto* concat = add_node("ConcatFromSequence", {"inserted"}, {"joined"});
  onnx::AttributeProto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  add_node("SequenceAt", {"inserted", "last"}, {"back"});
  set_sequence_type(*graph->add_output(), "inserted", onnx::TensorProto::FLOAT);
  for (const char* name : {"length", "joined", "back"}) graph->add_output()->set_name(name);
  graph->mutable_output(1)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  graph->mutable_output(2)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  graph->mutable_output(3)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return model;
}

TEST(SequenceValues, EngineTakesAndGivesSequences) {
  TempDir dir;
  BuiltEngine built = build_and_load(sequence_model(), dir);
  ASSERT_NE(built.engine, nullptr);
  const LoadedEngine* engine = built.engine.get();
  EXPECT_EQ(engine->main_graph().tensors[engine->input_tensors()[0]].kind, ValueKind::Sequence);
  ExecutionContext context(*engine);
  std::vector<float> a = {1, 2}, b = {3, 4, 5}, x = {9};
  edgert_tensor items[2] = {vector_tensor(a), vector_tensor(b)};
  edgert_sequence seq{EDGERT_DTYPE_FLOAT32, 2, items};
  edgert_tensor inputs[2] = {edgert_tensor{EDGERT_DTYPE_SEQUENCE, 0, {}, &seq}, vector_tensor(x)};
  edgert_error error{};
  ASSERT_EQ(context.run(inputs, 2, &error), EDGERT_OK) << error.message;

  const edgert_tensor& out = context.output(0);
  ASSERT_EQ(out.dtype, EDGERT_DTYPE_SEQUENCE);
  const auto* result = static_cast<const edgert_sequence*>(out.data);
  ASSERT_EQ(result->count, 3u);
  EXPECT_EQ(floats_of(result->items[0]), std::vector<float>({9}));
  EXPECT_EQ(floats_of(result->items[2]), std::vector<float>({3, 4, 5}));
  EXPECT_EQ(*static_cast<const int64_t*>(context.output(1).data), 3);
  EXPECT_EQ(floats_of(context.output(2)), std::vector<float>({9, 1, 2, 3, 4, 5}));
  EXPECT_EQ(floats_of(context.output(3)), std::vector<float>({3, 4, 5}));

  // The caller's tensors were copied in: changing them after the run changes no output.
  a[0] = -1;
  EXPECT_EQ(floats_of(result->items[1]), std::vector<float>({1, 2}));
}

TEST(SequenceValues, WrongKindsAndPositionsGetClearErrors) {
  TempDir dir;
  BuiltEngine built = build_and_load(sequence_model(), dir);
  ASSERT_NE(built.engine, nullptr);
  const LoadedEngine* engine = built.engine.get();
  ExecutionContext context(*engine);
  std::vector<float> a = {1, 2}, x = {9};
  edgert_error error{};

  // A tensor where a sequence is expected.
  edgert_tensor as_tensor[2] = {vector_tensor(a), vector_tensor(x)};
  EXPECT_EQ(context.run(as_tensor, 2, &error), EDGERT_ERR_SHAPE);
  EXPECT_NE(std::string(error.message).find("input 'seq' is a sequence of float32 tensors"), std::string::npos)
      << error.message;

  // A sequence holding a tensor of another dtype.
  std::vector<int64_t> ints = {1};
  edgert_tensor wrong{EDGERT_DTYPE_INT64, 1, {1}, ints.data()};
  edgert_sequence seq{EDGERT_DTYPE_INT64, 1, &wrong};
  edgert_tensor mixed[2] = {edgert_tensor{EDGERT_DTYPE_SEQUENCE, 0, {}, &seq}, vector_tensor(x)};
  EXPECT_EQ(context.run(mixed, 2, &error), EDGERT_ERR_SHAPE);
  EXPECT_NE(std::string(error.message).find("tensor 0 of the sequence is int64"), std::string::npos) << error.message;

  // No value for a sequence that is not optional.
  edgert_tensor none[2] = {edgert_tensor{}, vector_tensor(x)};
  EXPECT_EQ(context.run(none, 2, &error), EDGERT_ERR_INVALID_ARGUMENT);

  // An empty sequence: insertion works, and ConcatFromSequence of one tensor too; the engine keeps running.
  edgert_sequence empty{EDGERT_DTYPE_FLOAT32, 0, nullptr};
  edgert_tensor from_empty[2] = {edgert_tensor{EDGERT_DTYPE_SEQUENCE, 0, {}, &empty}, vector_tensor(x)};
  ASSERT_EQ(context.run(from_empty, 2, &error), EDGERT_OK) << error.message;
  EXPECT_EQ(*static_cast<const int64_t*>(context.output(1).data), 1);
}

TEST(NarrowTypes, Float8AndFloat4Conversions) {
  edgert_minifloat e4m3fn{}, e4m3fnuz{}, e5m2{}, e2m1{};
  ASSERT_TRUE(edgert_minifloat_of(EDGERT_DTYPE_FLOAT8E4M3FN, &e4m3fn));
  ASSERT_TRUE(edgert_minifloat_of(EDGERT_DTYPE_FLOAT8E4M3FNUZ, &e4m3fnuz));
  ASSERT_TRUE(edgert_minifloat_of(EDGERT_DTYPE_FLOAT8E5M2, &e5m2));
  ASSERT_TRUE(edgert_minifloat_of(EDGERT_DTYPE_FLOAT4E2M1, &e2m1));
  // Every code that is a number comes back as itself.
  for (const edgert_minifloat* f : {&e4m3fn, &e4m3fnuz, &e5m2}) {
    for (unsigned code = 0; code < 256; ++code) {
      const double v = edgert_minifloat_to_double(f, static_cast<uint8_t>(code));
      if (std::isnan(v) || std::isinf(v) || (v == 0 && f->kind == EDGERT_MINIFLOAT_FNUZ && code != 0)) continue;
      EXPECT_EQ(edgert_minifloat_from_double(f, v, 1), code) << "code " << code << " value " << v;
    }
  }
  EXPECT_EQ(edgert_minifloat_to_double(&e4m3fn, 0x7e), 448.0);
  EXPECT_EQ(edgert_minifloat_to_double(&e4m3fnuz, 0x7f), 240.0);
  EXPECT_EQ(edgert_minifloat_to_double(&e5m2, 0x7b), 57344.0);
  EXPECT_EQ(edgert_minifloat_to_double(&e4m3fn, 0x01), std::ldexp(1.0, -9));  // smallest subnormal
  // Overflow: saturated to the largest value, else infinity (e5m2) or NaN (e4m3fn: none).
  EXPECT_EQ(edgert_minifloat_from_double(&e4m3fn, 1e6, 1), 0x7e);
  EXPECT_EQ(edgert_minifloat_from_double(&e4m3fn, 1e6, 0), 0x7f);
  EXPECT_EQ(edgert_minifloat_from_double(&e5m2, -1e6, 0), 0xfc);
  EXPECT_EQ(edgert_minifloat_from_double(&e4m3fnuz, -0.0, 1), 0x00);  // no negative zero
  // Ties go to the even code: 464 lies halfway between 448 (mantissa 110) and 480.
  EXPECT_EQ(edgert_minifloat_from_double(&e4m3fn, 464.0, 0), 0x7e);
  // float4e2m1: 0, 0.5, 1, 1.5, 2, 3, 4, 6; always saturating.
  EXPECT_EQ(edgert_minifloat_from_double(&e2m1, 1.25, 0), 0x2);
  EXPECT_EQ(edgert_minifloat_from_double(&e2m1, -3.5, 0), 0xe);
  EXPECT_EQ(edgert_minifloat_from_double(&e2m1, 100.0, 0), 0x7);
}

TEST(NarrowTypes, E8m0AndPackedIntegers) {
  EXPECT_EQ(edgert_e8m0_from_float(0.124f, 1, EDGERT_E8M0_ROUND_UP), 0x7c);
  EXPECT_EQ(edgert_e8m0_from_float(0.124f, 1, EDGERT_E8M0_ROUND_DOWN), 0x7b);
  EXPECT_EQ(edgert_e8m0_from_float(1.0f, 1, EDGERT_E8M0_ROUND_UP), 0x7f);
  EXPECT_EQ(edgert_e8m0_to_double(0x80), 2.0);
  // int4: two per byte, first in the low bits, sign-extended into a byte each in memory.
  const uint8_t packed[2] = {0x87, 0x0f};
  EXPECT_EQ(static_cast<int8_t>(edgert_unpack_element(EDGERT_DTYPE_INT4, packed, 0)), 7);
  EXPECT_EQ(static_cast<int8_t>(edgert_unpack_element(EDGERT_DTYPE_INT4, packed, 1)), -8);
  EXPECT_EQ(static_cast<int8_t>(edgert_unpack_element(EDGERT_DTYPE_INT4, packed, 2)), -1);
  EXPECT_EQ(edgert_unpack_element(EDGERT_DTYPE_UINT4, packed, 2), 15);
  uint8_t elements[3] = {7, static_cast<uint8_t>(-8), static_cast<uint8_t>(-1)}, repacked[2] = {};
  edgert_pack_elements(EDGERT_DTYPE_INT4, elements, 3, repacked);
  EXPECT_EQ(repacked[0], 0x87);
  EXPECT_EQ(repacked[1], 0x0f);
  // Four 2-bit elements per byte; wrapping and saturating conversions.
  EXPECT_EQ(edgert_packed_bytes(EDGERT_DTYPE_INT2, 5), 2u);
  EXPECT_EQ(static_cast<int8_t>(edgert_narrow_int_from_int64(EDGERT_DTYPE_INT4, 9, 0)), -7);
  EXPECT_EQ(static_cast<int8_t>(edgert_narrow_int_from_int64(EDGERT_DTYPE_INT4, 9, 1)), 7);
  EXPECT_EQ(edgert_narrow_int_from_int64(EDGERT_DTYPE_UINT2, -1, 0), 3);
}

}  // namespace
}  // namespace edgert::test
