// Every optimized INT8 tactic of the CPU plugin against its reference (tactic 0), bit for bit,
// through the plugin ABI as the builder and runtime use it: QLinearConv (dense, grouped,
// depthwise), QuantizeLinear, DequantizeLinear, com.microsoft QLinearAdd and
// QLinearGlobalAveragePool; and the reference MaxPool on uint8. Random inputs of awkward sizes
// (odd channel counts, K not a multiple of 4, pixel tails, padding on one side, stride 2,
// dilation, groups, batch 2, nonzero zero points, per-tensor and per-channel scales, results
// saturating at both ends of u8 and ties of the rounding), with 1 and 2 threads. What runs is
// what this CPU offers: the reference always, each tactic the plugin lists here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu_plugin_abi.h"

namespace edgert::test {
namespace {

const edgert_plugin& plugin() { return cpu_plugin_in(EDGERT_TEST_PLUGIN_DIR); }

bool cpu_has_vnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
bool cpu_has_avx512_bw() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

// Runs the reference and every listed tactic at 1 and 2 threads; each must give the reference's
// bytes. Returns the names of the optimized tactics that ran.
std::vector<std::string> check_all_tactics(const char* kernel, const NodeSpec& spec, const std::vector<Tensor>& inputs,
                                           const std::string& what) {
  const edgert_kernel& k = kernel_named(plugin(), kernel);
  const edgert_node node = spec.node();
  const std::vector<edgert_tactic> tactics = list_tactics(k, node, inputs);
  EXPECT_FALSE(tactics.empty());
  EXPECT_EQ(tactics.back().id, 0) << what << ": the reference must come last";
  set_threads(plugin(), 1);
  const std::vector<uint8_t> reference = run_tactic(k, node, inputs, 0);
  std::vector<std::string> ran;
  for (const edgert_tactic& t : tactics) {
    if (t.id == 0) continue;
    ran.push_back(t.name);
    for (int threads : {1, 2}) {
      set_threads(plugin(), threads);
      const std::vector<uint8_t> got = run_tactic(k, node, inputs, t.id);
      EXPECT_EQ(got.size(), reference.size()) << what << " tactic " << t.name;
      if (got.size() != reference.size()) continue;
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != reference[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << what << ": tactic " << t.id << " (" << t.name << ") with " << threads << " thread(s): "
                         << bad << " of " << got.size() << " bytes differ; first at byte " << first << ": "
                         << int(got[first]) << " vs " << int(reference[first]);
    }
  }
  set_threads(plugin(), 0);
  return ran;
}

Tensor scalar_f32(float v) { return Tensor::of<float>(EDGERT_DTYPE_FLOAT32, {}, {v}, true); }
Tensor scalar_u8(int v) { return Tensor::of<uint8_t>(EDGERT_DTYPE_UINT8, {}, {static_cast<uint8_t>(v)}, true); }

struct QConvCase {
  int64_t batch, channels, out_channels, h, w, kh, kw, stride_h, stride_w;
  std::vector<int64_t> pads;  // top, left, bottom, right
  int64_t dilation, group;
  bool bias, per_channel;
  int x_zero_point;
  bool ties = false;  // multipliers of 0.5 and small weights: many results exactly halfway
};

std::string describe(const QConvCase& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "N%lld C%lld M%lld %lldx%lld k%lldx%lld s%lldx%lld pads %lld,%lld,%lld,%lld d%lld g%lld%s%s zx%d%s",
                (long long)c.batch, (long long)c.channels, (long long)c.out_channels, (long long)c.h, (long long)c.w,
                (long long)c.kh, (long long)c.kw, (long long)c.stride_h, (long long)c.stride_w, (long long)c.pads[0],
                (long long)c.pads[1], (long long)c.pads[2], (long long)c.pads[3], (long long)c.dilation,
                (long long)c.group, c.bias ? " bias" : "", c.per_channel ? " per-channel" : " per-tensor",
                c.x_zero_point, c.ties ? " ties" : "");
  return buf;
}

const std::vector<QConvCase>& qconv_cases() {
  static const std::vector<QConvCase> cases = {
      {1, 3, 5, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 128},        // 1x1, tiny, K 3
      {1, 17, 33, 13, 11, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, false, 7},     // 1x1, tails everywhere
      {2, 33, 40, 9, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, false, true, 0},       // 1x1, batch 2
      {1, 5, 17, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 200},       // 1x1 on 1x1
      {1, 64, 130, 20, 20, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 100},   // 400 pixels, 11 row panels
      {1, 24, 160, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 128},     // 49 pixels: rows split too
      {1, 17, 24, 13, 11, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, true, true, 9},      // 1x1 stride 2: im2col
      {1, 3, 16, 23, 19, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true, true, 128},     // stem 3x3 s2, K 27
      {1, 3, 8, 29, 29, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, true, false, 60},      // 7x7 s2
      {1, 17, 33, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, true, 250},    // 3x3 s1
      {2, 5, 7, 8, 9, 3, 3, 1, 1, {0, 1, 2, 0}, 1, 1, true, true, 3},          // pads on one side, batch 2
      {1, 6, 10, 11, 13, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 1, false, true, 128},    // dilation 2
      {1, 8, 12, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 2, true, true, 128},       // groups
      {1, 12, 12, 10, 10, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 3, true, false, 77},    // groups, stride 2
      {1, 300, 70, 5, 6, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, true, 128},     // K 2700
      {1, 3, 8, 9, 75, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true, true, 128},       // s2 rows of 38 across panels
      {1, 4, 9, 12, 35, 5, 5, 2, 2, {2, 1, 1, 2}, 1, 1, false, true, 31},      // 5x5 s2, uneven pads
      {1, 3, 12, 9, 130, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, true, true, 128},     // 65 wide s2: rows longer than a panel
      {1, 7, 7, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 7, true, true, 128},      // depthwise 3x3
      {2, 5, 5, 14, 12, 3, 3, 2, 2, {0, 0, 1, 1}, 1, 5, true, false, 19},      // depthwise s2, pads on one side
      {1, 33, 33, 9, 17, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 33, false, true, 128},   // depthwise 5x5
      {1, 17, 17, 15, 15, 5, 5, 2, 2, {2, 2, 2, 2}, 1, 17, true, true, 0},     // depthwise 5x5 s2
      {1, 4, 4, 7, 7, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 4, true, true, 128},        // depthwise dilated
      {1, 3, 3, 6, 150, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 3, true, true, 255},      // depthwise, rows of 64 + 64 + 22
      {1, 2, 2, 9, 169, 5, 5, 2, 2, {2, 1, 2, 2}, 1, 2, false, true, 128},     // depthwise 5x5 s2, 85 wide, odd pads
      {1, 2, 2, 8, 131, 3, 3, 2, 2, {0, 1, 1, 0}, 1, 2, true, true, 1},        // depthwise s2, pad left only
      {1, 3, 3, 17, 19, 7, 7, 1, 2, {3, 2, 3, 4}, 1, 3, true, true, 128},      // depthwise 7x7, strides 1 and 2
      {1, 9, 9, 11, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 9, true, true, 128, true},  // depthwise, ties
      {1, 19, 21, 9, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, true, 128, true}, // dense, ties
  };
  return cases;
}

std::vector<Tensor> qconv_inputs(const QConvCase& c, std::mt19937& rng) {
  const int64_t cg = c.channels / c.group, k = cg * c.kh * c.kw;
  std::vector<Tensor> in;
  in.push_back(Tensor::of(EDGERT_DTYPE_UINT8, {c.batch, c.channels, c.h, c.w},
                          random_values<uint8_t>(rng, c.batch * c.channels * c.h * c.w, 0, 255)));
  in.push_back(scalar_f32(c.ties ? 1.0f : 0.02f));
  in.push_back(scalar_u8(c.x_zero_point));
  const int64_t wn = c.out_channels * k;
  in.push_back(Tensor::of(EDGERT_DTYPE_INT8, {c.out_channels, cg, c.kh, c.kw},
                          random_values<int8_t>(rng, wn, c.ties ? -2 : -128, c.ties ? 2 : 127), true));
  const int64_t scales = c.per_channel ? c.out_channels : 1;
  std::vector<float> w_scale = random_values<float>(rng, scales, 0.005, 0.02);
  for (size_t i = 0; c.ties && i < w_scale.size(); ++i) w_scale[i] = i % 2 ? 0.25f : 0.5f;
  const std::vector<int64_t> scale_dims = c.per_channel ? std::vector<int64_t>{c.out_channels} : std::vector<int64_t>{};
  in.push_back(Tensor::of(EDGERT_DTYPE_FLOAT32, scale_dims, w_scale, true));
  in.push_back(Tensor::of(EDGERT_DTYPE_INT8, scale_dims, std::vector<int8_t>(static_cast<size_t>(scales), 0), true));
  // About 60 output steps per standard deviation of the sums: both ends of u8 are reached.
  // Ties: multipliers 1/32 and 1/64, so one sum in 32 or 64 lies exactly halfway.
  in.push_back(scalar_f32(c.ties ? 16.0f : 0.02f * std::sqrt(static_cast<float>(k))));
  in.push_back(scalar_u8(c.ties ? 128 : 100));
  if (c.bias)
    in.push_back(Tensor::of(EDGERT_DTYPE_INT32, {c.out_channels},
                            random_values<int32_t>(rng, c.out_channels, c.ties ? -50 : -20000, c.ties ? 50 : 20000),
                            true));
  return in;
}

NodeSpec qconv_node(const QConvCase& c) {
  NodeSpec spec("", "QLinearConv", c.bias ? 9 : 8);
  spec.ints("kernel_shape", {c.kh, c.kw})
      .ints("strides", {c.stride_h, c.stride_w})
      .ints("pads", {c.pads[0], c.pads[1], c.pads[2], c.pads[3]})
      .ints("dilations", {c.dilation, c.dilation})
      .integer("group", c.group);
  return spec;
}

TEST(CpuInt8Tactics, QLinearConvTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(2024);
  size_t dense = 0, depthwise = 0;
  for (const QConvCase& c : qconv_cases()) {
    const std::vector<std::string> ran =
        check_all_tactics("ref-qlinear-conv", qconv_node(c), qconv_inputs(c, rng), "QLinearConv " + describe(c));
    (c.group > 1 && c.group == c.channels ? depthwise : dense) += ran.size();
  }
  if (cpu_has_vnni()) {
    EXPECT_GT(dense, 0u) << "this CPU has AVX-512 VNNI, but no dense QLinearConv tactic ran";
  }
  if (cpu_has_avx512_bw()) {
    EXPECT_GT(depthwise, 0u) << "this CPU has AVX-512 BW, but no depthwise tactic ran";
  }
}

TEST(CpuInt8Tactics, QLinearConvListsNoTacticForAsymmetricWeights) {
  std::mt19937 rng(5);
  const QConvCase c = qconv_cases()[1];
  std::vector<Tensor> in = qconv_inputs(c, rng);
  in[5] = Tensor::of<int8_t>(EDGERT_DTYPE_INT8, {}, {3}, true);
  in[4] = scalar_f32(0.01f);
  const edgert_kernel& k = kernel_named(plugin(), "ref-qlinear-conv");
  const edgert_node node = qconv_node(c).node();
  for (const edgert_tactic& t : list_tactics(k, node, in)) EXPECT_EQ(t.id, 0) << t.name;
}

}  // namespace
}  // namespace edgert::test
