// Every optimized INT8 tactic of the CPU plugin against its reference (tactic 0), bit for bit,
// through the plugin ABI as the builder and runtime use it: QLinearConv (dense, grouped,
// depthwise), QuantizeLinear, DequantizeLinear, com.microsoft QLinearAdd, QLinearMul and
// QLinearGlobalAveragePool, edgert.QLookup; and MaxPool on uint8. Random inputs of awkward sizes
// (odd channel counts, K not a multiple of 4, pixel tails, padding on one side, stride 2,
// dilation, groups, batch 2, nonzero zero points, per-tensor and per-channel scales, results
// saturating at both ends of u8 and ties of the rounding), with 1 and 2 threads; and the INT8
// convolution's weights as an engine stores them (export_prepared). What runs is what this CPU
// offers: the reference always, each tactic the plugin lists here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu_plugin_abi.h"

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace edgert::test {
namespace {

const edgert_plugin& plugin() { return cpu_plugin_in(EDGERT_TEST_PLUGIN_DIR); }

// What this CPU offers. On aarch64: NEON tactics for the convolutions, the elementwise rows and
// the depthwise planes, and sdot GEMMs where the kernel reports asimddp.
bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
bool cpu_has_neon() {
#if defined(__aarch64__)
  return true;
#else
  return false;
#endif
}
bool cpu_has_dotprod() {
#if defined(__aarch64__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}
bool cpu_has_avx512_bw() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}
bool cpu_has_vnni() {
#if defined(__x86_64__)
  return cpu_has_avx512_bw() && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}
bool cpu_has_vbmi() {
#if defined(__x86_64__)
  return cpu_has_avx512_bw() && __builtin_cpu_supports("avx512vbmi");
#else
  return false;
#endif
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
      {2, 70, 37, 2, 2, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 90},       // 1x1 on 2x2, batch 2: GEMV
      {1, 1152, 48, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 128},    // SE reduce 1152 -> 48
      {1, 48, 1152, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, false, false, 0},    // SE expand 48 -> 1152
      {1, 3, 1, 1, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true, true, 255},        // one output channel, 3 pixels
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
      {2, 3, 3, 7, 40, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 3, true, true, 50},       // depthwise, 3 vectors a row
      {1, 5, 5, 6, 56, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 5, true, true, 128},      // depthwise, 4 vectors a row (56 wide)
      {1, 3, 3, 9, 121, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 3, true, false, 90},     // depthwise s2, 61 wide out
      {2, 6, 6, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 6, true, true, 128},        // depthwise 7x7: two rows a vector
      {1, 3, 3, 11, 5, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 3, false, true, 61},       // depthwise 5x5 on 11x5: 8 + 3 rows
      {1, 4, 4, 19, 16, 3, 3, 2, 2, {1, 0, 0, 1}, 1, 4, true, true, 140},      // depthwise s2 to 8 wide, 10 rows
      {1, 5, 5, 9, 33, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 5, true, false, 128},      // depthwise 5x5, 3 vectors a row
      {1, 4, 4, 14, 20, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 4, true, true, 128},      // depthwise, tiles of 7 rows x 2 vectors
      {1, 3, 3, 14, 24, 5, 5, 2, 2, {2, 2, 2, 2}, 1, 3, true, true, 17},       // depthwise 5x5 s2 to 7x12: 7 rows
      {2, 3, 3, 21, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 3, false, true, 128},      // depthwise, 3 tiles of 7 rows, 9 wide
      {1, 9, 9, 11, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 9, true, true, 128, true},  // depthwise, ties
      {1, 19, 21, 9, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, true, 128, true}, // dense, ties
      {1, 64, 30, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, true, 128},     // 3x3 on 7x7: runs across rows
      {2, 13, 25, 10, 41, 5, 5, 1, 1, {2, 1, 0, 3}, 1, 1, true, false, 66},    // 5x5, uneven pads, 41 wide
      {1, 9, 14, 12, 12, 3, 3, 1, 1, {0, 0, 0, 0}, 1, 1, false, true, 128},    // 3x3 without padding
      {1, 6, 13, 8, 19, 1, 3, 1, 1, {0, 1, 0, 1}, 1, 1, true, true, 4},        // 1x3
      {1, 5, 11, 17, 6, 3, 1, 1, 1, {1, 0, 1, 0}, 3, 1, true, true, 200},      // 3x1 dilated 3, 6 wide
      {1, 2, 3, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true, true, 128},        // 3x3 on 3x3, 2 channels
      {1, 9, 10, 15, 17, 3, 3, 2, 2, {1, 2, 0, 1}, 2, 1, true, true, 128},     // 3x3 s2 dilated 2, uneven pads
      {2, 6, 13, 16, 16, 4, 4, 2, 2, {1, 1, 2, 2}, 1, 1, true, false, 30},     // 4x4 s2 (even kernel), batch 2
      {1, 3, 20, 6, 4, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true, true, 128},       // s2 to 3x2
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

bool ran_named(const std::vector<std::string>& ran, const std::string& name) {
  return std::find(ran.begin(), ran.end(), name) != ran.end();
}

// The row ops (fast/qlinear_rows.h) name a tactic PREFIX-ISA for each instruction set: every one
// this CPU has must have run.
void expect_row_families_ran(const std::vector<std::string>& ran, const std::string& prefix) {
  const std::pair<bool, const char*> families[] = {
      {cpu_has_avx512_bw(), "avx512"}, {cpu_has_avx2(), "avx2"}, {cpu_has_neon(), "neon"}};
  for (const auto& [available, isa] : families) {
    if (available) {
      EXPECT_TRUE(ran_named(ran, prefix + "-" + isa)) << prefix << "-" << isa << " did not run";
    }
  }
}

TEST(CpuInt8Tactics, QLinearConvTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(2024);
  size_t dense = 0, depthwise = 0;
  std::vector<std::string> all;
  for (const QConvCase& c : qconv_cases()) {
    const std::vector<std::string> ran =
        check_all_tactics("ref-qlinear-conv", qconv_node(c), qconv_inputs(c, rng), "QLinearConv " + describe(c));
    (c.group > 1 && c.group == c.channels ? depthwise : dense) += ran.size();
    all.insert(all.end(), ran.begin(), ran.end());
  }
  if (cpu_has_vnni()) {
    EXPECT_GT(dense, 0u) << "this CPU has AVX-512 VNNI, but no dense QLinearConv tactic ran";
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-shifted-gemm-12x32-avx512vnni"));
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-1x1-gemv-16-avx512vnni"));
    if (cpu_has_vbmi()) EXPECT_TRUE(ran_named(all, "u8s8-qconv-dw-vnni-16-avx512vbmi"));
  }
  if (cpu_has_avx512_bw()) {
    EXPECT_GT(depthwise, 0u) << "this CPU has AVX-512 BW, but no depthwise tactic ran";
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-dw-direct-16-avx512"));
  }
  // The float-sum depthwise planes below AVX-512.
  if (cpu_has_avx2()) {
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-dw-direct-8-avx2"));
  }
  if (cpu_has_neon()) {
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-dw-direct-4-neon"));
  }
  // The GEMM families below AVX-512 (boards without VNNI): both their tactics ran.
  const std::pair<bool, const char*> families[] = {{cpu_has_avx2(), "12x3-avx2"},
                                                   {cpu_has_neon(), "12x8-neon"},
                                                   {cpu_has_dotprod(), "12x8-dotprod"}};
  for (const auto& [available, tile] : families) {
    if (!available) continue;
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-1x1-gemm-" + std::string(tile))) << tile;
    EXPECT_TRUE(ran_named(all, "u8s8-qconv-im2col-gemm-" + std::string(tile))) << tile;
  }
  if (!cpu_has_dotprod()) {
    for (const std::string& name : all) EXPECT_EQ(name.find("dotprod"), std::string::npos) << name;
  }
}

// What export_prepared gives for a node at a tactic, in a 64-byte aligned buffer as an engine
// maps it (empty when the kernel exports nothing), and the inputs it says the bytes replace.
PreparedBytes export_state(const edgert_kernel& k, const edgert_node& node, const std::vector<Tensor>& inputs,
                           int64_t tactic) {
  std::vector<edgert_tensor> views;
  for (const Tensor& t : inputs) views.push_back(t.view(t.constant));
  return export_prepared_bytes(k, node, views, tactic);
}

// The weights an engine stores for the INT8 convolution (export_prepared): prepared from them the
// tactic gives the reference's bytes, and with W overwritten when they say they replace it.
TEST(CpuInt8Tactics, QLinearConvStoredWeightsGiveTheSameBytes) {
  std::mt19937 rng(77);
  const edgert_kernel& k = kernel_named(plugin(), "ref-qlinear-conv");
  size_t stored = 0;
  for (const QConvCase& c : qconv_cases()) {
    const std::string what = "QLinearConv " + describe(c);
    const std::vector<Tensor> inputs = qconv_inputs(c, rng);
    const NodeSpec spec = qconv_node(c);  // owns what the node points to
    const edgert_node node = spec.node();
    const std::vector<uint8_t> reference = run_tactic(k, node, inputs, 0);
    for (const edgert_tactic& t : list_tactics(k, node, inputs)) {
      if (t.id == 0) continue;
      const PreparedBytes bytes = export_state(k, node, inputs, t.id);
      if (bytes.size == 0) continue;
      ++stored;
      edgert_node with_state = node;
      with_state.prepared = bytes.data.get();
      with_state.prepared_bytes = bytes.size;
      EXPECT_EQ(run_tactic(k, with_state, inputs, t.id), reference) << what << ": tactic " << t.name;
      EXPECT_EQ(bytes.replaced_inputs, uint64_t{1} << 3) << what << ": tactic " << t.name << " should replace W";
      if (!((bytes.replaced_inputs >> 3) & 1u)) continue;
      std::vector<Tensor> overwritten = inputs;
      for (uint8_t& b : overwritten[3].bytes) b = static_cast<uint8_t>(b * 7 + 1);
      EXPECT_EQ(run_tactic(k, with_state, overwritten, t.id), reference)
          << what << ": tactic " << t.name << " reads W though its stored state replaces it";
    }
  }
  if (cpu_has_vnni() || cpu_has_avx2() || cpu_has_neon()) {
    EXPECT_GT(stored, 0u) << "this CPU has a qgemm family, but no INT8 tactic exported its weights";
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

// Floats around the u8 range of scale 0.05 and zero point 37: exact ties (k + 0.5 steps),
// values past both ends, infinities and NaN.
std::vector<float> awkward_floats(std::mt19937& rng, int64_t n) {
  std::vector<float> v = random_values<float>(rng, n, -3.0, 12.0);
  std::uniform_int_distribution<int> step(-60, 240);
  for (int64_t i = 0; i < n; i += 3) v[static_cast<size_t>(i)] = (static_cast<float>(step(rng)) + 0.5f) * 0.05f;
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f, 0.0f, -0.0f};
  for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i * 7) < n; ++i) v[i * 7] = specials[i];
  return v;
}

TEST(CpuInt8Tactics, QuantizeAndDequantizeTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(11);
  std::vector<std::string> quantize_ran, dequantize_ran;
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{1}, {15}, {17}, {2, 3, 7, 5}, {1, 33, 29, 31}, {3, 40000}}) {
    const int64_t n = count_of(dims);
    for (bool with_zero_point : {true, false}) {
      std::vector<Tensor> q = {Tensor::of(EDGERT_DTYPE_FLOAT32, dims, awkward_floats(rng, n)), scalar_f32(0.05f)};
      if (with_zero_point) q.push_back(scalar_u8(37));
      for (const std::string& name : check_all_tactics(
               "ref-quantize-linear", NodeSpec("", "QuantizeLinear", static_cast<int>(q.size())), q,
               "QuantizeLinear " + std::to_string(n)))
        quantize_ran.push_back(name);
      std::vector<Tensor> dq = {Tensor::of(EDGERT_DTYPE_UINT8, dims, random_values<uint8_t>(rng, n, 0, 255)),
                                scalar_f32(0.0371f)};
      if (with_zero_point) dq.push_back(scalar_u8(129));
      for (const std::string& name : check_all_tactics(
               "ref-dequantize-linear", NodeSpec("", "DequantizeLinear", static_cast<int>(dq.size())), dq,
               "DequantizeLinear " + std::to_string(n)))
        dequantize_ran.push_back(name);
    }
  }
  expect_row_families_ran(quantize_ran, "f32-quantize-linear-u8");
  expect_row_families_ran(dequantize_ran, "u8-dequantize-linear-f32");
}

