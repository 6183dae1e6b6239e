// The CUDA plugin's own kernels against the CPU plugin's reference kernels (gpu_test_support.h
// says what is compared and how): element-wise ops, Cast, pass-through ops, depthwise
// convolution and the convolution epilogue, pools, Softmax, layout ops, Resize, reductions and
// normalizations. Random inputs of awkward sizes (channels 3, 7, 13, 17; spatial 1, 5, 9, 31;
// batch 1 and 3; broadcasting operands), float32 and float16, and channels-last (layout NHWC)
// wherever the kernel takes it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace edgert::gpu_test {
namespace {

constexpr edgert_dtype kF32 = EDGERT_DTYPE_FLOAT32;
constexpr edgert_dtype kF16 = EDGERT_DTYPE_FLOAT16;

GpuCase make(const std::string& op, std::vector<CaseInput> inputs, NodeSpec attributes = {}, int32_t opset = 17) {
  return make_case(op, std::move(inputs), std::move(attributes), opset);
}

void run_both(GpuCase c) { run_float32_and_float16(std::move(c)); }

// Both dtypes, row-major and channels-last.
void run_layouts(GpuCase c) {
  run_both(c);
  c.nhwc = true;
  run_both(c);
}

GpuCase transcendental(GpuCase c) {
  c.atol = c.rtol = 1e-4;
  return c;
}

CaseInput not_following(HostTensor t) {
  CaseInput c = input(std::move(t));
  c.follows_dtype = false;
  return c;
}

CaseInput weights(HostTensor t) {
  CaseInput c = constant(std::move(t));
  c.keeps_layout = true;
  return c;
}

// Element-wise

TEST_F(GpuTest, BinaryArithmeticBroadcasts) {
  std::mt19937 rng(1);
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{3, 7, 5, 9}, {3, 7, 5, 9}},                          // same shape
      {{2, 8, 16}, {2, 8, 16}},                              // same shape, 16-byte vectors
      {{3, 7, 5, 9}, {1}},                                   // a scalar
      {{3, 7, 5, 9}, {7, 1, 1}},                             // per channel
      {{3, 1, 9}, {7, 1}},                                   // both broadcast
      {{1}, {13, 17}},                                       // scalar first
      {{31}, {31}},                                          // odd length
      {{2, 1, 3, 1, 2, 1, 3, 2}, {1, 2, 1, 3, 1, 2, 1, 1}},  // rank 8
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"}) {
    for (const auto& [a, b] : shapes) {
      HostTensor x = std::string(op) == "Pow" ? HostTensor::random(a, rng, 0.5f, 2.f) : HostTensor::random(a, rng);
      HostTensor y = std::string(op) == "Div" ? HostTensor::random_signed(b, rng, 0.5f, 2.f)
                     : std::string(op) == "Pow" ? HostTensor::random(b, rng, -2.f, 2.f)
                                                : HostTensor::random(b, rng);
      GpuCase c = make(op, {input(x), input(y)});
      c.label = "A " + std::to_string(a.size()) + "-D, B " + std::to_string(b.size()) + "-D";
      if (std::string(op) == "Pow") c = transcendental(c);
      run_both(c);
    }
  }
  // PRelu: the slope broadcasts to X.
  for (const Dims& slope : {Dims{3, 7, 5, 9}, Dims{7, 1, 1}, Dims{1}}) {
    run_both(make("PRelu", {input(HostTensor::random({3, 7, 5, 9}, rng)), constant(HostTensor::random(slope, rng))}));
  }
}

TEST_F(GpuTest, BinaryArithmeticChannelsLast) {
  std::mt19937 rng(2);
  const Dims x = {3, 7, 5, 9};
  // Rank-4 activations are NHWC; lower-rank constants broadcast against the logical dims.
  run_both([&] { GpuCase c = make("Add", {input(HostTensor::random(x, rng)), input(HostTensor::random(x, rng))}); c.nhwc = true; return c; }());
  run_both([&] { GpuCase c = make("Mul", {input(HostTensor::random(x, rng)), constant(HostTensor::random({1, 7, 1, 1}, rng))}); c.nhwc = true; return c; }());
  run_both([&] { GpuCase c = make("Sub", {input(HostTensor::random(x, rng)), constant(HostTensor::random({9}, rng))}); c.nhwc = true; return c; }());
  run_both([&] { GpuCase c = make("Div", {input(HostTensor::random(x, rng)), constant(HostTensor::random_signed({5, 9}, rng, 0.5f, 2.f))}); c.nhwc = true; return c; }());
  run_both([&] { GpuCase c = make("Add", {input(HostTensor::random({3, 7, 1, 1}, rng)), input(HostTensor::random(x, rng))}); c.nhwc = true; return c; }());
  run_both([&] { GpuCase c = make("Mul", {input(HostTensor::random({3, 13, 1, 1}, rng)), input(HostTensor::random({3, 13, 1, 1}, rng))}); c.nhwc = true; return c; }());
  run_both([&] { GpuCase c = make("Add", {input(HostTensor::random({1, 7, 5, 9}, rng)), input(HostTensor::random(x, rng))}); c.nhwc = true; return c; }());
}

TEST_F(GpuTest, BinaryArithmeticIntegers) {
  run_case(make("Add", {input(HostTensor::int64s({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -12})),
                        input(HostTensor::int64s({4}, {100, -200, 300, int64_t{1} << 40}))}));
  run_case(make("Sub", {input(HostTensor::int32s({2, 3}, {5, 6, 7, 8, 9, 10})), input(HostTensor::int32s({2, 1}, {1, -1}))}));
  run_case(make("Mul", {input(HostTensor::int64s({5}, {1, -2, 3, 4, 5})), input(HostTensor::int64s({1}, {-7}))}));
  run_case(make("Div", {input(HostTensor::int32s({6}, {7, -7, 9, 100, -3, 0})), input(HostTensor::int32s({6}, {2, 2, -4, 7, 5, 3}))}));
}

