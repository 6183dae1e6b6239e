// The CUDA plugin's library-backed kernels against the CPU reference (gpu_test_support.h):
// cuDNN convolutions (dense, grouped, strided, dilated, 1x1; FusedConv with bias, ReLU and a
// residual in cuDNN's fused call, and other activations in the epilogue kernel) and cuBLASLt
// products (Gemm with transposes, alpha, beta and C as a vector, a matrix or broadcast; batched MatMul;
// FusedGemm and FusedMatMul with bias and activations). Every tactic the kernel lists runs
// (each cuDNN algorithm that takes the shape, each cuBLASLt heuristic algorithm), in float32
// and float16, on awkward sizes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"

namespace edgert::gpu_test {
namespace {

GpuCase make(const std::string& op, std::vector<CaseInput> inputs, NodeSpec attributes, const std::string& label) {
  GpuCase c = make_case(op, std::move(inputs), std::move(attributes), 13);
  c.label = label;
  // Library kernels reassociate sums (Winograd, FFT, split-K): looser than element-wise ones.
  c.atol = c.rtol = 1e-4;
  return c;
}

void run_both(GpuCase c) { run_float32_and_float16(std::move(c)); }

CaseInput weights(HostTensor t) {
  CaseInput c = constant(std::move(t));
  c.keeps_layout = true;
  return c;
}

TEST_F(GpuTest, DenseAndGroupedConvolutions) {
  std::mt19937 rng(21);
  struct ConvCase {
    int64_t n, c, h, w, m, k, stride, pad, dilation, group;
    bool bias;
  };
  const ConvCase cases[] = {
      {1, 3, 31, 29, 7, 3, 1, 1, 1, 1, true},   // a stem: 3 channels, odd sizes
      {3, 13, 9, 9, 17, 3, 2, 1, 1, 1, false},  // strided, batch 3, no bias
      {1, 16, 12, 10, 8, 1, 1, 0, 1, 1, true},  // pointwise
      {2, 12, 11, 11, 18, 3, 1, 2, 2, 2, true}, // dilated, two groups
      {1, 8, 7, 9, 5, 5, 2, 2, 1, 1, true},     // 5x5 strided
  };
  for (const ConvCase& k : cases) {
    std::vector<CaseInput> inputs = {input(HostTensor::random({k.n, k.c, k.h, k.w}, rng)),
                                     weights(HostTensor::random({k.m, k.c / k.group, k.k, k.k}, rng))};
    if (k.bias) inputs.push_back(constant(HostTensor::random({k.m}, rng)));
    NodeSpec attributes = NodeSpec()
                              .ints("kernel_shape", {k.k, k.k})
                              .ints("strides", {k.stride, k.stride})
                              .ints("pads", {k.pad, k.pad, k.pad, k.pad})
                              .ints("dilations", {k.dilation, k.dilation})
                              .integer("group", k.group);
    run_both(make("Conv", inputs, attributes,
                  "conv " + std::to_string(k.c) + "->" + std::to_string(k.m) + " k" + std::to_string(k.k) + " s" +
                      std::to_string(k.stride) + " g" + std::to_string(k.group)));
  }
}

TEST_F(GpuTest, FusedConvolutionWithBiasActivationAndResidual) {
  std::mt19937 rng(22);
  for (const char* activation : {"", "Relu", "Clip", "HardSwish"}) {
    NodeSpec attributes = NodeSpec().ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}).string("activation", activation);
    if (std::string(activation) == "Clip") attributes.floats("activation_params", {0.0f, 6.0f});
    for (bool residual : {false, true}) {
      std::vector<CaseInput> inputs = {input(HostTensor::random({2, 11, 9, 13}, rng)),
                                       weights(HostTensor::random({14, 11, 3, 3}, rng)),
                                       constant(HostTensor::random({14}, rng))};
      if (residual) inputs.push_back(input(HostTensor::random({2, 14, 9, 13}, rng)));
      GpuCase c = make("FusedConv", inputs, attributes,
                       std::string("fused conv ") + (*activation ? activation : "no activation") +
                           (residual ? " + residual" : ""));
      c.domain = "edgert";
      run_both(c);
    }
  }
}

