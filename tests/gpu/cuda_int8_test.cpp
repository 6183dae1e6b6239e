// The CUDA plugin's INT8 kernels against the CPU plugin's reference kernels (gpu_test_support.h),
// byte for byte: QLinearConv on the integer tensor cores (channels-last and NCHW; every
// reduction-split tactic; the stem's 3 channels, strided, dilated, 1x1, filters not a multiple of the tile,
// input zero points 0 and not), QuantizeLinear, DequantizeLinear, QLinearAdd and QLinearMul
// (same shape and per-channel, both layouts), QLinearGlobalAveragePool (both layouts), QLookup
// and MaxPool on uint8.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace edgert::gpu_test {
namespace {

HostTensor bytes(edgert_dtype dtype, Dims dims, std::vector<uint8_t> values) {
  return HostTensor{dtype, std::move(dims), std::move(values)};
}

HostTensor random_bytes(edgert_dtype dtype, Dims dims, std::mt19937& rng) {
  HostTensor t{dtype, std::move(dims), {}};
  t.bytes.resize(static_cast<size_t>(t.numel()));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(byte(rng));
  return t;
}

CaseInput scale(float value) { return fixed(HostTensor::floats({}, {value})); }
CaseInput zero_point(uint8_t value) { return fixed(bytes(EDGERT_DTYPE_UINT8, {}, {value})); }
CaseInput u8_input(Dims dims, std::mt19937& rng) { return input(random_bytes(EDGERT_DTYPE_UINT8, std::move(dims), rng)); }

GpuCase int8_case(const std::string& op, const std::string& domain, std::vector<CaseInput> inputs, NodeSpec attributes,
                  int32_t opset, const std::string& label, bool nhwc) {
  GpuCase c = make_case(op, std::move(inputs), std::move(attributes), opset);
  c.domain = domain;
  c.label = label + (nhwc ? " NHWC" : " NCHW");
  c.nhwc = nhwc;
  return c;
}

// [M, C, KH, KW] int8 bytes -> [M, KH, KW, C] (what the layout pass stores for the GPU).
HostTensor krsc(const HostTensor& w) {
  const int64_t m = w.dims[0], c = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  HostTensor out{w.dtype, {m, kh, kw, c}, std::vector<uint8_t>(w.bytes.size())};
  for (int64_t o = 0; o < m; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          out.bytes[static_cast<size_t>(((o * kh + y) * kw + x) * c + ch)] =
              w.bytes[static_cast<size_t>(((o * c + ch) * kh + y) * kw + x)];
  return out;
}

TEST_F(GpuTest, QLinearConvOnIntegerTensorCoresMatchesTheReferenceBytes) {
  std::mt19937 rng(81);
  struct ConvCase {
    int64_t n, c, h, w, m, k, stride, pad, dilation;
    uint8_t x_zero, y_zero;
    bool bias;
  };
  const ConvCase cases[] = {
      {1, 3, 31, 29, 7, 3, 2, 1, 1, 117, 3, true},      // a stem: 3 channels (byte path), odd sizes, strided
      {2, 32, 9, 11, 70, 3, 1, 1, 1, 0, 0, true},       // batch 2, filters past one tile, zero point 0
      {1, 48, 7, 7, 130, 1, 1, 0, 1, 9, 128, false},    // 1x1, no bias
      {1, 16, 13, 13, 33, 3, 1, 2, 2, 200, 17, true},   // dilated, padding reads the zero point
      {1, 256, 7, 7, 96, 3, 1, 1, 1, 31, 64, true},     // long reduction (2304): many split tactics
      {1, 20, 6, 5, 8, 5, 2, 2, 1, 64, 0, true},        // 20 channels: not a multiple of 16 (byte path)
  };
  for (const ConvCase& k : cases) {
    const int64_t reduction = k.c * k.k * k.k;
    const HostTensor w = random_bytes(EDGERT_DTYPE_INT8, {k.m, k.c, k.k, k.k}, rng);
    std::vector<float> w_scales(static_cast<size_t>(k.m));
    std::uniform_real_distribution<float> spread(0.5f, 1.5f);
    for (float& s : w_scales) s = 0.004f * spread(rng);
    const float x_scale = 0.021f;
    // Sums of `reduction` products of bytes about 74 x 73 apart: outputs spread over the range.
    const float y_scale = x_scale * 0.004f * 5400.f * std::sqrt(static_cast<float>(reduction)) / 60.f;
    CaseInput w_input = constant(w);
    w_input.keeps_layout = true;
    w_input.gpu_tensor = krsc(w);
    std::vector<CaseInput> inputs = {u8_input({k.n, k.c, k.h, k.w}, rng), scale(x_scale), zero_point(k.x_zero), w_input,
                                     fixed(HostTensor::floats({k.m}, w_scales)),
                                     fixed(bytes(EDGERT_DTYPE_INT8, {k.m}, std::vector<uint8_t>(k.m, 0))),
                                     scale(y_scale), zero_point(k.y_zero)};
    if (k.bias) {
      std::vector<int32_t> bias(static_cast<size_t>(k.m));
      std::uniform_int_distribution<int32_t> b(-20000, 20000);
      for (int32_t& v : bias) v = b(rng);
      inputs.push_back(fixed(HostTensor::int32s({k.m}, bias)));
    }
    NodeSpec attributes = NodeSpec()
                              .ints("kernel_shape", {k.k, k.k})
                              .ints("strides", {k.stride, k.stride})
                              .ints("pads", {k.pad, k.pad, k.pad, k.pad})
                              .ints("dilations", {k.dilation, k.dilation});
    const std::string label = "qlinear conv " + std::to_string(k.c) + "->" + std::to_string(k.m) + " k" +
                              std::to_string(k.k) + " s" + std::to_string(k.stride) + " d" +
                              std::to_string(k.dilation) + " zx" + std::to_string(k.x_zero);
    run_case(int8_case("QLinearConv", "", inputs, attributes, 10, label, true));
    inputs[3].gpu_tensor = HostTensor{EDGERT_DTYPE_UNDEFINED, {}, {}};  // NCHW: the ONNX weights as they are
    run_case(int8_case("QLinearConv", "", inputs, attributes, 10, label, false));
  }
}

TEST_F(GpuTest, QuantizeAndDequantizeLinearMatchTheReference) {
  std::mt19937 rng(82);
  for (bool nhwc : {false, true}) {
    // Values past both ends of the range saturate; halves of the scale test round-half-to-even.
    HostTensor x = HostTensor::random({2, 5, 7, 9}, rng, -3.f, 4.f);
    for (int i = 0; i < 8; ++i) reinterpret_cast<float*>(x.bytes.data())[i] = 0.025f * static_cast<float>(2 * i + 1);
    GpuCase q = int8_case("QuantizeLinear", "", {input(x), scale(0.025f), zero_point(101)}, NodeSpec(), 13, "quantize", nhwc);
    run_case(q);
    q.dtype = EDGERT_DTYPE_FLOAT16;  // a float16 producer's tensor
    run_case(q);
    if (nhwc) {  // the engine's NCHW input quantized into channels-last bytes
      GpuCase into = int8_case("QuantizeLinear", "", {input(x), scale(0.025f), zero_point(101)},
                               NodeSpec().string("input_layout", "NCHW"), 13, "quantize NCHW into", true);
      into.inputs[0].keeps_layout = true;
      run_case(into);
    }
    run_case(int8_case("DequantizeLinear", "", {u8_input({3, 4, 5, 11}, rng), scale(0.037f), zero_point(77)},
                       NodeSpec(), 13, "dequantize", nhwc));
  }
}

std::vector<CaseInput> binary_inputs(HostTensor a, HostTensor b) {
  return {input(std::move(a)), scale(0.031f), zero_point(120), input(std::move(b)), scale(0.017f), zero_point(3),
          scale(0.043f), zero_point(90)};
}

TEST_F(GpuTest, QLinearAddAndMulMatchTheReference) {
  std::mt19937 rng(83);
  const Dims full = {2, 19, 5, 7}, channel = {2, 19, 1, 1};
  for (bool nhwc : {false, true})
    for (const char* op : {"QLinearAdd", "QLinearMul"}) {
      run_case(int8_case(op, "com.microsoft", binary_inputs(random_bytes(EDGERT_DTYPE_UINT8, full, rng),
                                                            random_bytes(EDGERT_DTYPE_UINT8, full, rng)),
                         NodeSpec(), 1, std::string(op) + " same shape", nhwc));
      run_case(int8_case(op, "com.microsoft", binary_inputs(random_bytes(EDGERT_DTYPE_UINT8, full, rng),
                                                            random_bytes(EDGERT_DTYPE_UINT8, channel, rng)),
                         NodeSpec(), 1, std::string(op) + " per-channel B", nhwc));
      run_case(int8_case(op, "com.microsoft", binary_inputs(random_bytes(EDGERT_DTYPE_UINT8, channel, rng),
                                                            random_bytes(EDGERT_DTYPE_UINT8, full, rng)),
                         NodeSpec(), 1, std::string(op) + " per-channel A", nhwc));
    }
}

TEST_F(GpuTest, QLinearGlobalAveragePoolLookupAndBytePoolingMatchTheReference) {
  std::mt19937 rng(84);
  for (bool nhwc : {false, true}) {
    run_case(int8_case("QLinearGlobalAveragePool", "com.microsoft",
                       {u8_input({3, 37, 7, 9}, rng), scale(0.05f), zero_point(12), scale(0.02f), zero_point(5)},
                       NodeSpec().integer("channels_last", 0), 1, "qlinear global average pool", nhwc));
    run_case(int8_case("QLookup", "edgert",
                       {u8_input({2, 6, 5, 3}, rng), constant(random_bytes(EDGERT_DTYPE_UINT8, {256}, rng))},
                       NodeSpec(), 1, "qlookup", nhwc));
    run_case(int8_case("MaxPool", "", {u8_input({2, 9, 13, 11}, rng)},
                       NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}), 12,
                       "max pool uint8", nhwc));
    // 32 channels: channels-last takes the 4-byte path
    run_case(int8_case("MaxPool", "", {u8_input({2, 32, 15, 13}, rng)},
                       NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}), 12,
                       "max pool uint8 32 channels", nhwc));
    run_case(int8_case("QLinearGlobalAveragePool", "com.microsoft",
                       {u8_input({2, 2048, 7, 7}, rng), scale(0.05f), zero_point(0), scale(0.03f), zero_point(0)},
                       NodeSpec().integer("channels_last", 0), 1, "qlinear global average pool 2048 channels", nhwc));
  }
}

}  // namespace
}  // namespace edgert::gpu_test