struct UnaryCase {
  const char* op;
  float lo, hi;
  bool transcendental;
  NodeSpec attributes;
};

TEST_F(GpuTest, UnaryMathAndActivations) {
  std::mt19937 rng(3);
  const std::vector<UnaryCase> cases = {
      {"Relu", -1, 1, false, {}},
      {"LeakyRelu", -1, 1, false, NodeSpec().real("alpha", 0.1f)},
      {"Sigmoid", -6, 6, true, {}},
      {"Tanh", -3, 3, true, {}},
      {"HardSigmoid", -4, 4, false, NodeSpec().real("alpha", 0.3f).real("beta", 0.4f)},
      {"HardSwish", -4, 4, false, {}},
      {"Gelu", -3, 3, true, {}},
      {"Gelu", -3, 3, true, NodeSpec().string("approximate", "tanh")},
      {"Erf", -2, 2, true, {}},
      {"Exp", -3, 3, true, {}},
      {"Log", 0.1f, 4, true, {}},
      {"Sqrt", 0, 4, true, {}},
      {"Neg", -1, 1, false, {}},
      {"Abs", -1, 1, false, {}},
      {"Reciprocal", 0.5f, 2, false, {}},
      {"Softplus", -4, 4, true, {}},
      {"Softsign", -4, 4, false, {}},
      {"Elu", -3, 3, true, NodeSpec().real("alpha", 0.7f)},
      {"Selu", -3, 3, true, {}},
      {"Celu", -3, 3, true, NodeSpec().real("alpha", 1.3f)},
      {"Mish", -3, 3, true, {}},
      {"ThresholdedRelu", -1, 1, false, NodeSpec().real("alpha", 0.2f)},
      {"Floor", -5, 5, false, {}},
      {"Ceil", -5, 5, false, {}},
      {"Round", -5, 5, false, {}},
      {"Sign", -1, 1, false, {}},
      {"Sin", -3, 3, true, {}},
      {"Cos", -3, 3, true, {}},
  };
  for (const UnaryCase& u : cases) {
    for (const Dims& dims : {Dims{3, 7, 31}, Dims{2, 64}}) {  // odd length, and 16-byte vectors
      HostTensor x = std::string(u.op) == "Reciprocal" ? HostTensor::random_signed(dims, rng, u.lo, u.hi)
                                                       : HostTensor::random(dims, rng, u.lo, u.hi);
      GpuCase c = make(u.op, {input(x)}, u.attributes);
      if (u.transcendental) c = transcendental(c);
      run_both(c);
    }
  }
}

TEST_F(GpuTest, Clip) {
  std::mt19937 rng(4);
  const Dims dims = {3, 7, 5, 9};
  run_both(make("Clip", {input(HostTensor::random(dims, rng))}, NodeSpec().real("min", -0.3f).real("max", 0.5f), 6));
  auto scalar = [](float v) { return constant(HostTensor::floats({}, {v})); };
  run_both(make("Clip", {input(HostTensor::random(dims, rng)), scalar(-0.3f), scalar(0.5f)}, {}, 13));
  run_both(make("Clip", {input(HostTensor::random(dims, rng)), absent(), scalar(0.25f)}, {}, 13));
  run_both(make("Clip", {input(HostTensor::random(dims, rng)), scalar(-0.1f)}, {}, 13));
  run_both(make("Clip", {input(HostTensor::random(dims, rng))}, {}, 13));
  // min > max: every element becomes max.
  run_both(make("Clip", {input(HostTensor::random(dims, rng)), scalar(0.5f), scalar(-0.2f)}, {}, 13));
}

TEST_F(GpuTest, PointwiseChain) {
  std::mt19937 rng(5);
  GpuCase c = make("PointwiseChain", {input(HostTensor::random({3, 7, 31}, rng, -2, 2))},
                   NodeSpec()
                       .strings("ops", {"Mul", "Add", "LeakyRelu", "Clip", "Sigmoid", "RSub", "RDiv", "HardSwish",
                                        "Div", "Sub", "Tanh", "HardSigmoid", "Gelu", "Relu"})
                       .floats("params", {1.7f, 0, 0.2f, 0, 0.1f, 0, -0.6f, 0.8f, 0, 0, 1.0f, 0, 0.5f, 0, 0, 0, 1.3f, 0,
                                          0.1f, 0, 0, 0, 0.2f, 0.5f, 0, 0, 0, 0}),
                   1);
  c.domain = "edgert";
  run_both(transcendental(c));
  c.inputs = {input(HostTensor::random({2, 64}, rng, -2, 2))};
  run_both(transcendental(c));
}

TEST_F(GpuTest, Cast) {
  std::mt19937 rng(6);
  const Dims dims = {3, 7, 13};
  auto cast = [&](CaseInput x, edgert_dtype to) {
    GpuCase c = make("Cast", {std::move(x)}, NodeSpec().integer("to", to), 13);
    c.half_atol = c.half_rtol = 0;  // both sides round the same float once
    c.label = "to " + std::to_string(to);
    return c;
  };
  HostTensor wide = HostTensor::random(dims, rng, -100, 100);
  run_case(cast(input(wide), kF16));
  run_case(cast(not_following(wide.converted(kF16)), kF32));
  run_case(cast(input(wide), EDGERT_DTYPE_INT32));
  run_case(cast(input(wide), EDGERT_DTYPE_INT64));
  run_case(cast(input(wide), EDGERT_DTYPE_UINT8));
  run_case(cast(input(wide), kF32));
  run_case(cast(not_following(wide.converted(kF16)), EDGERT_DTYPE_INT32));
  run_case(cast(input(HostTensor::floats({6}, {0, -0.0f, 1, -2.5f, 0.001f, 0})), EDGERT_DTYPE_BOOL));
  run_case(cast(input(HostTensor::int64s({5}, {0, -1, 7, int64_t{1} << 40, -(int64_t{1} << 33)})), kF32));
  run_case(cast(input(HostTensor::int64s({5}, {0, -1, 7, int64_t{1} << 40, -(int64_t{1} << 33)})), EDGERT_DTYPE_INT32));
  run_case(cast(input(HostTensor::int32s({4}, {0, -1, 7, 1 << 30})), EDGERT_DTYPE_INT64));
  run_case(cast(input(HostTensor::bools({4}, {true, false, false, true})), kF32));
  run_case(cast(input(HostTensor::int64s({4}, {3, -3, 0, 1})), kF16));
}