std::vector<Tensor> qlinear_add_inputs(std::mt19937& rng, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                       float a_scale, float b_scale, float c_scale) {
  return {Tensor::of(EDGERT_DTYPE_UINT8, a, random_values<uint8_t>(rng, count_of(a), 0, 255)),
          scalar_f32(a_scale),
          scalar_u8(119),
          Tensor::of(EDGERT_DTYPE_UINT8, b, random_values<uint8_t>(rng, count_of(b), 0, 255)),
          scalar_f32(b_scale),
          scalar_u8(3),
          scalar_f32(c_scale),
          scalar_u8(140)};
}

TEST(CpuInt8Tactics, QLinearAddTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(12);
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const Shapes cases[] = {
      {{1, 3, 5, 7}, {1, 3, 5, 7}},       {{2, 17, 13, 11}, {2, 17, 13, 11}}, {{1, 64, 56, 56}, {1, 64, 56, 56}},
      {{2, 5, 9, 7}, {2, 5, 1, 1}},       {{1, 33, 4, 5}, {1, 33, 1, 1}},     {{2, 5, 9, 7}, {1, 5, 1, 1}},
      {{1, 7, 1, 1}, {1, 7, 6, 5}},       {{3, 19}, {1}},                    {{2, 3, 4, 5}, {5}},
      {{1, 1, 3, 40}, {1, 6, 1, 40}},
  };
  std::vector<std::string> ran;
  for (const Shapes& s : cases)
    for (const std::array<float, 3>& scales : {std::array<float, 3>{0.02f, 0.03f, 0.05f},
                                               std::array<float, 3>{0.5f, 0.25f, 1.0f}}) {  // the second: ties
      const std::vector<Tensor> in = qlinear_add_inputs(rng, s.a, s.b, scales[0], scales[1], scales[2]);
      for (const std::string& name :
           check_all_tactics("ref-qlinear-add", NodeSpec("com.microsoft", "QLinearAdd", 8), in,
                             "QLinearAdd " + std::to_string(count_of(s.a)) + " + " + std::to_string(count_of(s.b))))
        ran.push_back(name);
    }
  expect_row_families_ran(ran, "u8-qlinear-add");
}

