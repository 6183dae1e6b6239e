// Timings of the CUDA plugin's own kernels on the shapes that dominate MobileNet-class models,
// each with the bytes it must move at least and the bandwidth that makes: a kernel far below the
// card's bandwidth is the one to improve. Not a test (no ctest entry); run on the GPU machine:
//   edgert_gpu_bench [--gtest_filter=...]
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "gpu_test_support.h"

namespace edgert::gpu_test {
namespace {

struct Bench {
  GpuCase c;
  double bytes_per_element_f32;  // for the bandwidth figure: the minimum bytes moved, float32
  int64_t elements;              // output elements (the figure scales with them)
};

void report(Bench b) {
  for (edgert_dtype dtype : {EDGERT_DTYPE_FLOAT32, EDGERT_DTYPE_FLOAT16}) {
    b.c.dtype = dtype;
    const double us = time_cuda_kernel(b.c, 200);
    if (us < 0) continue;
    const double bytes = b.bytes_per_element_f32 * static_cast<double>(b.elements) * (dtype == EDGERT_DTYPE_FLOAT16 ? 0.5 : 1.0);
    std::printf("%-60s %-4s %-4s %9.2f us %8.1f GB/s\n", (b.c.op_type + " " + b.c.label).c_str(),
                dtype == EDGERT_DTYPE_FLOAT16 ? "f16" : "f32", b.c.nhwc ? "nhwc" : "nchw", us, bytes / us / 1e3);
  }
}

void both_layouts(Bench b) {
  report(b);
  b.c.nhwc = true;
  report(b);
}

GpuCase make(const std::string& op, std::vector<CaseInput> inputs, NodeSpec attributes, const std::string& label,
             int32_t opset = 17) {
  GpuCase c;
  c.op_type = op;
  c.inputs = std::move(inputs);
  c.attributes = std::move(attributes);
  c.opset = opset;
  c.label = label;
  return c;
}

class GpuBench : public GpuTest {};

TEST_F(GpuBench, MobileNetShapes) {
  std::mt19937 rng(1);
  // Depthwise 3x3 (stride 1 and 2) with bias and ReLU6, as FusedConv.
  struct Dw {
    int64_t c, hw, stride;
  };
  for (const Dw& d : {Dw{32, 112, 1}, Dw{144, 56, 1}, Dw{96, 112, 2}, Dw{192, 28, 1}, Dw{576, 14, 1}, Dw{960, 7, 1}}) {
    const int64_t out = (d.hw + 2 - 3) / d.stride + 1;
    CaseInput w = constant(HostTensor::random({d.c, 1, 3, 3}, rng));
    w.keeps_layout = true;
    GpuCase c = make("FusedConv",
                     {input(HostTensor::random({1, d.c, d.hw, d.hw}, rng)), w, constant(HostTensor::random({d.c}, rng))},
                     NodeSpec()
                         .integer("group", d.c)
                         .ints("kernel_shape", {3, 3})
                         .ints("strides", {d.stride, d.stride})
                         .ints("pads", {1, 1, 1, 1})
                         .string("activation", "Clip")
                         .floats("activation_params", {0, 6}),
                     "depthwise c" + std::to_string(d.c) + " " + std::to_string(d.hw) + " s" + std::to_string(d.stride), 13);
    c.domain = "edgert";
    const double in_per_out = static_cast<double>(d.hw * d.hw) / static_cast<double>(out * out);
    both_layouts({c, 4.0 * (1 + in_per_out), d.c * out * out});
  }
  const Dims act = {1, 144, 56, 56};
  const int64_t n = 144 * 56 * 56;
  both_layouts({make("Add", {input(HostTensor::random(act, rng)), input(HostTensor::random(act, rng))}, {}, "residual 144x56x56"), 12, n});
  both_layouts({make("Mul", {input(HostTensor::random(act, rng)), input(HostTensor::random({1, 144, 1, 1}, rng))}, {}, "channel scale 144x56x56"), 8, n});
  report({make("Add", {input(HostTensor::random(act, rng)), constant(HostTensor::random({144, 1, 1}, rng))}, {}, "bias [144,1,1] 144x56x56"), 8, n});
  report({make("Clip", {input(HostTensor::random(act, rng))}, NodeSpec().real("min", 0).real("max", 6), "relu6 144x56x56", 6), 8, n});
  report({make("HardSwish", {input(HostTensor::random(act, rng))}, {}, "144x56x56"), 8, n});
  both_layouts({make("GlobalAveragePool", {input(HostTensor::random({1, 1280, 7, 7}, rng))}, {}, "1280x7x7"), 4.0 * 49, 1280});
  both_layouts({make("ReduceMean", {input(HostTensor::random({1, 960, 14, 14}, rng))}, NodeSpec().ints("axes", {2, 3}), "960x14x14 over HW", 13), 4.0 * 196, 960});
  both_layouts({make("MaxPool", {input(HostTensor::random({1, 64, 112, 112}, rng))},
                     NodeSpec().ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}), "64x112x112 3x3 s2"),
                4.0 * 5, 64 * 56 * 56});
  report({make("Softmax", {input(HostTensor::random({64, 1000}, rng))}, {}, "64x1000", 13), 8, 64000});
  report({make("Softmax", {input(HostTensor::random({1, 21, 128, 128}, rng))}, NodeSpec().integer("axis", 1), "21x128x128 over C", 13), 8, 21 * 128 * 128});
  report({make("Transpose", {input(HostTensor::random(act, rng))}, NodeSpec().ints("perm", {0, 2, 3, 1}), "144x56x56 to NHWC"), 8, n});
  both_layouts({make("Concat", {input(HostTensor::random({1, 64, 56, 56}, rng)), input(HostTensor::random({1, 80, 56, 56}, rng))},
                     NodeSpec().integer("axis", 1), "64+80 x56x56 on C"), 8, n});
  both_layouts({make("Resize", {input(HostTensor::random({1, 64, 64, 64}, rng)), absent(), fixed(HostTensor::floats({4}, {1, 1, 2, 2}))},
                     NodeSpec().string("mode", "linear"), "64x64x64 bilinear x2", 13),
                5, 64 * 128 * 128});
  both_layouts({make("BatchNormalization",
                     {input(HostTensor::random(act, rng)), constant(HostTensor::random({144}, rng)), constant(HostTensor::random({144}, rng)),
                      constant(HostTensor::random({144}, rng)), constant(HostTensor::random({144}, rng, 0.5f, 2))},
                     {}, "144x56x56", 15),
                8, n});
  report({make("LayerNormalization", {input(HostTensor::random({197, 768}, rng)), constant(HostTensor::random({768}, rng)), constant(HostTensor::random({768}, rng))},
               NodeSpec().integer("axis", -1), "197x768"),
          8, 197 * 768});
}