TEST_F(GpuTest, IdentityAndDropout) {
  std::mt19937 rng(7);
  run_both(make("Identity", {input(HostTensor::random({3, 7, 5}, rng))}));
  run_case(make("Identity", {input(HostTensor::int64s({3}, {1, -2, 3}))}));
  GpuCase in_place = make("Identity", {input(HostTensor::random({3, 7, 5}, rng))});
  in_place.in_place = true;
  run_both(in_place);
  run_both(make("Dropout", {input(HostTensor::random({3, 7, 5}, rng))}, NodeSpec().real("ratio", 0.3f), 10));
  run_both(make("Dropout", {input(HostTensor::random({3, 7, 5}, rng)), fixed(HostTensor::floats({}, {0.5f}))}, {}, 13));
  run_both(make("Dropout",
                {input(HostTensor::random({3, 7, 5}, rng)), fixed(HostTensor::floats({}, {0.5f})),
                 fixed(HostTensor::bools({}, {false}))},
                {}, 13));
}

// Convolution: depthwise kernel and epilogue (through the convolution kernel)

struct DepthwiseCase {
  Dims x;
  int64_t kh, kw;
  std::vector<int64_t> strides, pads, dilations;
};

TEST_F(GpuTest, DepthwiseConvolution) {
  std::mt19937 rng(8);
  const std::vector<DepthwiseCase> cases = {
      {{1, 13, 9, 9}, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {{3, 7, 31, 31}, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}},     // tiled, stride 2
      {{1, 17, 31, 31}, 5, 5, {1, 1}, {4, 4, 4, 4}, {2, 2}},    // tiled, dilated
      {{3, 7, 5, 9}, 3, 3, {1, 2}, {0, 1, 1, 0}, {1, 1}},       // small plane, asymmetric pads
      {{1, 3, 1, 1}, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {{1, 32, 40, 40}, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {{2, 5, 9, 33}, 7, 3, {1, 3}, {3, 1, 3, 1}, {1, 1}},
  };
  for (const DepthwiseCase& d : cases) {
    const int64_t c = d.x[1];
    NodeSpec attributes = NodeSpec()
                              .integer("group", c)
                              .ints("kernel_shape", {d.kh, d.kw})
                              .ints("strides", d.strides)
                              .ints("pads", d.pads)
                              .ints("dilations", d.dilations);
    GpuCase conv = make("Conv", {input(HostTensor::random(d.x, rng)), weights(HostTensor::random({c, 1, d.kh, d.kw}, rng)),
                                 constant(HostTensor::random({c}, rng))},
                        attributes, 13);
    conv.atol = conv.rtol = 1e-4;
    run_layouts(conv);
    conv.inputs.pop_back();  // no bias
    run_layouts(conv);
  }
}

TEST_F(GpuTest, FusedDepthwiseConvolution) {
  std::mt19937 rng(9);
  // 7 channels: the direct kernels; 16: channels-last vectors.
  for (int64_t ch : {7, 16}) {
    for (const char* activation : {"Relu", "HardSwish", "Sigmoid", ""}) {
      const Dims x = {3, ch, 31, 31}, y = {3, ch, 16, 16};
      GpuCase c = make("FusedConv",
                       {input(HostTensor::random(x, rng)), weights(HostTensor::random({ch, 1, 3, 3}, rng)),
                        constant(HostTensor::random({ch}, rng)), input(HostTensor::random(y, rng))},
                       NodeSpec()
                           .integer("group", ch)
                           .ints("kernel_shape", {3, 3})
                           .ints("strides", {2, 2})
                           .ints("pads", {1, 1, 1, 1})
                           .string("activation", activation),
                       13);
      c.domain = "edgert";
      c.label = std::string(activation) + " " + std::to_string(ch) + " channels";
      c.atol = c.rtol = 1e-4;
      run_layouts(c);
    }
  }
}

// A dense FusedConv whose activation cuDNN does not fuse: the convolution, then the
// bias-activation epilogue (elementwise.cu) with bias and residual.
TEST_F(GpuTest, ConvolutionEpilogue) {
  std::mt19937 rng(10);
  for (const char* activation : {"HardSwish", "Sigmoid", "LeakyRelu"}) {
    NodeSpec attributes = NodeSpec().ints("kernel_shape", {1, 1}).string("activation", activation);
    if (std::string(activation) == "LeakyRelu") attributes.floats("activation_params", {0.1f});
    GpuCase c = make("FusedConv",
                     {input(HostTensor::random({3, 7, 5, 9}, rng)), constant(HostTensor::random({13, 7, 1, 1}, rng)),
                      constant(HostTensor::random({13}, rng)), input(HostTensor::random({3, 13, 5, 9}, rng))},
                     attributes, 13);
    c.domain = "edgert";
    c.label = activation;
    c.atol = c.rtol = 1e-4;
    run_both(c);
  }
  // Channels-last: the dense convolution reads its weights [M, KH, KW, C].
  HostTensor w = HostTensor::random({13, 7, 3, 3}, rng);
  CaseInput w_input = constant(w);
  w_input.gpu_tensor = w.nchw_to_nhwc();
  w_input.gpu_tensor.dims = {13, 3, 3, 7};
  GpuCase c = make("FusedConv",
                   {input(HostTensor::random({3, 7, 5, 9}, rng)), w_input, constant(HostTensor::random({13}, rng)),
                    input(HostTensor::random({3, 13, 5, 9}, rng))},
                   NodeSpec().ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}).string("activation", "HardSwish"), 13);
  c.domain = "edgert";
  c.label = "NHWC 3x3";
  c.atol = c.rtol = 1e-4;
  c.nhwc = true;
  run_both(c);
}