TEST(CpuInt8Tactics, QLinearGlobalAveragePoolTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(13);
  std::vector<std::string> ran;
  // Planes of 1 to 4270 bytes: vector tails, and sums past what 16-bit lanes hold.
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{1, 3, 1, 1}, {1, 5, 7, 7}, {2, 17, 13, 11}, {1, 130, 8, 16}, {1, 1280, 7, 7},
                                         {2, 3, 30, 31}, {1, 4, 9}, {1, 3, 70, 61}}) {
    for (float y_scale : {0.01f, 0.037f, 0.005f}) {
      const std::vector<Tensor> in = {
          Tensor::of(EDGERT_DTYPE_UINT8, dims, random_values<uint8_t>(rng, count_of(dims), 0, 255)), scalar_f32(0.02f),
          scalar_u8(90), scalar_f32(y_scale), scalar_u8(17)};
      for (const std::string& name :
           check_all_tactics("ref-qlinear-global-average-pool",
                             NodeSpec("com.microsoft", "QLinearGlobalAveragePool", 5).integer("channels_last", 0), in,
                             "QLinearGlobalAveragePool " + std::to_string(count_of(dims))))
        ran.push_back(name);
    }
  }
  // Bytes within 1 of the zero point and a multiplier near 1/2: every unit of a plane's sum shows
  // in its output, which random bytes and small multipliers would hide.
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{1, 3, 70, 61}, {2, 5, 13, 11}, {1, 4, 1, 37}, {1, 2, 3, 1000}}) {
    const int64_t size = count_of(dims) / (dims[0] * dims[1]);
    const std::vector<Tensor> in = {
        Tensor::of(EDGERT_DTYPE_UINT8, dims, random_values<uint8_t>(rng, count_of(dims), 89, 91)), scalar_f32(1.0f),
        scalar_u8(90), scalar_f32(2.0f / static_cast<float>(size)), scalar_u8(128)};
    for (const std::string& name :
         check_all_tactics("ref-qlinear-global-average-pool",
                           NodeSpec("com.microsoft", "QLinearGlobalAveragePool", 5).integer("channels_last", 0), in,
                           "QLinearGlobalAveragePool near the zero point " + std::to_string(count_of(dims))))
      ran.push_back(name);
  }
  expect_row_families_ran(ran, "u8-qlinear-global-avgpool");
}