// edgert.FusedAttention on the transformers' shapes: FLOP/s of its two products (4 L S D per batch
// matrix), the figure a flash-style kernel is judged by.
TEST_F(GpuBench, AttentionShapes) {
  std::mt19937 rng(2);
  struct Shape {
    const char* label;
    Dims q, k, v, mask;  // K as [..., S, D] (keys_transposed 0), as the fusion reads it
    std::vector<std::pair<const char*, std::vector<int64_t>>> perms = {};  // operands read through Transposes, Gathers
  };
  const Shape shapes[] = {
      {"vit_b_16 12 heads 197x64", {12, 197, 64}, {12, 197, 64}, {12, 197, 64}, {}},
      {"vit_b_16 heads read through [L, B, H, D]", {197, 1, 12, 64}, {197, 1, 12, 64}, {197, 1, 12, 64}, {},
       {{"q_perm", {1, 2, 0, 3}}, {"k_perm", {1, 2, 0, 3}}, {"v_perm", {1, 2, 0, 3}}, {"y_perm", {2, 0, 1, 3}}}},
      {"vit_b_16 heads read from the packed projection [L, B, 3, H, D]", {197, 1, 3, 12, 64}, {197, 1, 3, 12, 64},
       {197, 1, 3, 12, 64}, {},
       {{"q_select", {2, 0}}, {"k_select", {2, 1}}, {"v_select", {2, 2}}, {"q_perm", {1, 2, 0, 3}},
        {"k_perm", {1, 2, 0, 3}}, {"v_perm", {1, 2, 0, 3}}, {"y_perm", {2, 0, 1, 3}}}},
      {"swin_t stage 1 64 windows 3 heads 49x32 masked", {64, 3, 49, 32}, {64, 3, 49, 32}, {64, 3, 49, 32}, {64, 1, 49, 49}},
      {"swin_t stage 3 4 windows 12 heads 49x32", {4, 12, 49, 32}, {4, 12, 49, 32}, {4, 12, 49, 32}, {}},
      {"bert batch 2 8 heads 128x64 padding mask", {2, 8, 128, 64}, {2, 8, 128, 64}, {2, 8, 128, 64}, {2, 1, 1, 128}},
      {"1 head 1024x64", {1, 1024, 64}, {1, 1024, 64}, {1, 1024, 64}, {}},
  };
  for (const Shape& s : shapes) {
    std::vector<CaseInput> inputs = {input(HostTensor::random(s.q, rng)), input(HostTensor::random(s.k, rng)),
                                     input(HostTensor::random(s.v, rng))};
    if (!s.mask.empty()) inputs.push_back(input(HostTensor::random(s.mask, rng)));
    NodeSpec spec = NodeSpec().real("q_scale", 0.125f).integer("keys_transposed", 0);
    for (const auto& [name, perm] : s.perms) spec.ints(name, perm);
    GpuCase c = make("FusedAttention", inputs, spec, s.label, 1);
    c.domain = "edgert";
    int64_t batches = 1;
    for (size_t i = 0; i + 1 < s.q.size(); ++i) batches *= s.q[i];
    const int64_t d = s.q.back(), l = s.perms.empty() ? s.q[s.q.size() - 2] : s.q[0], keys = s.perms.empty() ? s.k[s.k.size() - 2] : s.k[0];
    batches /= l;
    for (const auto& [name, pick] : s.perms)
      if (std::string(name) == "q_select") batches /= s.q[static_cast<size_t>(pick[0])];  // Q is one index of that axis
    const double flop = 4.0 * static_cast<double>(batches * l * keys * d);
    for (edgert_dtype dtype : {EDGERT_DTYPE_FLOAT32, EDGERT_DTYPE_FLOAT16}) {
      c.dtype = dtype;
      const double us = time_cuda_kernel(c, 200);
      if (us < 0) continue;
      std::printf("%-60s %-4s %9.2f us %8.2f TFLOP/s\n", ("FusedAttention " + std::string(s.label)).c_str(),
                  dtype == EDGERT_DTYPE_FLOAT16 ? "f16" : "f32", us, flop / us / 1e6);
    }
  }
}

}  // namespace
}  // namespace edgert::gpu_test