// Pools

TEST_F(GpuTest, MaxAndAveragePools) {
  std::mt19937 rng(11);
  struct PoolCase {
    Dims x;
    NodeSpec attributes;
    int32_t opset;
  };
  const std::vector<PoolCase> cases = {
      {{1, 3, 9, 9}, NodeSpec().ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}), 17},
      {{3, 7, 31, 31}, NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}), 17},
      {{3, 13, 9, 5}, NodeSpec().ints("kernel_shape", {2, 3}).ints("strides", {2, 1}).ints("pads", {0, 1, 1, 0}), 17},
      {{1, 7, 9, 9}, NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).integer("ceil_mode", 1), 17},
      {{1, 7, 10, 10}, NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}).integer("ceil_mode", 1), 17},
      {{1, 3, 9, 9}, NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).string("auto_pad", "SAME_UPPER"), 17},
      {{1, 3, 10, 9}, NodeSpec().ints("kernel_shape", {4, 3}).ints("strides", {3, 2}).string("auto_pad", "SAME_LOWER"), 17},
      {{1, 3, 9, 9}, NodeSpec().ints("kernel_shape", {3, 3}).string("auto_pad", "VALID"), 17},
      {{3, 7, 9, 9}, NodeSpec().ints("kernel_shape", {3, 3}).ints("dilations", {2, 2}).ints("pads", {1, 2, 1, 2}), 19},
      {{3, 7, 5, 5}, NodeSpec().ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}).integer("count_include_pad", 1), 17},
      {{1, 17, 1, 1}, NodeSpec().ints("kernel_shape", {1, 1}), 17},
  };
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (const PoolCase& p : cases) run_layouts(make(op, {input(HostTensor::random(p.x, rng))}, p.attributes, p.opset));
    // 1-D and 3-D windows (row-major only).
    run_both(make(op, {input(HostTensor::random({3, 7, 31}, rng))},
                  NodeSpec().ints("kernel_shape", {3}).ints("strides", {2}).ints("pads", {1, 1}), 17));
    run_both(make(op, {input(HostTensor::random({1, 3, 5, 9, 9}, rng))},
                  NodeSpec().ints("kernel_shape", {2, 3, 3}).ints("strides", {1, 2, 2}).ints("pads", {0, 1, 1, 1, 0, 1}), 17));
  }
}

TEST_F(GpuTest, GlobalPools) {
  std::mt19937 rng(12);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    for (const Dims& x : {Dims{3, 7, 5, 9}, Dims{1, 13, 1, 1}, Dims{3, 17, 31, 31}, Dims{2, 4100, 3, 3}})
      run_layouts(make(op, {input(HostTensor::random(x, rng))}));
    run_both(make(op, {input(HostTensor::random({3, 7, 31}, rng))}));
    run_both(make(op, {input(HostTensor::random({1, 3, 5, 9, 9}, rng))}));
  }
}

// Softmax

TEST_F(GpuTest, SoftmaxAndLogSoftmax) {
  std::mt19937 rng(13);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {-1, 1, 0}) run_both(transcendental(make(op, {input(HostTensor::random({3, 7, 31}, rng, -5, 5))}, NodeSpec().integer("axis", axis), 13)));
    run_both(transcendental(make(op, {input(HostTensor::random({2, 1500}, rng, -5, 5))}, NodeSpec().integer("axis", 1), 13)));
    for (int64_t axis : {1, 2}) run_both(transcendental(make(op, {input(HostTensor::random({3, 7, 5, 9}, rng, -5, 5))}, NodeSpec().integer("axis", axis), 11)));
    // Channels-last: one axis (opset 13) and the coerced trailing axes (opset 11).
    for (int32_t opset : {13, 11})
      for (int64_t axis : {0, 1, 2, 3}) {
        GpuCase c = transcendental(make(op, {input(HostTensor::random({3, 7, 5, 9}, rng, -5, 5))}, NodeSpec().integer("axis", axis), opset));
        c.nhwc = true;
        run_both(c);
      }
  }
}

// Fused attention