// MaxPool on uint8 NCHW (what a folded Q/DQ model pools): the reference against the window
// maxima computed here, padding never winning.
TEST(CpuInt8Tactics, MaxPoolTakesUint8) {
  std::mt19937 rng(14);
  const int64_t n = 2, c = 3, h = 9, w = 11, k = 3, s = 2, pad = 1;
  const int64_t oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
  const std::vector<uint8_t> x = random_values<uint8_t>(rng, n * c * h * w, 0, 255);
  const std::vector<Tensor> in = {Tensor::of(EDGERT_DTYPE_UINT8, {n, c, h, w}, x)};
  NodeSpec spec("", "MaxPool", 1);
  spec.ints("kernel_shape", {k, k}).ints("strides", {s, s}).ints("pads", {pad, pad, pad, pad});
  const edgert_kernel& kernel = kernel_named(plugin(), "ref-max-pool");
  const edgert_node node = spec.node();
  for (const edgert_tactic& t : list_tactics(kernel, node, in)) {
    PreparedRun run(kernel, node, in, t.id);
    ASSERT_EQ(run.output_tensor().dtype, EDGERT_DTYPE_UINT8);
    run.execute();
    const std::vector<uint8_t>& y = run.output();
    ASSERT_EQ(static_cast<int64_t>(y.size()), n * c * oh * ow);
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int best = -1;
          for (int64_t dy = 0; dy < k; ++dy)
            for (int64_t dx = 0; dx < k; ++dx) {
              const int64_t iy = i * s - pad + dy, ix = j * s - pad + dx;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                best = std::max<int>(best, x[static_cast<size_t>((p * h + iy) * w + ix)]);
            }
          ASSERT_EQ(y[static_cast<size_t>((p * oh + i) * ow + j)], best) << "tactic " << t.name << " plane " << p;
        }
  }
}