// Deep, narrow layers (a late ResNet stage at batch 1) list our implicit GEMM with its
// reduction split into slices; every slice count runs against the reference, in both layouts
// (channels-last weights [M, KH, KW, C]), with bias, ReLU and a residual fused.
TEST_F(GpuTest, ImplicitGemmWithSplitReductions) {
  std::mt19937 rng(26);
  struct SplitCase {
    int64_t n, c, h, w, m, k, stride, pad;
  };
  const SplitCase cases[] = {
      {1, 67, 9, 9, 70, 3, 1, 1},   // 603-long reduction, 81 pixels: slices up to 16
      {2, 40, 8, 6, 33, 3, 2, 1},   // strided, batch 2
      {1, 150, 5, 7, 9, 1, 1, 0},   // pointwise, few filters
  };
  for (const SplitCase& k : cases) {
    for (bool nhwc : {false, true}) {
      HostTensor w = HostTensor::random({k.m, k.c, k.k, k.k}, rng);
      CaseInput w_input = weights(w);
      if (nhwc) {
        w_input.gpu_tensor = w.nchw_to_nhwc();
        w_input.gpu_tensor.dims = {k.m, k.k, k.k, k.c};
      }
      const int64_t out_h = (k.h + 2 * k.pad - k.k) / k.stride + 1, out_w = (k.w + 2 * k.pad - k.k) / k.stride + 1;
      std::vector<CaseInput> inputs = {input(HostTensor::random({k.n, k.c, k.h, k.w}, rng)), w_input,
                                       constant(HostTensor::random({k.m}, rng)),
                                       input(HostTensor::random({k.n, k.m, out_h, out_w}, rng))};
      NodeSpec attributes = NodeSpec()
                                .ints("kernel_shape", {k.k, k.k})
                                .ints("strides", {k.stride, k.stride})
                                .ints("pads", {k.pad, k.pad, k.pad, k.pad})
                                .string("activation", "Relu");
      GpuCase c = make("FusedConv", inputs, attributes,
                       std::string(nhwc ? "NHWC" : "NCHW") + " conv " + std::to_string(k.c) + "->" +
                           std::to_string(k.m) + " k" + std::to_string(k.k) + " + residual");
      c.domain = "edgert";
      c.nhwc = nhwc;
      c.half_rtol = 1e-2;  // reductions of up to 603 float16 products
      run_both(c);
    }
  }
}

// Channels-last 1x1 convolutions also run as cuBLASLt products (bias, ReLU and the residual in
// its epilogue, other activations after): weights [M, 1, 1, C].
TEST_F(GpuTest, ChannelsLastPointwiseConvolutionsAsProducts) {
  std::mt19937 rng(25);
  for (const char* activation : {"", "Relu", "Clip"}) {
    for (bool residual : {false, true}) {
      HostTensor w = HostTensor::random({19, 13, 1, 1}, rng);
      CaseInput w_input = constant(w);
      w_input.keeps_layout = true;
      w_input.gpu_tensor = w;
      w_input.gpu_tensor.dims = {19, 1, 1, 13};  // [M, C, 1, 1] and [M, 1, 1, C] hold the same bytes
      std::vector<CaseInput> inputs = {input(HostTensor::random({2, 13, 7, 9}, rng)), w_input,
                                       constant(HostTensor::random({19}, rng))};
      if (residual) inputs.push_back(input(HostTensor::random({2, 19, 7, 9}, rng)));
      NodeSpec attributes = NodeSpec().ints("kernel_shape", {1, 1}).string("activation", activation);
      if (std::string(activation) == "Clip") attributes.floats("activation_params", {0.0f, 6.0f});
      GpuCase c = make("FusedConv", inputs, attributes,
                       std::string("NHWC 1x1 ") + (*activation ? activation : "linear") + (residual ? " + residual" : ""));
      c.domain = "edgert";
      c.nhwc = true;
      run_both(c);
    }
  }
}