// edgert.FusedAttention (Q [..., L, D], Kt [..., D, S] or K [..., S, D], V [..., S, Dv], an optional additive mask)
// against the CPU plugin's: the vision transformer's shape, sizes that are no multiple of the
// tiles (queries 64, keys 64, head 16), one query and one key, heads of 130, batch dims that
// broadcast, masks broadcasting over batches and rows, masked-out keys (-inf), and a float32 mask
// beside float16 Q, Kt and V.
TEST_F(GpuTest, FusedAttentionMatchesTheReference) {
  std::mt19937 rng(29);
  struct Shapes {
    Dims q, kt, v, mask;  // empty mask: none
    float q_scale, score_scale;
  };
  const std::vector<Shapes> shapes = {
      {{1, 12, 197, 64}, {1, 12, 64, 197}, {1, 12, 197, 64}, {}, 0.125f, 1.f},
      {{2, 3, 33, 40}, {2, 3, 40, 70}, {2, 3, 70, 24}, {1, 1, 33, 70}, 1.f, 0.158f},
      {{2, 3, 33, 40}, {2, 3, 40, 70}, {2, 3, 70, 24}, {2, 1, 1, 70}, 1.f, 0.158f},
      {{3, 17, 16}, {1, 16, 129}, {3, 129, 8}, {17, 129}, 0.25f, 1.f},
      {{1, 1, 8}, {1, 8, 1}, {1, 1, 5}, {}, 1.f, 1.f},
      {{1, 80, 130}, {1, 130, 65}, {1, 65, 130}, {}, 0.0877f, 1.f},
      {{4, 49, 32}, {4, 32, 49}, {4, 49, 32}, {4, 49, 49}, 0.1768f, 1.f},
  };
  for (const Shapes& sh : shapes) {
    std::vector<CaseInput> inputs = {input(HostTensor::random(sh.q, rng)), input(HostTensor::random(sh.kt, rng)),
                                     input(HostTensor::random(sh.v, rng))};
    if (!sh.mask.empty()) inputs.push_back(input(HostTensor::random(sh.mask, rng, -2.f, 2.f)));
    GpuCase c = make("FusedAttention", inputs, NodeSpec().real("q_scale", sh.q_scale).real("score_scale", sh.score_scale), 1);
    c.domain = "edgert";
    c.label = "Q " + std::to_string(sh.q.size()) + "-D, L " + std::to_string(sh.q[sh.q.size() - 2]) + ", S " +
              std::to_string(sh.kt.back()) + (sh.mask.empty() ? "" : ", masked");
    run_both(transcendental(c));
    // The same keys as K [..., S, D] (keys_transposed 0: the fused node reads them untransposed).
    Dims k = sh.kt;
    std::swap(k[k.size() - 1], k[k.size() - 2]);
    std::vector<CaseInput> rows = {inputs[0], input(HostTensor::random(k, rng)), inputs[2]};
    if (inputs.size() > 3) rows.push_back(inputs[3]);
    GpuCase r = make("FusedAttention", rows,
                     NodeSpec().real("q_scale", sh.q_scale).real("score_scale", sh.score_scale).integer("keys_transposed", 0), 1);
    r.domain = "edgert";
    r.label = c.label + ", K [S, D]";
    run_both(transcendental(r));
  }
  // Heads read through Transposes and the output written as one (q_perm ... y_perm: [L, B*H, D]
  // operands, as PyTorch's multi-head attention holds them), with a mask and an odd head size.
  for (int64_t d : {64, 24}) {
    GpuCase c = make("FusedAttention",
                     {input(HostTensor::random({70, 6, d}, rng)), input(HostTensor::random({90, 6, d}, rng)),
                      input(HostTensor::random({90, 6, 40}, rng)), input(HostTensor::random({6, 70, 90}, rng))},
                     NodeSpec()
                         .real("q_scale", 0.125f)
                         .integer("keys_transposed", 0)
                         .ints("q_perm", {1, 0, 2})
                         .ints("k_perm", {1, 0, 2})
                         .ints("v_perm", {1, 0, 2})
                         .ints("y_perm", {1, 0, 2}),
                     1);
    c.domain = "edgert";
    c.label = "heads through transposes, D " + std::to_string(d);
    run_both(transcendental(c));
  }
  // Q, K and V read from one packed projection [L, B, 3, H, D] at their offsets (q_select ...:
  // PyTorch 2's packed in-projection), heads through perms, the output as [L, B, H, D].
  {
    const HostTensor packed = HostTensor::random({70, 2, 3, 4, 64}, rng);
    GpuCase c = make("FusedAttention", {input(packed), input(packed), input(packed)},
                     NodeSpec()
                         .real("q_scale", 0.125f)
                         .integer("keys_transposed", 0)
                         .ints("q_select", {2, 0})
                         .ints("k_select", {2, 1})
                         .ints("v_select", {2, 2})
                         .ints("q_perm", {1, 2, 0, 3})
                         .ints("k_perm", {1, 2, 0, 3})
                         .ints("v_perm", {1, 2, 0, 3})
                         .ints("y_perm", {2, 0, 1, 3}),
                     1);
    c.domain = "edgert";
    c.label = "packed projection";
    run_both(transcendental(c));
  }
  // Keys masked out with -inf (a padding mask), and a mask that stays float32 beside float16.
  std::vector<float> values(2 * 70);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i % 70 >= 50 ? -INFINITY : 0.f;
  for (bool follows : {true, false}) {
    CaseInput m = input(HostTensor::floats({2, 1, 1, 70}, values));
    m.follows_dtype = follows;
    GpuCase c = make("FusedAttention", {input(HostTensor::random({2, 3, 33, 40}, rng)), input(HostTensor::random({2, 3, 40, 70}, rng)),
                                        input(HostTensor::random({2, 3, 70, 24}, rng)), m},
                     NodeSpec().real("q_divisor", 6.32f), 1);
    c.domain = "edgert";
    c.label = follows ? "padding mask" : "float32 padding mask";
    run_both(transcendental(c));
  }
}

// Layout ops

TEST_F(GpuTest, Concat) {
  std::mt19937 rng(14);
  for (int64_t axis : {0, 1, 2, 3, -1}) {
    std::vector<CaseInput> inputs;
    for (int64_t size : {2, 5, 1}) {
      Dims d = {3, 7, 5, 9};
      d[static_cast<size_t>(axis < 0 ? axis + 4 : axis)] = size;
      inputs.push_back(input(HostTensor::random(d, rng)));
    }
    run_layouts(make("Concat", inputs, NodeSpec().integer("axis", axis)));
  }
  run_both(make("Concat", {input(HostTensor::random({7}, rng)), input(HostTensor::random({13}, rng))}, NodeSpec().integer("axis", 0)));
  run_case(make("Concat", {input(HostTensor::int64s({2}, {1, 2})), input(HostTensor::int64s({1}, {-3}))}, NodeSpec().integer("axis", 0)));
}

TEST_F(GpuTest, Split) {
  std::mt19937 rng(15);
  const Dims x = {3, 7, 5, 9};
  GpuCase equal = make("Split", {input(HostTensor::random({3, 9, 5, 7}, rng))}, NodeSpec().integer("axis", 1));
  equal.num_outputs = 3;
  run_layouts(equal);
  GpuCase sizes = make("Split", {input(HostTensor::random(x, rng)), fixed(HostTensor::int64s({3}, {2, 3, 4}))},
                       NodeSpec().integer("axis", 3), 13);
  sizes.num_outputs = 3;
  run_layouts(sizes);
  GpuCase parts = make("Split", {input(HostTensor::random(x, rng))}, NodeSpec().integer("axis", 1).integer("num_outputs", 3), 18);
  parts.num_outputs = 3;
  run_layouts(parts);
  GpuCase legacy = make("Split", {input(HostTensor::random(x, rng))}, NodeSpec().integer("axis", 2).ints("split", {1, 4}), 11);
  legacy.num_outputs = 2;
  run_layouts(legacy);
}