TEST(CpuInt8Tactics, QLinearMulTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(21);
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  // Squeeze-excitation's channel scale ([N, C, 1, 1] on either side), equal shapes, scalars.
  const Shapes cases[] = {
      {{1, 96, 28, 28}, {1, 96, 1, 1}}, {{2, 5, 9, 7}, {2, 5, 1, 1}},   {{1, 7, 1, 1}, {1, 7, 6, 5}},
      {{2, 17, 13, 11}, {2, 17, 13, 11}}, {{3, 19}, {1}},               {{1, 1, 3, 40}, {1, 6, 1, 40}},
  };
  std::vector<std::string> ran;
  for (const Shapes& sh : cases)
    for (const std::array<float, 3>& scales : {std::array<float, 3>{0.02f, 0.004f, 0.05f},
                                               std::array<float, 3>{0.5f, 0.25f, 0.125f}}) {  // the second: ties
      const std::vector<Tensor> in = qlinear_add_inputs(rng, sh.a, sh.b, scales[0], scales[1], scales[2]);
      for (const std::string& name :
           check_all_tactics("ref-qlinear-mul", NodeSpec("com.microsoft", "QLinearMul", 8), in,
                             "QLinearMul " + std::to_string(count_of(sh.a)) + " x " + std::to_string(count_of(sh.b))))
        ran.push_back(name);
    }
  expect_row_families_ran(ran, "u8-qlinear-mul");
}