TEST_F(GpuTest, GemmTransposesScalesAndAddends) {
  std::mt19937 rng(23);
  struct GemmCase {
    int64_t m, k, n;
    bool trans_a, trans_b;
    float alpha, beta;
    int addend;  // 0 none, 1 vector [N], 2 matrix [M, N], 3 scalar [], 4 column [M, 1], 5 row [1, N], 6 [1]
  };
  const GemmCase cases[] = {
      {1, 1280, 1000, false, true, 1.0f, 1.0f, 1},  // a classifier head
      {3, 37, 29, false, false, 1.0f, 1.0f, 1},
      {7, 33, 17, true, true, 0.5f, 1.0f, 0},
      {5, 19, 23, true, false, 1.0f, 0.25f, 2},
      // C broadcast by the fill kernel before the product adds into it
      {6, 21, 11, false, true, 1.0f, 1.0f, 3},
      {9, 17, 13, false, false, 0.5f, 0.35f, 4},
      {3, 5, 7, true, true, 1.0f, 0.5f, 5},
      {4, 8, 5, false, false, 1.0f, 1.0f, 6},
  };
  for (const GemmCase& k : cases) {
    std::vector<CaseInput> inputs = {input(HostTensor::random(k.trans_a ? Dims{k.k, k.m} : Dims{k.m, k.k}, rng)),
                                     constant(HostTensor::random(k.trans_b ? Dims{k.n, k.k} : Dims{k.k, k.n}, rng))};
    if (k.addend == 1) inputs.push_back(constant(HostTensor::random({k.n}, rng)));
    if (k.addend == 2) inputs.push_back(input(HostTensor::random({k.m, k.n}, rng)));
    if (k.addend == 3) inputs.push_back(constant(HostTensor::random({}, rng)));
    if (k.addend == 4) inputs.push_back(input(HostTensor::random({k.m, 1}, rng)));
    if (k.addend == 5) inputs.push_back(constant(HostTensor::random({1, k.n}, rng)));
    if (k.addend == 6) inputs.push_back(constant(HostTensor::random({1}, rng)));
    NodeSpec attributes = NodeSpec()
                              .integer("transA", k.trans_a)
                              .integer("transB", k.trans_b)
                              .real("alpha", k.alpha)
                              .real("beta", k.beta);
    GpuCase c = make("Gemm", inputs, attributes,
                     "gemm " + std::to_string(k.m) + "x" + std::to_string(k.k) + "x" + std::to_string(k.n));
    c.half_rtol = 2e-2;  // K up to 1280 float16 products
    run_both(c);
  }
}

TEST_F(GpuTest, BatchedMatMulAndFusedProducts) {
  std::mt19937 rng(24);
  run_both(make("MatMul", {input(HostTensor::random({2, 3, 5, 19}, rng)), constant(HostTensor::random({19, 11}, rng))},
                NodeSpec(), "matmul batched A, 2-D B"));
  run_both(make("MatMul", {input(HostTensor::random({4, 7, 13}, rng)), input(HostTensor::random({4, 13, 9}, rng))},
                NodeSpec(), "matmul equal batches"));
  for (const char* activation : {"Relu", "Gelu"}) {
    GpuCase m = make("FusedMatMul",
                     {input(HostTensor::random({3, 9, 21}, rng)), constant(HostTensor::random({21, 16}, rng)),
                      constant(HostTensor::random({16}, rng))},
                     NodeSpec().string("activation", activation).floats("activation_params", {0.0f}),
                     std::string("fused matmul + bias + ") + activation);
    m.domain = "edgert";
    run_both(m);
    GpuCase g = make("FusedGemm",
                     {input(HostTensor::random({6, 40}, rng)), constant(HostTensor::random({40, 24}, rng)),
                      constant(HostTensor::random({24}, rng))},
                     NodeSpec().string("activation", activation).floats("activation_params", {0.0f}),
                     std::string("fused gemm + ") + activation);
    g.domain = "edgert";
    run_both(g);
  }
  // A transformer block's residual (input 3) added as cuBLASLt's C: beside the bias vector of a
  // FusedMatMul, and into a FusedGemm whose residual has other dims of the same element count
  // (the [L, B, E] stream beside the [L*B, E] product).
  for (const char* activation : {"", "Relu"}) {
    GpuCase m = make("FusedMatMul",
                     {input(HostTensor::random({3, 9, 21}, rng)), constant(HostTensor::random({21, 16}, rng)),
                      constant(HostTensor::random({16}, rng)), input(HostTensor::random({3, 9, 16}, rng))},
                     NodeSpec().string("activation", activation).floats("activation_params", {}),
                     std::string("fused matmul + bias + residual") + (*activation ? " + " : "") + activation);
    m.domain = "edgert";
    run_both(m);
  }
  GpuCase g = make("FusedGemm",
                   {input(HostTensor::random({6, 40}, rng)), constant(HostTensor::random({24, 40}, rng)),
                    constant(HostTensor::random({24}, rng)), input(HostTensor::random({3, 2, 24}, rng))},
                   NodeSpec().integer("transB", 1).string("activation", "").floats("activation_params", {}),
                   "fused gemm + C vector + residual [3, 2, 24]");
  g.domain = "edgert";
  run_both(g);
}

}  // namespace
}  // namespace edgert::gpu_test