TEST_F(GpuTest, Slice) {
  std::mt19937 rng(16);
  const Dims x = {3, 7, 5, 9};
  auto ints = [](std::vector<int64_t> v) { return fixed(HostTensor::int64s({static_cast<int64_t>(v.size())}, v)); };
  run_layouts(make("Slice", {input(HostTensor::random(x, rng)), ints({1, -4}), ints({7, 100}), ints({1, 3}), ints({2, 1})}, {}, 13));
  run_layouts(make("Slice", {input(HostTensor::random(x, rng)), ints({-1}), ints({-100}), ints({2}), ints({-2})}, {}, 13));
  run_layouts(make("Slice", {input(HostTensor::random(x, rng)), ints({0, 1, 2}), ints({2, 3, 4})}, {}, 13));
  run_layouts(make("Slice", {input(HostTensor::random(x, rng)), ints({5}), ints({2}), ints({2})}, {}, 13));  // empty
  run_layouts(make("Slice", {input(HostTensor::random(x, rng))}, NodeSpec().ints("starts", {1, 2}).ints("ends", {3, 9}).ints("axes", {0, 3}), 9));
  run_case(make("Slice", {input(HostTensor::int64s({5}, {1, 2, 3, 4, 5})), ints({1}), ints({4})}, {}, 13));
}

TEST_F(GpuTest, Transpose) {
  std::mt19937 rng(17);
  run_both(make("Transpose", {input(HostTensor::random({3, 7, 5, 9}, rng))}, NodeSpec().ints("perm", {0, 2, 3, 1})));
  run_both(make("Transpose", {input(HostTensor::random({2, 3, 5}, rng))}));
  run_both(make("Transpose", {input(HostTensor::random({13, 17}, rng))}, NodeSpec().ints("perm", {1, 0})));
  run_both(make("Transpose", {input(HostTensor::random({2, 3, 1, 5, 2, 3}, rng))}, NodeSpec().ints("perm", {5, 3, 0, 2, 4, 1})));
  run_case(make("Transpose", {input(HostTensor::int64s({2, 3}, {1, 2, 3, 4, 5, 6}))}, NodeSpec().ints("perm", {1, 0})));
}

TEST_F(GpuTest, TileAndExpand) {
  std::mt19937 rng(18);
  auto ints = [](std::vector<int64_t> v) { return fixed(HostTensor::int64s({static_cast<int64_t>(v.size())}, v)); };
  run_both(make("Tile", {input(HostTensor::random({3, 1, 5}, rng)), ints({2, 3, 1})}));
  run_both(make("Tile", {input(HostTensor::random({7}, rng)), ints({3})}));
  run_both(make("Expand", {input(HostTensor::random({3, 1, 5}, rng)), ints({2, 3, 7, 5})}));
  run_both(make("Expand", {input(HostTensor::random({7, 1}, rng)), ints({1, 5})}));
  run_both(make("Expand", {input(HostTensor::random({1}, rng)), ints({3, 4})}));
}

TEST_F(GpuTest, Pad) {
  std::mt19937 rng(19);
  const Dims x = {3, 7, 5, 9};
  auto ints = [](std::vector<int64_t> v) { return fixed(HostTensor::int64s({static_cast<int64_t>(v.size())}, v)); };
  const std::vector<int64_t> pads = {0, 1, 2, 0, 0, 2, 1, 1};
  run_both(make("Pad", {input(HostTensor::random(x, rng)), ints(pads), constant(HostTensor::floats({}, {0.5f}))}, {}, 13));
  run_both(make("Pad", {input(HostTensor::random(x, rng)), ints(pads)}, {}, 13));
  for (const char* mode : {"reflect", "edge", "wrap"})
    run_both(make("Pad", {input(HostTensor::random(x, rng)), ints(pads)}, NodeSpec().string("mode", mode), 19));
  run_both(make("Pad", {input(HostTensor::random(x, rng))}, NodeSpec().ints("pads", pads).real("value", 1.5f), 2));
  run_both(make("Pad", {input(HostTensor::random(x, rng)), ints({1, 2, 0, 3}), absent(), ints({1, 3})}, {}, 18));
  run_case(make("Pad", {input(HostTensor::int64s({2, 2}, {1, 2, 3, 4})), ints({1, 0, 0, 1})}, {}, 13));
}

TEST_F(GpuTest, Gather) {
  std::mt19937 rng(20);
  run_both(make("Gather", {input(HostTensor::random({5, 7, 3}, rng)), input(HostTensor::int64s({2, 3}, {0, 4, -1, 2, 3, 1}))}));
  run_both(make("Gather", {input(HostTensor::random({5, 7, 3}, rng)), input(HostTensor::int32s({4}, {6, -7, 0, 3}))},
                NodeSpec().integer("axis", 1)));
  run_both(make("Gather", {input(HostTensor::random({5, 7, 3}, rng)), input(HostTensor::int64s({}, {2}))},
                NodeSpec().integer("axis", 2)));
  run_case(make("Gather", {input(HostTensor::int64s({4}, {10, 20, 30, 40})), constant(HostTensor::int64s({2}, {3, 0}))}));
}

TEST_F(GpuTest, DepthToSpaceAndSpaceToDepth) {
  std::mt19937 rng(21);
  for (const char* mode : {"DCR", "CRD"})
    run_both(make("DepthToSpace", {input(HostTensor::random({2, 12, 3, 5}, rng))},
                  NodeSpec().integer("blocksize", 2).string("mode", mode), 13));
  run_both(make("SpaceToDepth", {input(HostTensor::random({2, 3, 6, 4}, rng))}, NodeSpec().integer("blocksize", 2), 13));
}