TEST(CpuInt8Tactics, QLookupTacticsMatchTheReferenceBitForBit) {
  std::mt19937 rng(22);
  size_t ran = 0;
  for (int64_t n : {1, 63, 64, 65, 1000, 16384, 16385, 1 << 17}) {
    const std::vector<Tensor> in = {
        Tensor::of(EDGERT_DTYPE_UINT8, {n}, random_values<uint8_t>(rng, n, 0, 255)),
        Tensor::of(EDGERT_DTYPE_UINT8, {256}, random_values<uint8_t>(rng, 256, 0, 255), true)};
    ran += check_all_tactics("ref-qlookup", NodeSpec("edgert", "QLookup", 2), in, "QLookup " + std::to_string(n)).size();
  }
  // The reference itself: table[x].
  const std::vector<uint8_t> x = random_values<uint8_t>(rng, 300, 0, 255), table = random_values<uint8_t>(rng, 256, 0, 255);
  const std::vector<Tensor> in = {Tensor::of(EDGERT_DTYPE_UINT8, {300}, x), Tensor::of(EDGERT_DTYPE_UINT8, {256}, table, true)};
  const std::vector<uint8_t> y = run_tactic(kernel_named(plugin(), "ref-qlookup"), NodeSpec("edgert", "QLookup", 2).node(), in, 0);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], table[x[i]]) << i;
  if (cpu_has_vbmi()) {
    EXPECT_GT(ran, 0u) << "this CPU has AVX-512 VBMI, but no QLookup tactic ran";
  }
}

TEST(CpuInt8Tactics, Uint8MaxPoolTacticsMatchTheReference) {
  std::mt19937 rng(23);
  struct Case {
    int64_t c, h, w, k, s, pad, ceil;
  };
  // squeezenet's ceil-mode pools, resnet's stem pool, a tail of a row, one-sided windows, rows of
  // several vectors and a tail at stride 1.
  const Case cases[] = {{64, 111, 111, 3, 2, 0, 1}, {64, 112, 112, 3, 2, 1, 0}, {5, 9, 17, 2, 2, 0, 0},
                        {3, 7, 7, 3, 1, 1, 0},      {2, 13, 29, 5, 3, 2, 1},    {2, 6, 70, 3, 1, 1, 0}};
  std::vector<std::string> ran;
  for (const Case& c : cases) {
    const std::vector<Tensor> in = {
        Tensor::of(EDGERT_DTYPE_UINT8, {1, c.c, c.h, c.w}, random_values<uint8_t>(rng, c.c * c.h * c.w, 0, 255))};
    NodeSpec spec("", "MaxPool", 1);
    spec.ints("kernel_shape", {c.k, c.k}).ints("strides", {c.s, c.s}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    spec.integer("ceil_mode", c.ceil);
    for (const std::string& name :
         check_all_tactics("ref-max-pool", spec, in, "MaxPool uint8 " + std::to_string(c.h) + "x" + std::to_string(c.w)))
      ran.push_back(name);
  }
  EXPECT_TRUE(ran_named(ran, "u8-max-pool-2d-rows-portable"));
  const std::pair<bool, const char*> direct[] = {{cpu_has_vbmi(), "u8-max-pool-direct-avx512vbmi"},
                                                 {cpu_has_avx2(), "u8-max-pool-direct-avx2"},
                                                 {cpu_has_neon(), "u8-max-pool-direct-neon"}};
  for (const auto& [available, name] : direct) {
    if (available) {
      EXPECT_TRUE(ran_named(ran, name)) << name << " did not run";
    }
  }
}

}  // namespace
}  // namespace edgert::test