TEST_F(GpuTest, Reshapes) {
  std::mt19937 rng(22);
  auto ints = [](std::vector<int64_t> v) { return fixed(HostTensor::int64s({static_cast<int64_t>(v.size())}, v)); };
  run_both(make("Reshape", {input(HostTensor::random({3, 7, 5}, rng)), ints({-1, 5})}));
  GpuCase in_place = make("Reshape", {input(HostTensor::random({3, 7, 5}, rng)), ints({0, 35})});
  in_place.in_place = true;
  run_both(in_place);
  run_both(make("Flatten", {input(HostTensor::random({3, 7, 5, 9}, rng))}, NodeSpec().integer("axis", 2)));
  run_both(make("Squeeze", {input(HostTensor::random({3, 1, 5}, rng)), ints({1})}, {}, 13));
  run_both(make("Squeeze", {input(HostTensor::random({3, 1, 5, 1}, rng))}, NodeSpec().ints("axes", {-1}), 11));
  run_both(make("Unsqueeze", {input(HostTensor::random({3, 5}, rng)), ints({0, 3})}, {}, 13));
  run_both(make("Unsqueeze", {input(HostTensor::random({3, 5}, rng))}, NodeSpec().ints("axes", {1}), 11));
}

// Resize

TEST_F(GpuTest, Resize) {
  std::mt19937 rng(23);
  const Dims x = {3, 7, 5, 9};
  auto scales = [](std::vector<float> v) { return fixed(HostTensor::floats({static_cast<int64_t>(v.size())}, v)); };
  auto sizes = [](std::vector<int64_t> v) { return fixed(HostTensor::int64s({static_cast<int64_t>(v.size())}, v)); };
  auto resize = [&](NodeSpec attributes, CaseInput scales_or_absent, CaseInput sizes_or_absent, Dims dims = {3, 7, 5, 9}) {
    GpuCase c = make("Resize", {input(HostTensor::random(dims, rng)), absent(), std::move(scales_or_absent),
                                std::move(sizes_or_absent)},
                     std::move(attributes), 13);
    c.atol = c.rtol = 1e-5;
    return c;
  };
  auto nearest = [](const char* coord, const char* mode) {
    return NodeSpec().string("mode", "nearest").string("coordinate_transformation_mode", coord).string("nearest_mode", mode);
  };
  auto linear = [](const char* coord) {
    return NodeSpec().string("mode", "linear").string("coordinate_transformation_mode", coord);
  };
  run_layouts(resize(nearest("asymmetric", "floor"), scales({1, 1, 2, 2}), absent()));
  run_layouts(resize(nearest("half_pixel", "round_prefer_floor"), scales({1, 1, 0.6f, 1.7f}), absent()));
  run_layouts(resize(nearest("align_corners", "round_prefer_ceil"), absent(), sizes({3, 7, 9, 17})));
  run_layouts(resize(nearest("tf_half_pixel_for_nn", "ceil"), scales({1, 1, 1.5f, 0.5f}), absent()));
  run_layouts(resize(linear("half_pixel"), scales({1, 1, 2, 2}), absent()));
  run_layouts(resize(linear("pytorch_half_pixel"), absent(), sizes({3, 7, 1, 17})));
  run_layouts(resize(linear("align_corners"), scales({1, 1, 0.5f, 0.6f}), absent()));
  run_layouts(resize(linear("asymmetric"), scales({1, 1, 1.8f, 2.3f}), absent()));
  run_layouts(resize(linear("half_pixel_symmetric"), scales({1, 1, 1.5f, 0.7f}), absent()));
  run_layouts(resize(linear("half_pixel").integer("exclude_outside", 1), scales({1, 1, 0.6f, 1.4f}), absent()));
  run_both(resize(linear("half_pixel"), scales({1, 2, 1.5f}), absent(), {3, 5, 9}));  // linear on two axes of three
  run_both(resize(linear("half_pixel"), scales({1.5f, 2, 1.5f}), absent(), {3, 5, 9}));  // and on all three
  // tf_crop_and_resize reads roi and writes extrapolation_value outside it.
  GpuCase crop = make("Resize",
                      {input(HostTensor::random(x, rng)), fixed(HostTensor::floats({8}, {0, 0, 0.2f, -0.1f, 1, 1, 0.8f, 1.2f})),
                       scales({1, 1, 1.6f, 1.2f})},
                      linear("tf_crop_and_resize").real("extrapolation_value", 0.5f), 13);
  run_layouts(crop);
  // Opset 10 Resize and Upsample: scales in input 1, asymmetric coordinates.
  run_layouts(make("Resize", {input(HostTensor::random(x, rng)), scales({1, 1, 2, 1.5f})}, NodeSpec().string("mode", "nearest"), 10));
  run_layouts(make("Resize", {input(HostTensor::random(x, rng)), scales({1, 1, 0.6f, 2})}, NodeSpec().string("mode", "linear"), 10));
  run_layouts(make("Upsample", {input(HostTensor::random(x, rng)), scales({1, 1, 2, 3})}, NodeSpec().string("mode", "nearest"), 9));
}

// Reductions

TEST_F(GpuTest, Reductions) {
  std::mt19937 rng(24);
  const Dims x = {3, 7, 5, 9};
  auto axes_input = [](std::vector<int64_t> v) { return fixed(HostTensor::int64s({static_cast<int64_t>(v.size())}, v)); };
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum"}) {
    const bool positive = std::string(op) == "ReduceLogSum" || std::string(op) == "ReduceProd";
    auto data = [&](Dims d) { return input(HostTensor::random(d, rng, positive ? 0.5f : -1.f, positive ? 1.5f : 1.f)); };
    auto reduce = [&](Dims d, std::vector<int64_t> axes, int64_t keepdims) {
      std::vector<CaseInput> inputs = {data(d)};
      if (!axes.empty()) inputs.push_back(axes_input(axes));
      GpuCase c = make(op, inputs, NodeSpec().integer("keepdims", keepdims), 18);
      c.atol = c.rtol = 1e-4;
      c.label = "axes " + std::to_string(axes.size()) + " keepdims " + std::to_string(keepdims);
      return c;
    };
    for (int64_t keepdims : {1, 0}) {
      run_layouts(reduce(x, {2, 3}, keepdims));
      run_layouts(reduce(x, {1}, keepdims));
      run_layouts(reduce(x, {0, 2}, keepdims));
      run_layouts(reduce(x, {1, 2, 3}, keepdims));
      run_layouts(reduce(x, {}, keepdims));  // every axis
      run_both(reduce({3, 7, 31}, {-1}, keepdims));  // one warp per output
      run_both(reduce(x, {3}, keepdims));            // one thread per output
      run_both(reduce({2, 5000}, {1}, keepdims));    // one block per output
      // Channels-last over H and W with thousands of outputs: the columns kernel, with 32 and 8 warps a block.
      run_layouts(reduce({2, 2100, 3, 5}, {2, 3}, keepdims));
      run_layouts(reduce({4, 4100, 2, 3}, {2, 3}, keepdims));
    }
  }
  // Axes as an attribute (opset 13; ReduceSum's became an input at 13), and noop_with_empty_axes.
  GpuCase mean = make("ReduceMean", {input(HostTensor::random(x, rng))}, NodeSpec().ints("axes", {2, 3}), 13);
  mean.atol = mean.rtol = 1e-4;
  run_layouts(mean);
  GpuCase sum = make("ReduceSum", {input(HostTensor::random(x, rng)), axes_input({1})}, {}, 13);
  sum.atol = sum.rtol = 1e-4;
  run_layouts(sum);
  run_both(make("ReduceMax", {input(HostTensor::random(x, rng))}, NodeSpec().integer("noop_with_empty_axes", 1), 18));
}

// Normalizations

TEST_F(GpuTest, BatchNormalization) {
  std::mt19937 rng(25);
  for (const Dims& x : {Dims{3, 7, 5, 9}, Dims{5, 13}, Dims{3, 17, 31}, Dims{1, 3, 1, 1}}) {
    const int64_t c = x[1];
    GpuCase bn = make("BatchNormalization",
                      {input(HostTensor::random(x, rng)), constant(HostTensor::random({c}, rng, 0.5f, 1.5f)),
                       constant(HostTensor::random({c}, rng)), constant(HostTensor::random({c}, rng)),
                       constant(HostTensor::random({c}, rng, 0.5f, 2.f))},
                      NodeSpec().real("epsilon", 1e-3f), 15);
    bn.atol = bn.rtol = 1e-4;
    if (x.size() == 4) run_layouts(bn);
    else run_both(bn);
  }
}

TEST_F(GpuTest, LayerNormalization) {
  std::mt19937 rng(26);
  struct LnCase {
    Dims x;
    int64_t axis;
    Dims scale;
    bool bias;
  };
  for (const LnCase& l : {LnCase{{3, 7, 31}, -1, {31}, true}, LnCase{{3, 7, 31}, 1, {7, 31}, true},
                          LnCase{{3, 7, 31}, -1, {31}, false}, LnCase{{2, 1500}, 1, {1500}, true},
                          LnCase{{3, 7, 5, 9}, 2, {5, 9}, true}}) {
    std::vector<CaseInput> inputs = {input(HostTensor::random(l.x, rng, -2, 3)), constant(HostTensor::random(l.scale, rng))};
    if (l.bias) inputs.push_back(constant(HostTensor::random(l.scale, rng)));
    GpuCase c = make("LayerNormalization", inputs, NodeSpec().integer("axis", l.axis).real("epsilon", 1e-5f), 17);
    c.atol = c.rtol = 1e-4;
    run_both(c);
  }
}

TEST_F(GpuTest, InstanceNormalization) {
  std::mt19937 rng(27);
  for (const Dims& x : {Dims{3, 7, 5, 9}, Dims{1, 3, 40, 40}, Dims{3, 7, 31}}) {
    const int64_t c = x[1];
    GpuCase in = make("InstanceNormalization",
                      {input(HostTensor::random(x, rng, -2, 3)), constant(HostTensor::random({c}, rng)),
                       constant(HostTensor::random({c}, rng))},
                      NodeSpec().real("epsilon", 1e-5f), 6);
    in.atol = in.rtol = 1e-4;
    if (x.size() == 4) run_layouts(in);
    else run_both(in);
  }
}

// Camera frames (camera_op.h): every format, odd sizes, down- and upscaling, both layouts,
// luma and BGR; the frame's bytes as uint8 on both sides, float32 out.
TEST_F(GpuTest, ImageToTensor) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> byte(0, 255);
  auto frame = [&](Dims dims) {
    HostTensor t{EDGERT_DTYPE_UINT8, dims, {}};
    t.bytes.resize(static_cast<size_t>(t.numel()));
    for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(byte(rng));
    return t;
  };
  struct Shape {
    const char* format;
    Dims frame;
    int64_t out_h, out_w, channels;
    const char* order;
    const char* layout;
  };
  for (const Shape& s : {Shape{"yuyv", {23, 38, 2}, 16, 12, 3, "rgb", "NCHW"}, Shape{"yuyv", {9, 14, 2}, 31, 29, 3, "bgr", "NHWC"},
                         Shape{"nv12", {45, 22}, 17, 9, 3, "rgb", "NCHW"}, Shape{"nv12", {12, 10}, 8, 8, 1, "rgb", "NCHW"},
                         Shape{"rgb24", {19, 37, 3}, 11, 23, 3, "bgr", "NCHW"}, Shape{"rgb24", {7, 5, 3}, 13, 3, 1, "rgb", "NHWC"}}) {
    SCOPED_TRACE(std::string(s.format) + " " + s.layout);
    GpuCase c = make("ImageToTensor", {not_following(frame(s.frame))},
                     NodeSpec()
                         .string("format", s.format)
                         .integer("out_height", s.out_h)
                         .integer("out_width", s.out_w)
                         .integer("channels", s.channels)
                         .string("channel_order", s.order)
                         .string("layout", s.layout)
                         .floats("mean", {0.485f, 0.456f, 0.406f})
                         .floats("std", {0.229f, 0.224f, 0.225f}),
                     1);
    c.domain = "edgert";
    c.dtype = kF32;
    run_case(c);
  }
}

}  // namespace
}  // namespace edgert::gpu_test
