// Every optimized tactic of the CPU plugin against its reference (tactic 0), through the plugin
// ABI as the builder and runtime use it: tactics() with only constants' data known, then
// prepare(tactic) and execute() with everything known. Random inputs of awkward sizes (odd
// channel counts, tails of every tile, padding on one side only, groups, dilation, batch 2), with
// 1 and 2 threads.
#include <gtest/gtest.h>

#include <filesystem>

#include <malloc.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EDGERT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDGERT_TEST_ASAN 1
#endif
#endif
#if EDGERT_TEST_ASAN
#include <sanitizer/allocator_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu_plugin_abi.h"
#include "plugin_loader.h"
#include "test_support.h"

namespace edgert::test {
namespace {

const LoadedPlugin& cpu_plugin() {
  static const LoadedPlugin* plugin = [] {
    edgert_error error{};
    const LoadedPlugin* p = load_plugin("cpu", {cpu_plugin_dir()}, &error);
    if (!p) throw std::runtime_error(error.message);
    return p;
  }();
  return *plugin;
}

void set_threads(int threads) {
  const edgert_plugin* table = cpu_plugin().table;
  ASSERT_NE(table->configure, nullptr);
  edgert_plugin_config config{sizeof(edgert_plugin_config), threads, 0};
  edgert_error error{};
  ASSERT_EQ(table->configure(&config, &error), EDGERT_OK) << error.message;
}

struct Input {
  std::vector<int64_t> dims;
  std::vector<float> values;
  bool constant = false;  // weights: known to tactics()
  bool absent = false;    // an optional input left out
};

Input random_input(std::vector<int64_t> dims, std::mt19937& rng, bool constant = false) {
  Input in;
  in.dims = std::move(dims);
  int64_t n = 1;
  for (int64_t d : in.dims) n *= d;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  in.values.resize(static_cast<size_t>(n));
  for (float& v : in.values) v = dist(rng);
  in.constant = constant;
  return in;
}

edgert_tensor view(const Input& in, bool with_data) {
  edgert_tensor t{};
  if (in.absent) return t;
  t.dtype = EDGERT_DTYPE_FLOAT32;
  t.rank = static_cast<int32_t>(in.dims.size());
  for (size_t i = 0; i < in.dims.size(); ++i) t.dims[i] = in.dims[i];
  t.data = with_data ? const_cast<float*>(in.values.data()) : nullptr;
  return t;
}

const edgert_kernel& kernel_named(const char* name) {
  const edgert_kernel* k = cpu_plugin().find_kernel(name);
  if (!k) throw std::runtime_error(std::string("the cpu plugin has no kernel ") + name);
  return *k;
}

std::vector<edgert_tactic> list_tactics(const edgert_kernel& k, const edgert_node& node, const std::vector<Input>& inputs) {
  std::vector<edgert_tensor> views;
  for (const Input& in : inputs) views.push_back(view(in, in.constant));
  if (!k.tactics) return {{0, "reference"}};
  std::vector<edgert_tactic> out(64);
  const int32_t n = k.tactics(&k, &node, views.data(), out.data(), static_cast<int32_t>(out.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// What export_prepared gives for a node at a tactic, in a 64-byte aligned buffer as an engine
// maps it; empty when the kernel exports nothing.
PreparedBytes export_state(const edgert_kernel& k, const edgert_node& node, const std::vector<Input>& inputs,
                           int64_t tactic) {
  std::vector<edgert_tensor> views;
  for (const Input& in : inputs) views.push_back(view(in, in.constant));
  EXPECT_NE(k.export_prepared, nullptr);
  return export_prepared_bytes(k, node, views, tactic);
}

// Runs one tactic; the output goes to `out` (which also serves as Z for in-place residuals when
// `z_input` >= 0: then it starts as a copy of that input, like the memory planner's in-place run).
// With `prepared`, prepare gets those bytes as the engine's stored state for the node.
std::vector<float> run_tactic(const edgert_kernel& k, const edgert_node& graph_node, const std::vector<Input>& inputs,
                              int64_t tactic, int z_input = -1, const PreparedBytes* prepared = nullptr,
                              size_t* kernel_state_bytes = nullptr) {
  std::vector<edgert_tensor> views;
  for (const Input& in : inputs) views.push_back(view(in, true));
  edgert_node node = graph_node;
  if (prepared) {
    node.prepared = prepared->data.get();
    node.prepared_bytes = prepared->size;
  }
  edgert_tensor out{};
  void* state = nullptr;
  edgert_prepare_info info{};
  edgert_error error{};
  edgert_status s = k.prepare(&k, &node, tactic, views.data(), &out, &state, &info, &error);
  EXPECT_EQ(s, EDGERT_OK) << error.message;
  if (s != EDGERT_OK) return {};
  if (kernel_state_bytes) *kernel_state_bytes = info.kernel_state_bytes;
  int64_t n = 1;
  for (int i = 0; i < out.rank; ++i) n *= out.dims[i];
  std::vector<float> y(static_cast<size_t>(n), std::nanf(""));
  if (z_input >= 0) {
    y = inputs[static_cast<size_t>(z_input)].values;
    views[static_cast<size_t>(z_input)].data = y.data();
  }
  out.data = y.data();
  const size_t ws_bytes = (info.workspace_bytes + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> ws(ws_bytes ? std::aligned_alloc(64, ws_bytes) : nullptr, &std::free);
  s = k.execute(&k, state, &node, views.data(), &out, ws.get(), nullptr, &error);
  EXPECT_EQ(s, EDGERT_OK) << error.message;
  k.release(&k, state);
  return y;
}

// The tactic again with the state its kernel exports for the engine (prepared weights): the
// same bits as packing at prepare, and less kept by the kernel when something was stored.
void check_prepared_state(const edgert_kernel& k, const edgert_node& node, const std::vector<Input>& inputs,
                          const edgert_tactic& t, int z_input, const std::vector<float>& packed_here,
                          size_t state_packing, const std::string& what) {
  const PreparedBytes prepared = export_state(k, node, inputs, t.id);
  size_t state_stored = 0;
  const std::vector<float> got = run_tactic(k, node, inputs, t.id, z_input, &prepared, &state_stored);
  ASSERT_EQ(got.size(), packed_here.size()) << what << " tactic " << t.name;
  EXPECT_EQ(std::memcmp(got.data(), packed_here.data(), got.size() * sizeof(float)), 0)
      << what << ": tactic " << t.id << " (" << t.name << ") with its stored state differs from packing it";
  EXPECT_LE(state_stored, state_packing) << what << " tactic " << t.name;
  if (prepared.size > 0) {
    EXPECT_LT(state_stored, state_packing) << what << ": tactic " << t.name << " stored " << prepared.size
                                           << " bytes and kept as much as packing it";
  }
  // Inputs the kernel says it no longer reads, poisoned with NaN: the results must not change.
  if (prepared.replaced_inputs == 0) return;
  std::vector<Input> poisoned = inputs;
  for (size_t i = 0; i < poisoned.size(); ++i)
    if ((prepared.replaced_inputs >> i) & 1u) std::fill(poisoned[i].values.begin(), poisoned[i].values.end(), std::nanf(""));
  const std::vector<float> unread = run_tactic(k, node, poisoned, t.id, z_input, &prepared);
  ASSERT_EQ(unread.size(), packed_here.size()) << what << " tactic " << t.name;
  EXPECT_EQ(std::memcmp(unread.data(), packed_here.data(), unread.size() * sizeof(float)), 0)
      << what << ": tactic " << t.id << " (" << t.name << ") reads an input it says its stored state replaces (mask "
      << prepared.replaced_inputs << ")";
}

// Runs every listed tactic (or those whose name starts with `only`) and the reference; expects
// each within tolerance of the reference. Returns the ids of the optimized tactics that ran.
std::vector<int64_t> check_all_tactics(const char* kernel, const NodeSpec& spec, const std::vector<Input>& inputs,
                                       const std::string& what, int z_input = -1, float tolerance = 2e-4f,
                                       const char* only = nullptr) {
  const edgert_kernel& k = kernel_named(kernel);
  const edgert_node node = spec.node();
  const std::vector<edgert_tactic> tactics = list_tactics(k, node, inputs);
  EXPECT_FALSE(tactics.empty());
  EXPECT_EQ(tactics.back().id, 0) << "the reference must come last";
  const std::vector<float> reference = run_tactic(k, node, inputs, 0, z_input);
  float scale = 1.0f;
  for (float v : reference)
    if (!std::isnan(v)) scale = std::max(scale, std::fabs(v));
  std::vector<int64_t> ran;
  for (const edgert_tactic& t : tactics) {
    if (t.id == 0 || (only && std::string(t.name).rfind(only, 0) != 0)) continue;
    ran.push_back(t.id);
    for (int threads : {1, 2}) {
      set_threads(threads);
      size_t state_packing = 0;
      const std::vector<float> got = run_tactic(k, node, inputs, t.id, z_input, nullptr, &state_packing);
      EXPECT_EQ(got.size(), reference.size()) << what << " tactic " << t.name;
      if (got.size() != reference.size()) continue;
      size_t bad = 0, first_bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        // NaN fails, except where the reference is NaN too (Relu keeps NaN).
        const bool ok = std::fabs(got[i] - reference[i]) <= tolerance * scale ||
                        (std::isnan(got[i]) && std::isnan(reference[i]));
        if (!ok && bad++ == 0) first_bad = i;
      }
      EXPECT_EQ(bad, 0u) << what << ": tactic " << t.id << " (" << t.name << ") with " << threads << " thread(s): "
                         << bad << " of " << got.size() << " elements differ; first at " << first_bad << ": "
                         << (got.empty() ? 0.0f : got[first_bad]) << " vs " << reference[first_bad];
      check_prepared_state(k, node, inputs, t, z_input, got, state_packing, what);
    }
  }
  set_threads(0);
  return ran;
}

struct ConvCase {
  int64_t batch, channels, out_channels, h, w, kh, kw, stride_h, stride_w;
  std::vector<int64_t> pads;  // top, left, bottom, right
  int64_t dilation, group;
  bool bias;
};

std::string describe(const ConvCase& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "N%lld C%lld M%lld %lldx%lld k%lldx%lld s%lldx%lld pads %lld,%lld,%lld,%lld d%lld g%lld%s",
                static_cast<long long>(c.batch), static_cast<long long>(c.channels),
                static_cast<long long>(c.out_channels), static_cast<long long>(c.h), static_cast<long long>(c.w),
                static_cast<long long>(c.kh), static_cast<long long>(c.kw), static_cast<long long>(c.stride_h),
                static_cast<long long>(c.stride_w), static_cast<long long>(c.pads[0]),
                static_cast<long long>(c.pads[1]), static_cast<long long>(c.pads[2]),
                static_cast<long long>(c.pads[3]), static_cast<long long>(c.dilation),
                static_cast<long long>(c.group), c.bias ? " bias" : "");
  return buf;
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {1, 3, 5, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},          // 1x1, tiny
      {1, 17, 33, 13, 11, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},      // 1x1, tails everywhere
      {2, 33, 40, 9, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, false},       // 1x1, batch 2
      {1, 5, 17, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},         // 1x1 spatial
      {2, 40, 70, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, false},       // 1x1 spatial, batch 2, 5 GEMV panels
      {1, 17, 24, 13, 11, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, true},      // 1x1 stride 2
      {1, 3, 16, 23, 19, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true},       // stem-like 3x3 s2
      {1, 3, 8, 29, 29, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, true},        // 7x7 s2
      {1, 17, 33, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true},      // 3x3 s1
      {2, 5, 7, 8, 9, 3, 3, 1, 1, {0, 1, 2, 0}, 1, 1, true},          // asymmetric pads
      {1, 6, 10, 11, 13, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 1, false},      // dilation 2
      {1, 8, 12, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 2, true},         // groups
      {1, 12, 12, 10, 10, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 3, true},      // groups, stride 2
      {1, 7, 7, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 7, true},        // depthwise 3x3
      {2, 5, 5, 14, 12, 3, 3, 2, 2, {0, 0, 1, 1}, 1, 5, true},        // depthwise s2, pads on one side
      {1, 33, 33, 9, 17, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 33, false},     // depthwise 5x5
      {1, 17, 17, 15, 15, 5, 5, 2, 2, {2, 2, 2, 2}, 1, 17, true},     // depthwise 5x5 s2
      {1, 4, 4, 7, 7, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 4, true},          // depthwise dilated
      {1, 3, 3, 6, 150, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 3, true},        // depthwise, rows of 64 + 64 + 16 + 6
      {1, 2, 2, 9, 169, 5, 5, 2, 2, {2, 1, 2, 2}, 1, 2, false},       // depthwise 5x5 s2, 85 wide, odd pads
      {1, 2, 2, 8, 131, 3, 3, 2, 2, {0, 1, 1, 0}, 1, 2, true},        // depthwise s2, 65 wide, pad left only
      {1, 3, 3, 30, 20, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 3, true},        // depthwise 5x5, 30 rows: 4 groups of 7 + 2
      {1, 2, 2, 33, 18, 3, 3, 2, 2, {1, 0, 1, 0}, 1, 2, false},       // depthwise s2, 17 rows: 7 + 7 + 3, pad top only
      {1, 5, 5, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 5, true},          // depthwise 7x7 planes: channel pairs + 1
      {2, 3, 3, 9, 6, 5, 5, 1, 1, {2, 1, 2, 3}, 1, 3, false},         // 5x5 pairs across images, uneven pads
      {1, 300, 70, 5, 6, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true},       // K = 2700: several k blocks
      {1, 64, 130, 20, 20, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},     // N = 400: several column blocks
      {1, 3, 4, 1200, 2, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},       // wide rows
      {1, 3, 8, 9, 75, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true},         // im2col rows of 38 across panels, s2
      {1, 2, 8, 5, 70, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, false},        // im2col rows of 70, s1
      {1, 3, 16, 20, 41, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, true},       // resnet's stem, 21 wide
      {1, 3, 8, 6, 120, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true},        // stem rows of 4 blocks: 2 + 2
      {1, 3, 12, 9, 224, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, false},      // 112 wide, 7 blocks: 3 + 2 + 2
      {2, 3, 10, 15, 37, 3, 3, 2, 2, {0, 0, 0, 0}, 1, 1, true},       // squeezenet-like stem: no pads, batch 2
      {1, 4, 9, 12, 35, 5, 5, 2, 2, {2, 1, 1, 2}, 1, 1, false},       // 5x5 s2, uneven pads: phases of odd rows
      {1, 260, 250, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true},      // Winograd with 4 MB of weights: spread at 2 threads
      {1, 300, 40, 9, 11, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},     // 1x1, K = 300: one k block in place, two packed
      {1, 24, 160, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},      // 1x1 on 7x7, 160 rows: 2 threads split a 48-row panel
      {1, 20, 50, 10, 10, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, false},    // 1x1, 100 columns: a tall tile's last panel 2 of 7
      {1, 64, 20, 65, 64, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},     // 1x1 with 1 MB of B: in place, next panels prefetched
  };
  return cases;
}

std::vector<Input> conv_inputs(const ConvCase& c, std::mt19937& rng) {
  std::vector<Input> in;
  in.push_back(random_input({c.batch, c.channels, c.h, c.w}, rng));
  in.push_back(random_input({c.out_channels, c.channels / c.group, c.kh, c.kw}, rng, true));
  if (c.bias) {
    in.push_back(random_input({c.out_channels}, rng, true));
  } else {
    Input none;
    none.absent = true;
    in.push_back(none);
  }
  return in;
}

NodeSpec conv_node(const ConvCase& c, const char* domain, const char* op, int inputs) {
  NodeSpec spec(domain, op, inputs);
  spec.ints("kernel_shape", {c.kh, c.kw})
      .ints("strides", {c.stride_h, c.stride_w})
      .ints("pads", {c.pads[0], c.pads[1], c.pads[2], c.pads[3]})
      .ints("dilations", {c.dilation, c.dilation})
      .integer("group", c.group);
  return spec;
}

TEST(CpuTactics, ConvTacticsMatchTheReference) {
  std::mt19937 rng(1234);
  size_t optimized = 0;
  for (const ConvCase& c : conv_cases()) {
    std::vector<Input> in = conv_inputs(c, rng);
    optimized += check_all_tactics("ref-conv", conv_node(c, "", "Conv", 3), in, "Conv " + describe(c)).size();
  }
  EXPECT_GT(optimized, conv_cases().size()) << "Conv lists no optimized tactics";
}

TEST(CpuTactics, FusedConvTacticsMatchTheReferenceWithEveryEpilogue) {
  std::mt19937 rng(99);
  const std::vector<std::pair<std::string, std::vector<float>>> activations = {
      {"Relu", {}}, {"Clip", {0.0f, 6.0f}}, {"HardSwish", {}}, {"SiLU", {}}, {"Sigmoid", {}},
      {"HardSigmoid", {0.2f, 0.5f}}, {"LeakyRelu", {0.1f}}, {"", {}}};
  size_t i = 0;
  for (const ConvCase& c : conv_cases()) {
    const auto& [act, params] = activations[i++ % activations.size()];
    std::vector<Input> in = conv_inputs(c, rng);
    // Z, the residual, of the output's shape; half the cases run it in place.
    const int64_t oh = (c.h + c.pads[0] + c.pads[2] - (c.dilation * (c.kh - 1) + 1)) / c.stride_h + 1;
    const int64_t ow = (c.w + c.pads[1] + c.pads[3] - (c.dilation * (c.kw - 1) + 1)) / c.stride_w + 1;
    in.push_back(random_input({c.batch, c.out_channels, oh, ow}, rng));
    NodeSpec spec = conv_node(c, "edgert", "FusedConv", 4);
    spec.string("activation", act);
    if (!params.empty()) spec.floats("activation_params", params);
    check_all_tactics("ref-fused-conv", spec, in, "FusedConv " + act + " " + describe(c), i % 2 ? 3 : -1);
    // And without Z.
    in.pop_back();
    NodeSpec plain = conv_node(c, "edgert", "FusedConv", 3);
    plain.string("activation", act);
    if (!params.empty()) plain.floats("activation_params", params);
    check_all_tactics("ref-fused-conv", plain, in, "FusedConv (no Z) " + act + " " + describe(c));
  }
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool cpu_has_fp16_arithmetic() {
#if defined(__aarch64__)
  return (getauxval(AT_HWCAP) & HWCAP_FPHP) && (getauxval(AT_HWCAP) & HWCAP_ASIMDHP);
#else
  return false;
#endif
}

size_t count_named(const std::vector<edgert_tactic>& tactics, const char* prefix) {
  return static_cast<size_t>(std::count_if(tactics.begin(), tactics.end(), [&](const edgert_tactic& t) {
    return std::string(t.name).rfind(prefix, 0) == 0;
  }));
}

// The reduced-precision tactics whose names start with `prefix`: listed only for a node the build
// allowed them (`attribute` 1) on a CPU that has the arithmetic (`available`), and within the
// precision's rounding of the float32 reference on every dense case, with the FusedConv
// epilogues and an in-place residual; the stored state gives the same bits as packing.
void check_reduced_precision_tactics(const char* attribute, const char* prefix, bool available, float tolerance) {
  if (!available) std::printf("this CPU lacks the arithmetic: checking that no %s tactic is listed\n", prefix);
  std::mt19937 rng(7);
  size_t ran = 0;
  for (const ConvCase& c : conv_cases()) {
    std::vector<Input> in = conv_inputs(c, rng);
    NodeSpec plain = conv_node(c, "", "Conv", 3);
    EXPECT_EQ(count_named(list_tactics(kernel_named("ref-conv"), plain.node(), in), prefix), 0u)
        << prefix << " listed without " << attribute << ": " << describe(c);
    NodeSpec allowed = conv_node(c, "", "Conv", 3);
    allowed.integer(attribute, 1);
    const size_t listed = count_named(list_tactics(kernel_named("ref-conv"), allowed.node(), in), prefix);
    const bool depthwise = c.group > 1 && c.group == c.channels && c.group == c.out_channels;
    EXPECT_EQ(listed > 0, available && !depthwise) << describe(c);
    ran += check_all_tactics("ref-conv", allowed, in, std::string(prefix) + " Conv " + describe(c), -1, tolerance,
                             prefix).size();
    if (depthwise) continue;
    const int64_t oh = (c.h + c.pads[0] + c.pads[2] - (c.dilation * (c.kh - 1) + 1)) / c.stride_h + 1;
    const int64_t ow = (c.w + c.pads[1] + c.pads[3] - (c.dilation * (c.kw - 1) + 1)) / c.stride_w + 1;
    in.push_back(random_input({c.batch, c.out_channels, oh, ow}, rng));
    NodeSpec fused = conv_node(c, "edgert", "FusedConv", 4);
    fused.string("activation", ran % 2 ? "Relu" : "HardSwish").integer(attribute, 1);
    ran += check_all_tactics("ref-fused-conv", fused, in, std::string(prefix) + " FusedConv " + describe(c),
                             ran % 3 ? 3 : -1, tolerance, prefix).size();
  }
  if (available) {
    EXPECT_GT(ran, conv_cases().size()) << "too few " << prefix << " tactics ran";
  }
}

// --bf16: 8 bits of mantissa per factor, float32 sums: within 1.5% of the largest output.
TEST(CpuTactics, Bf16ConvTacticsAreAllowedOnlyAndStayNearTheReference) {
  check_reduced_precision_tactics("allow_bf16", "bf16-", cpu_has_avx512_bf16(), 1.5e-2f);
}

// --fp16 on Armv8.2: 11 bits per factor, float16 sums over at most 128 k, then float32.
TEST(CpuTactics, Fp16ConvTacticsAreAllowedOnlyAndStayNearTheReference) {
  check_reduced_precision_tactics("allow_fp16", "f16-", cpu_has_fp16_arithmetic(), 1.5e-2f);
}

// FusedConv with a channel scale S (input 4; the builder's fusion of squeeze-and-excitation's
// multiply): the 1x1 GEMM tactics scale B while packing it (8x32 panels, tall 48x7 panels, B
// shared by two threads, several k blocks), with and without a residual.
TEST(CpuTactics, FusedConvWithAChannelScaleMatchesTheReference) {
  std::mt19937 rng(55);
  const std::vector<ConvCase> cases = {
      {1, 17, 33, 13, 11, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},   // tails everywhere
      {2, 33, 40, 9, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, false},    // batch 2: a scale per image; 63 px (tall)
      {1, 64, 130, 20, 20, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},  // N = 400: several column blocks
      {1, 300, 70, 5, 6, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},    // K = 300: two k blocks
      {1, 96, 24, 14, 14, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},   // an SE projection's shape
  };
  size_t i = 0;
  for (const ConvCase& c : cases) {
    std::vector<Input> in = conv_inputs(c, rng);
    const bool residual = i++ % 2 == 1;
    if (residual) {
      in.push_back(random_input({c.batch, c.out_channels, c.h, c.w}, rng));
    } else {
      Input none;
      none.absent = true;
      in.push_back(none);
    }
    in.push_back(random_input({c.batch, c.channels, 1, 1}, rng));
    NodeSpec spec = conv_node(c, "edgert", "FusedConv", 5);
    spec.string("activation", residual ? "Relu" : "SiLU");
    const std::string what = "FusedConv with S " + describe(c) + (residual ? " + Z" : "");
    EXPECT_FALSE(check_all_tactics("ref-fused-conv", spec, in, what).empty()) << what;
  }
}

// FusedConv with a pre-convolution (inputs 5 and 6: the builder's expand-depthwise fusion): a
// 1x1 convolution from C channels, its activation, then the node's depthwise convolution over
// the expanded channels. The banded tactic holds a few rows of the expanded tensor at a time;
// the wide cases make several bands per thread (rows shared between bands moved, not redone).
struct ExpandCase {
  int64_t channels;
  ConvCase depthwise;  // channels = out_channels = group: the expanded count
  const char* pre_activation;
  std::vector<float> pre_params;
  const char* activation;
};

TEST(CpuTactics, FusedConvWithAPreConvolutionMatchesTheReference) {
  std::mt19937 rng(91);
  const std::vector<ExpandCase> cases = {
      {16, {1, 96, 96, 30, 112, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 96, true}, "Clip", {0.0f, 6.0f}, "Clip"},  // mobilenet_v2
      {24, {1, 40, 40, 23, 301, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 40, false}, "SiLU", {}, "SiLU"},           // bands of 4
      {5, {2, 7, 7, 9, 11, 3, 3, 1, 1, {0, 1, 2, 0}, 1, 7, true}, "", {}, "Relu"},                      // uneven pads
      {3, {1, 33, 33, 17, 19, 5, 5, 2, 2, {1, 2, 2, 1}, 1, 33, false}, "HardSwish", {}, ""},            // 5x5 s2
      {17, {1, 48, 48, 64, 75, 3, 3, 2, 2, {0, 0, 1, 1}, 1, 48, true}, "Relu", {}, "HardSwish"},        // pad below only
  };
  for (const ExpandCase& ec : cases) {
    const ConvCase& c = ec.depthwise;
    std::vector<Input> in;
    in.push_back(random_input({c.batch, ec.channels, c.h, c.w}, rng));
    in.push_back(random_input({c.out_channels, 1, c.kh, c.kw}, rng, true));
    Input none;
    none.absent = true;
    in.push_back(c.bias ? random_input({c.out_channels}, rng, true) : none);
    in.push_back(none);  // Z
    in.push_back(none);  // S
    in.push_back(random_input({c.out_channels, ec.channels, 1, 1}, rng, true));
    in.push_back(c.bias ? none : random_input({c.out_channels}, rng, true));
    NodeSpec spec = conv_node(c, "edgert", "FusedConv", 7);
    spec.string("activation", ec.activation).string("pre_activation", ec.pre_activation);
    if (!ec.pre_params.empty()) spec.floats("pre_activation_params", ec.pre_params);
    if (std::string(ec.activation) == "Clip") spec.floats("activation_params", {0.0f, 6.0f});
    const std::string what = "FusedConv with W_pre from " + std::to_string(ec.channels) + " channels, " + describe(c);
    EXPECT_FALSE(check_all_tactics("ref-fused-conv", spec, in, what).empty()) << what;
  }
}

// A malformed pre-convolution (an engine built elsewhere, or tampered with) is refused at
// prepare with a message naming the input at fault.
std::string prepare_error(const NodeSpec& spec, const std::vector<Input>& inputs) {
  const edgert_kernel& k = kernel_named("ref-fused-conv");
  const edgert_node node = spec.node();
  std::vector<edgert_tensor> views;
  for (const Input& in : inputs) views.push_back(view(in, true));
  edgert_tensor out{};
  void* state = nullptr;
  edgert_prepare_info info{};
  edgert_error error{};
  const edgert_status status = k.prepare(&k, &node, 0, views.data(), &out, &state, &info, &error);
  if (state) k.release(&k, state);  // plugin.h: once per non-NULL state, a failed prepare's too
  return status == EDGERT_OK ? "" : error.message;
}

TEST(CpuTactics, AMisshapenPreConvolutionIsRefusedNamingTheInput) {
  std::mt19937 rng(5);
  const ConvCase dw = {1, 8, 8, 6, 6, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 8, true};
  const auto inputs = [&](std::vector<int64_t> w_pre, bool z) {
    Input none;
    none.absent = true;
    return std::vector<Input>{random_input({1, 4, 6, 6}, rng), random_input({8, 1, 3, 3}, rng, true),
                              random_input({8}, rng, true), z ? random_input({1, 8, 6, 6}, rng) : none, none,
                              random_input(w_pre, rng, true), none};
  };
  const NodeSpec spec = conv_node(dw, "edgert", "FusedConv", 7);
  EXPECT_EQ(prepare_error(spec, inputs({8, 4, 1, 1}, false)), "");
  EXPECT_NE(prepare_error(spec, inputs({8, 5, 1, 1}, false)).find("W_pre has shape [8x5x1x1]"), std::string::npos);
  EXPECT_NE(prepare_error(spec, inputs({8, 4, 3, 3}, false)).find("W_pre"), std::string::npos);
  EXPECT_NE(prepare_error(spec, inputs({6, 4, 1, 1}, false)).find("depthwise"), std::string::npos);
  EXPECT_NE(prepare_error(spec, inputs({8, 4, 1, 1}, true)).find("takes no Z"), std::string::npos);
}

// oneDNN's tactic (where the plugin was built with libdnnl) is listed for the activations it
// computes as the graph does, and not for Clip (its passes NaN through) nor Relu (not yet checked
// against FusedReluOfNaNIsNaNInEveryTactic); the CpuTactics cases above run it against the
// reference wherever it is listed.
TEST(CpuTactics, OneDnnIsListedOnlyForActivationsItComputesAlike) {
  std::mt19937 rng(8);
  const ConvCase c = {1, 16, 24, 14, 14, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true};
  const std::vector<Input> in = conv_inputs(c, rng);
  const auto lists_onednn = [&](const char* activation) {
    NodeSpec spec = conv_node(c, "edgert", "FusedConv", 3);
    spec.string("activation", activation);
    if (std::string(activation) == "Clip") spec.floats("activation_params", {0.0f, 6.0f});
    for (const edgert_tactic& t : list_tactics(kernel_named("ref-fused-conv"), spec.node(), in))
      if (std::string(t.name).find("onednn") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(lists_onednn("Relu"));
  EXPECT_FALSE(lists_onednn("Clip"));
#if defined(EDGERT_CPU_ONEDNN)
  EXPECT_TRUE(lists_onednn("SiLU"));
  EXPECT_TRUE(lists_onednn(""));
#else
  EXPECT_FALSE(lists_onednn("SiLU"));
#endif
}

#if defined(EDGERT_CPU_ONEDNN)
size_t threads_of_this_process() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) n += entry.is_directory();
  return n;
}

// The oneDNN tactic runs on the calling thread: no OpenMP team of its own (a primitive made
// while OpenMP's thread count was 2 started a team at every run, whose worker then spun beside
// the plugin's threads). On a thread of its own, as a host's worker would run it: a new thread
// starts with OpenMP's default thread count.
TEST(CpuTactics, TheOneDnnTacticStartsNoThreads) {
  std::mt19937 rng(12);
  const ConvCase& c = conv_cases()[8];  // 3x3 s1, a plain Conv: oneDNN is listed
  const std::vector<Input> in = conv_inputs(c, rng);
  const edgert_kernel& k = kernel_named("ref-conv");
  const NodeSpec spec = conv_node(c, "", "Conv", 3);
  const edgert_node node = spec.node();
  int64_t onednn = -1;
  for (const edgert_tactic& t : list_tactics(k, node, in))
    if (std::string(t.name).find("onednn") != std::string::npos) onednn = t.id;
  ASSERT_GE(onednn, 0) << "oneDNN tactic not listed for " << describe(c);
  set_threads(1);  // no pool workers come or go meanwhile
  std::thread host([&] {
    const size_t before = threads_of_this_process();
    const std::vector<float> reference = run_tactic(k, node, in, 0);
    const std::vector<float> got = run_tactic(k, node, in, onednn);
    ASSERT_EQ(got.size(), reference.size());
    EXPECT_EQ(threads_of_this_process(), before);
  });
  host.join();
  set_threads(0);
}
#endif

// FusedConv with a trailing MaxPool (the builder's pool fusion): the stem tactic pools band by
// band (bands of 7 pooled rows, rows shared between bands kept, 3x3 s2 pooled separably, other
// windows by the generic pool kernel); the other tactics pool their whole output.
struct ConvPoolCase {
  ConvCase conv;
  int64_t pool_kernel, pool_stride;
  std::vector<int64_t> pool_pads;
  bool ceil_mode;
  const char* activation;
  std::vector<float> params;
};

TEST(CpuTactics, FusedConvWithATrailingMaxPoolMatchesTheReference) {
  std::mt19937 rng(77);
  const std::vector<ConvPoolCase> cases = {
      // squeezenet's stem: conv 24x23, ceil-mode pool 12x11 (the last window overhangs).
      {{1, 3, 16, 49, 47, 3, 3, 2, 2, {0, 0, 0, 0}, 1, 1, true}, 3, 2, {0, 0, 0, 0}, true, "Relu", {}},
      // resnet's: 7x7 s2 stem, pool with pad 1, batch 2, no activation.
      {{2, 3, 8, 60, 61, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, false}, 3, 2, {1, 1, 1, 1}, false, "", {}},
      // Tall: 75 pooled rows in many bands; LeakyRelu is finished on the band, not in the lanes.
      {{1, 3, 8, 150, 35, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true}, 3, 2, {1, 1, 1, 1}, false, "LeakyRelu", {0.1f}},
      // Windows the separable kernel does not take: 2x2 s2 (ceil) and 3x3 s1.
      {{1, 4, 12, 33, 40, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 1, true}, 2, 2, {0, 0, 0, 0}, true, "SiLU", {}},
      {{1, 3, 8, 20, 20, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true}, 3, 1, {1, 1, 1, 1}, false, "Clip", {0.0f, 6.0f}},
      // Two columns of left padding, uneven pads.
      {{1, 3, 8, 21, 37, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true}, 3, 2, {1, 2, 1, 1}, false, "Relu", {}},
      // 17 input channels: no stem tactic, every tactic pools its whole output.
      {{1, 17, 9, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true}, 3, 2, {0, 0, 0, 0}, true, "Relu", {}},
  };
  for (const ConvPoolCase& c : cases) {
    std::vector<Input> in = conv_inputs(c.conv, rng);
    NodeSpec spec = conv_node(c.conv, "edgert", "FusedConv", 3);
    spec.string("activation", c.activation)
        .ints("pool_kernel_shape", {c.pool_kernel, c.pool_kernel})
        .ints("pool_strides", {c.pool_stride, c.pool_stride})
        .ints("pool_pads", c.pool_pads)
        .integer("pool_ceil_mode", c.ceil_mode ? 1 : 0);
    if (!c.params.empty()) spec.floats("activation_params", c.params);
    const std::string what = std::string("FusedConv + MaxPool ") + c.activation + " " + describe(c.conv);
    EXPECT_FALSE(check_all_tactics("ref-fused-conv", spec, in, what).empty()) << what;
  }
}

// Relu of NaN is NaN, as in PyTorch and NumPy (activation.h); vectorized max instructions return
// one operand or the other for NaN, so each tactic's fused Relu is checked on a NaN input, and
// the reference itself must give NaN there.
TEST(CpuTactics, FusedReluOfNaNIsNaNInEveryTactic) {
  std::mt19937 rng(31);
  const std::vector<ConvCase> cases = {
      {1, 16, 16, 8, 8, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, true},    // whole GEMM tiles: in-kernel epilogue
      {1, 4, 4, 9, 40, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 4, true},     // depthwise s1
      {1, 4, 4, 9, 40, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 4, false},    // depthwise s2
  };
  for (const ConvCase& c : cases) {
    std::vector<Input> in = conv_inputs(c, rng);
    in[0].values[5] = std::numeric_limits<float>::quiet_NaN();
    NodeSpec spec = conv_node(c, "edgert", "FusedConv", 3);
    spec.string("activation", "Relu");
    const std::vector<float> reference = run_tactic(kernel_named("ref-fused-conv"), spec.node(), in, 0);
    size_t nans = 0;
    for (float v : reference) nans += std::isnan(v);
    EXPECT_GT(nans, 0u) << "the reference's fused Relu turned NaN into a number, " << describe(c);
    EXPECT_FALSE(check_all_tactics("ref-fused-conv", spec, in, "FusedConv Relu, NaN input, " + describe(c)).empty());
  }
}

TEST(CpuTactics, ReluKeepsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Input x;
  x.dims = {5};
  x.values = {nan, -1.0f, 2.0f, -nan, 0.0f};
  NodeSpec spec("", "Relu", 1);
  const std::vector<float> y = run_tactic(kernel_named("ref-relu"), spec.node(), {x}, 0);
  ASSERT_EQ(y.size(), 5u);
  EXPECT_TRUE(std::isnan(y[0])) << y[0];
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_TRUE(std::isnan(y[3])) << y[3];
  EXPECT_EQ(y[4], 0.0f);
}

// plugin.h: kernels are never handed a node without outputs; a host that does anyway gets an
// error, not a kernel writing through NULL.
TEST(CpuTactics, PrepareRefusesANodeWithoutOutputs) {
  for (const char* name : {"ref-relu", "ref-softmax"}) {
    const edgert_kernel& k = kernel_named(name);
    edgert_tensor in{};
    in.dtype = EDGERT_DTYPE_FLOAT32;
    in.rank = 1;
    in.dims[0] = 4;
    NodeSpec spec("", k.op_type, 1, 0);
    const edgert_node node = spec.node();
    void* state = nullptr;
    edgert_prepare_info info{};
    edgert_error error{};
    EXPECT_EQ(k.prepare(&k, &node, 0, &in, nullptr, &state, &info, &error), EDGERT_ERR_INVALID_ARGUMENT) << name;
    EXPECT_NE(std::string(error.message).find("without outputs"), std::string::npos) << error.message;
    if (state) k.release(&k, state);
  }
}

// Heap bytes in use (small blocks and mmapped ones), to see what a prepare really keeps. Under
// AddressSanitizer malloc is its allocator, which glibc's mallinfo2 does not see: ask it.
size_t heap_in_use() {
#if EDGERT_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

// Stored state comes from a verified engine, but one built by another plugin version, for
// another tactic, or damaged in a way the checksum was recomputed over, must not be read as
// weights: each such variant leaves the kernel packing for itself, with the same results and
// the same state as without stored bytes. (Offsets are those of prepared_state.cpp's layout:
// a 32-byte header with the tactic at 16, then 56-byte records, key first, offset at 48.) Bytes
// cut short lose the arrays they no longer hold; the arrays before stay borrowed.
TEST(CpuTactics, StoredStateThatDoesNotFitIsPackedInstead) {
  std::mt19937 rng(33);
  const ConvCase c{1, 24, 40, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true};
  const std::vector<Input> in = conv_inputs(c, rng);
  const NodeSpec spec = conv_node(c, "", "Conv", 3);
  const edgert_node node = spec.node();
  const edgert_kernel& k = kernel_named("ref-conv");
  size_t checked = 0;
  for (const edgert_tactic& t : list_tactics(k, node, in)) {
    if (t.id == 0) continue;
    size_t state_packing = 0;
    const std::vector<float> packed = run_tactic(k, node, in, t.id, -1, nullptr, &state_packing);
    const PreparedBytes stored = export_state(k, node, in, t.id);
    if (stored.size == 0) continue;  // the tactic keeps nothing worth storing
    // `all_refused`: every stored array is refused; else the arrays before the damage are used.
    auto variant = [&](const char* what, size_t size, const std::function<void(uint8_t*)>& damage,
                       bool all_refused = true) {
      PreparedBytes bad;
      bad.data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (stored.size + 63) / 64 * 64)), &std::free);
      std::memcpy(bad.data.get(), stored.data.get(), stored.size);
      bad.size = size;
      damage(bad.data.get());
      size_t state = 0;
      const std::vector<float> got = run_tactic(k, node, in, t.id, -1, &bad, &state);
      ASSERT_EQ(got.size(), packed.size()) << what;
      EXPECT_EQ(std::memcmp(got.data(), packed.data(), got.size() * sizeof(float)), 0) << t.name << ": " << what;
      if (all_refused) {
        EXPECT_EQ(state, state_packing) << t.name << ": " << what;
      } else {
        EXPECT_GT(state, 0u) << t.name << ": " << what;
        EXPECT_LE(state, state_packing) << t.name << ": " << what;
      }
    };
    auto poke64 = [](uint8_t* bytes, size_t at, int64_t value) { std::memcpy(bytes + at, &value, sizeof value); };
    variant("cut to its header", 40, [](uint8_t*) {});
    variant("cut before its last array ends", stored.size - 4, [](uint8_t*) {}, false);
    variant("another format", stored.size, [](uint8_t* b) { b[0] ^= 0xff; });
    variant("another tactic", stored.size, [&](uint8_t* b) { poke64(b, 16, t.id + 1); });
    variant("a key of another shape", stored.size, [&](uint8_t* b) { poke64(b, 32 + 16, 12345); });
    variant("an offset past the end", stored.size, [&](uint8_t* b) { poke64(b, 32 + 48, int64_t{1} << 40); });
    variant("an unaligned offset", stored.size, [&](uint8_t* b) { poke64(b, 32 + 48, 68); });
    variant("more records than bytes", stored.size, [&](uint8_t* b) { poke64(b, 24, int64_t{1} << 40); });
    ++checked;
  }
  EXPECT_GE(checked, 2u) << "expected the GEMM and Winograd tactics of a 3x3 conv to store their weights";
}

// A dynamic engine prepares its kernels again when the input's shape changes. Weights depend on
// no shape, so a kernel that borrowed the engine's stored state keeps borrowing it: what it
// keeps stays what the engine's footprint recorded, and the results at the new shape are those
// of a kernel that packed at that shape.
TEST(CpuTactics, StoredStateOutlivesAShapeChange) {
  std::mt19937 rng(44);
  const ConvCase first{1, 24, 40, 13, 11, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, true};
  ConvCase second = first;
  second.h = 17;
  second.w = 9;
  std::vector<Input> in = conv_inputs(first, rng);
  std::vector<Input> in2 = in;
  in2[0] = random_input({1, 24, 17, 9}, rng);
  // The weights stay where they are, as an engine's constants do: views of the second pass read
  // them from `in`.
  const NodeSpec spec = conv_node(first, "", "Conv", 3);
  const edgert_node graph_node = spec.node();
  const edgert_kernel& k = kernel_named("ref-conv");
  size_t checked = 0;
  for (const edgert_tactic& t : list_tactics(k, graph_node, in)) {
    if (t.id == 0) continue;
    const PreparedBytes stored = export_state(k, graph_node, in, t.id);
    if (stored.size == 0) continue;
    edgert_node node = graph_node;
    node.prepared = stored.data.get();
    node.prepared_bytes = stored.size;
    void* state = nullptr;
    size_t states[2] = {};
    std::vector<float> y;
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<edgert_tensor> views;
      for (const Input& i : in) views.push_back(view(i, true));
      if (pass) views[0] = view(in2[0], true);
      edgert_tensor out{};
      edgert_prepare_info info{};
      edgert_error error{};
      ASSERT_EQ(k.prepare(&k, &node, t.id, views.data(), &out, &state, &info, &error), EDGERT_OK) << error.message;
      states[pass] = info.kernel_state_bytes;
      y.assign(static_cast<size_t>(out.dims[0] * out.dims[1] * out.dims[2] * out.dims[3]), 0.0f);
      out.data = y.data();
      const size_t ws_bytes = (info.workspace_bytes + 63) / 64 * 64;
      std::unique_ptr<void, decltype(&std::free)> ws(ws_bytes ? std::aligned_alloc(64, ws_bytes) : nullptr, &std::free);
      ASSERT_EQ(k.execute(&k, state, &node, views.data(), &out, ws.get(), nullptr, &error), EDGERT_OK) << error.message;
    }
    k.release(&k, state);
    EXPECT_EQ(states[1], states[0]) << t.name << ": the second prepare packed what the engine holds";
    const std::vector<float> packed_here = run_tactic(k, graph_node, in2, t.id);
    ASSERT_EQ(y.size(), packed_here.size());
    EXPECT_EQ(std::memcmp(y.data(), packed_here.data(), y.size() * sizeof(float)), 0) << t.name;
    ++checked;
  }
  EXPECT_GE(checked, 2u);
}

// What prepare keeps is counted in the engine's footprint and the daemon's budget only when the
// kernel reports it (edgert_prepare_info.kernel_state_bytes): every optimized Conv tactic, and
// Gemm's GEMV and weights-packing GEMM (f32-gemm-packed-w-*), keep the weights packed,
// transformed or copied, so they must report at least their size; the GEMM that packs A at each
// run keeps room for it. What a tactic reports must be what the heap grew by while its state
// was made.
TEST(CpuTactics, PrepareReportsTheWeightsATacticKeeps) {
  std::mt19937 rng(21);
  size_t checked = 0;
  auto check = [&](const char* kernel, const NodeSpec& spec, const std::vector<Input>& in, size_t weight_bytes,
                   const std::string& what) {
    const edgert_kernel& k = kernel_named(kernel);
    const edgert_node node = spec.node();
    std::vector<edgert_tensor> views;
    for (const Input& i : in) views.push_back(view(i, true));
    for (const edgert_tactic& t : list_tactics(k, node, in)) {
      edgert_tensor out{};
      void* state = nullptr;
      edgert_prepare_info info{};
      info.kernel_state_bytes = 12345;  // prepare must write it
      edgert_error error{};
      const size_t before = heap_in_use();
      ASSERT_EQ(k.prepare(&k, &node, t.id, views.data(), &out, &state, &info, &error), EDGERT_OK) << error.message;
      const size_t grown = heap_in_use() - before;
      if (t.id == 0) {
        EXPECT_EQ(info.kernel_state_bytes, 0u) << what << ": the reference keeps nothing";
      } else {
        const std::string name = t.name;
        if (name.rfind("f32-gemm-packed-", 0) != 0 || name.rfind("f32-gemm-packed-w-", 0) == 0) {
          EXPECT_GE(info.kernel_state_bytes, weight_bytes) << what << ": tactic " << t.name;
        }
        // oneDNN's primitive brings its own generated code and descriptors besides the weights.
        if (std::strstr(t.name, "onednn") == nullptr) {
          EXPECT_NEAR(static_cast<double>(info.kernel_state_bytes), static_cast<double>(grown),
                      0.03 * static_cast<double>(grown) + 8192.0)
              << what << ": tactic " << t.name << " reports " << info.kernel_state_bytes << " bytes, the heap grew by "
              << grown;
        }
        ++checked;
      }
      k.release(&k, state);
    }
  };
  for (const ConvCase& c : conv_cases()) {
    const std::vector<Input> in = conv_inputs(c, rng);
    check("ref-conv", conv_node(c, "", "Conv", 3), in, in[1].values.size() * sizeof(float), "Conv " + describe(c));
  }
  std::vector<Input> gemm;
  gemm.push_back(random_input({1, 512}, rng));
  gemm.push_back(random_input({1000, 512}, rng, true));
  gemm.push_back(random_input({1000}, rng, true));
  NodeSpec spec("", "Gemm", 3);
  spec.integer("transB", 1);
  check("ref-gemm", spec, gemm, gemm[1].values.size() * sizeof(float), "Gemm 1x512 by 512x1000");
  EXPECT_GT(checked, conv_cases().size());
}

TEST(CpuTactics, ConvTacticsWorkOnOneDimensionalInput) {
  std::mt19937 rng(7);
  std::vector<Input> in;
  in.push_back(random_input({2, 5, 37}, rng));
  in.push_back(random_input({9, 5, 3}, rng, true));
  in.push_back(random_input({9}, rng, true));
  NodeSpec spec("", "Conv", 3);
  spec.ints("kernel_shape", {3}).ints("strides", {2}).ints("pads", {1, 0});
  EXPECT_FALSE(check_all_tactics("ref-conv", spec, in, "Conv 1-D").empty());
}

struct PoolCase {
  int64_t batch, channels, h, w, kh, kw, stride;
  std::vector<int64_t> pads;
  bool ceil_mode, count_include_pad;
};

TEST(CpuTactics, PoolTacticsMatchTheReference) {
  std::mt19937 rng(5);
  const std::vector<PoolCase> cases = {
      {1, 3, 13, 11, 3, 3, 2, {1, 1, 1, 1}, false, false}, {2, 5, 7, 7, 2, 2, 2, {0, 0, 0, 0}, true, false},
      {1, 17, 14, 15, 3, 3, 1, {1, 0, 0, 1}, false, true}, {1, 4, 9, 9, 3, 3, 2, {0, 0, 0, 0}, true, true},
      {1, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false},   {1, 6, 31, 29, 5, 3, 3, {2, 1, 2, 1}, false, true},
      // Wide rows: several 16-lane blocks and a tail (squeezenet's ceil-mode pool, resnet's stem).
      {1, 2, 9, 111, 3, 3, 2, {0, 0, 0, 0}, true, false},  {1, 3, 8, 112, 3, 3, 2, {1, 1, 1, 1}, false, false},
      {1, 2, 6, 70, 2, 2, 2, {0, 0, 0, 0}, false, false},  {1, 2, 7, 40, 5, 5, 1, {2, 2, 2, 2}, false, false},
      {1, 2, 7, 37, 3, 3, 1, {0, 1, 1, 0}, true, false},
      // Tall planes: output rows in groups of 7 with a short last group.
      {1, 2, 40, 35, 3, 3, 2, {1, 1, 1, 1}, true, false},  {1, 2, 19, 20, 3, 3, 1, {1, 1, 1, 1}, false, false},
  };
  for (const PoolCase& c : cases) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      std::vector<Input> in = {random_input({c.batch, c.channels, c.h, c.w}, rng)};
      NodeSpec spec("", op, 1);
      spec.ints("kernel_shape", {c.kh, c.kw})
          .ints("strides", {c.stride, c.stride})
          .ints("pads", c.pads)
          .integer("ceil_mode", c.ceil_mode ? 1 : 0)
          .integer("count_include_pad", c.count_include_pad ? 1 : 0);
      const char* kernel = std::string(op) == "MaxPool" ? "ref-max-pool" : "ref-average-pool";
      EXPECT_FALSE(check_all_tactics(kernel, spec, in, std::string(op)).empty()) << op << " lists no tactic";
    }
  }
}

struct GemmCase {
  int64_t m, k, n;
  bool trans_a, trans_b;
  float alpha, beta;
  std::vector<int64_t> c_shape;  // empty: no C
};

TEST(CpuTactics, GemmTacticsMatchTheReference) {
  std::mt19937 rng(11);
  const std::vector<GemmCase> cases = {
      {1, 512, 1000, false, true, 1.0f, 1.0f, {1000}},  {1, 1, 1, false, false, 1.0f, 1.0f, {}},
      {2, 33, 17, true, false, 0.5f, 2.0f, {2, 17}},    {3, 17, 5, false, false, 1.0f, 1.0f, {1, 5}},
      {5, 7, 31, true, true, -1.5f, 0.25f, {5, 1}},     {1, 1280, 33, false, true, 1.0f, 1.0f, {1}},
  };
  for (const GemmCase& c : cases) {
    for (const char* op : {"Gemm", "FusedGemm"}) {
      const bool fused = std::string(op) == "FusedGemm";
      std::vector<Input> in;
      in.push_back(random_input(c.trans_a ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k}, rng));
      in.push_back(random_input(c.trans_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n}, rng, true));
      if (!c.c_shape.empty()) in.push_back(random_input(c.c_shape, rng, true));
      NodeSpec spec(fused ? "edgert" : "", op, static_cast<int>(in.size()));
      spec.integer("transA", c.trans_a).integer("transB", c.trans_b).real("alpha", c.alpha).real("beta", c.beta);
      if (fused) spec.string("activation", "Relu");
      const std::string what = std::string(op) + " m" + std::to_string(c.m) + " k" + std::to_string(c.k) + " n" +
                               std::to_string(c.n);
      EXPECT_FALSE(check_all_tactics(fused ? "ref-fused-gemm" : "ref-gemm", spec, in, what).empty()) << what;
    }
  }
}

TEST(CpuTactics, MatMulAndGemmTacticsMatchTheReference) {
  std::mt19937 rng(29);
  // One GEMM over batch rows (B one matrix), batched products of two activations, broadcast
  // batches, and sizes off every tile (6x16, 8x32).
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3, 17, 23}, {23, 29}}, {{2, 3, 17, 23}, {2, 3, 23, 29}}, {{1, 5, 33}, {4, 1, 33, 7}},
      {{4, 7}, {7, 3}},           {{1, 1, 40}, {40, 70}},            {{2, 9, 0}, {0, 5}}};
  size_t optimized = 0;
  for (const auto& [sa, sb] : shapes) {
    const std::vector<Input> in = {random_input(sa, rng), random_input(sb, rng, true)};
    optimized += check_all_tactics("ref-matmul", NodeSpec("", "MatMul", 2), in, "MatMul").size();
    // FusedMatMul: bias over the last dim and the erf GELU in the GEMM's epilogue.
    std::vector<Input> fused = in;
    fused.push_back(random_input({sb.back()}, rng, true));
    NodeSpec spec("edgert", "FusedMatMul", 3);
    spec.string("activation", "Gelu").floats("activation_params", {0.0f});
    optimized += check_all_tactics("ref-fused-matmul", spec, fused, "FusedMatMul Gelu").size();
  }
  EXPECT_GT(optimized, 0u) << "MatMul lists no optimized tactic";
  // Gemm: transposes, alpha and beta, C per column and whole.
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true})
      for (bool whole_c : {false, true}) {
        const int64_t m = 19, k = 37, n = 45;
        std::vector<Input> in = {random_input(trans_a ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, rng),
                                 random_input(trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, rng, true),
                                 random_input(whole_c ? std::vector<int64_t>{m, n} : std::vector<int64_t>{n}, rng, true)};
        NodeSpec spec("", "Gemm", 3);
        spec.integer("transA", trans_a).integer("transB", trans_b).real("alpha", 0.75f).real("beta", 1.5f);
        EXPECT_FALSE(check_all_tactics("ref-gemm", spec, in, "Gemm", -1, 2e-4f, "f32-gemm-packed").empty());
      }
}

TEST(CpuTactics, SoftmaxAndGeluTacticsMatchTheReference) {
  std::mt19937 rng(31);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {2, 4, 128, 128}, {3, 7}, {1, 1, 1}, {5, 49, 49}, {2, 3, 17}}) {
    std::vector<Input> in = {random_input(dims, rng)};
    for (float& v : in[0].values) v *= 8.0f;  // logits far apart, as attention's are
    NodeSpec softmax("", "Softmax", 1);
    softmax.integer("axis", -1);
    EXPECT_FALSE(check_all_tactics("ref-softmax", softmax, in, "Softmax", -1, 1e-6f).empty());
    // Gelu, both forms; the erf one vectorized (a fit of erfc within 1.2e-7 relative).
    for (const char* approximate : {"none", "tanh"}) {
      NodeSpec gelu("", "Gelu", 1);
      gelu.string("approximate", approximate);
      EXPECT_FALSE(check_all_tactics("ref-gelu", gelu, in, std::string("Gelu ") + approximate, -1, 1e-6f).empty());
    }
  }
}

TEST(CpuTactics, BinaryTacticsMatchTheReference) {
  std::mt19937 rng(3);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 5, 7, 3}, {2, 5, 7, 3}}, {{2, 5, 7, 3}, {1}},       {{1, 17, 13, 11}, {1, 17, 1, 1}},
      {{1, 17, 1, 1}, {1, 17, 13, 11}}, {{3, 1, 5}, {4, 1}},   {{17}, {3, 17}},
      {{5, 1}, {1, 6}},             {{1, 96, 112, 112}, {1, 96, 1, 1}}};
  std::map<std::string, size_t> optimized;  // op -> optimized tactics checked, over all shapes
  for (const auto& [sa, sb] : shapes) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      std::vector<Input> in = {random_input(sa, rng), random_input(sb, rng)};
      if (std::string(op) == "Div")
        for (float& v : in[1].values) v = v < 0 ? v - 0.5f : v + 0.5f;  // away from zero
      NodeSpec spec("", op, 2);
      const std::string kernel = std::string("ref-") + (op[0] == 'A' ? "add" : op[0] == 'S' ? "sub" : op[0] == 'M' ? "mul" : "div");
      optimized[op] += check_all_tactics(kernel.c_str(), spec, in, std::string(op), -1, 1e-6f).size();
    }
  }
  // Without an optimized tactic listed, the loop above compares the reference with nothing.
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) EXPECT_GT(optimized[op], 0u) << op << " lists no optimized tactic";
}

TEST(CpuTactics, GlobalAveragePoolTacticsMatchTheReference) {
  std::mt19937 rng(21);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {1, 3, 1, 1}, {2, 17, 7, 7}, {1, 33, 13, 11}, {1, 1280, 7, 7}, {1, 5, 112, 112}, {2, 3, 9}}) {
    std::vector<Input> in = {random_input(dims, rng)};
    NodeSpec spec("", "GlobalAveragePool", 1);
    EXPECT_FALSE(check_all_tactics("ref-global-average-pool", spec, in, "GlobalAveragePool", -1, 1e-5f).empty());
  }
}

// ReduceMean over trailing axes runs GlobalAveragePool's row mean (ShuffleNet's head); other
// axes keep only the reference.
TEST(CpuTactics, ReduceMeanOverTrailingAxesMatchesTheReference) {
  std::mt19937 rng(22);
  struct Case {
    std::vector<int64_t> dims, axes;
    int64_t keepdims;
  };
  for (const Case& c : std::vector<Case>{{{2, 5, 7, 3}, {2, 3}, 1},
                                         {{1, 1024, 7, 7}, {2, 3}, 0},
                                         {{3, 17, 13}, {-1}, 1},
                                         {{2, 3, 4, 5}, {1, -2, 3}, 0},
                                         {{40000}, {0}, 1}}) {
    std::vector<Input> in = {random_input(c.dims, rng)};
    NodeSpec spec("", "ReduceMean", 1);
    spec.ints("axes", c.axes).integer("keepdims", c.keepdims);
    const std::vector<edgert_tactic> listed = list_tactics(kernel_named("ref-reduce-mean"), spec.node(), in);
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_STREQ(listed[0].name, "f32-reduce-mean-rows-portable");
    EXPECT_EQ(check_all_tactics("ref-reduce-mean", spec, in, "ReduceMean", -1, 1e-5f).size(), 1u);
  }
  std::vector<Input> in = {random_input({2, 3, 4, 5}, rng)};
  NodeSpec inner("", "ReduceMean", 1);
  inner.ints("axes", {1, 3});
  EXPECT_EQ(list_tactics(kernel_named("ref-reduce-mean"), inner.node(), in).size(), 1u) << "only the reference";
}

TEST(CpuTactics, ActivationTacticsMatchTheReference) {
  std::mt19937 rng(8);
  std::map<std::string, size_t> optimized;  // kernel -> optimized tactics checked, over all shapes
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{1}, {3, 5}, {1, 17, 13, 11}, {2, 40000}}) {
    for (const char* kernel : {"ref-sigmoid", "ref-hard-sigmoid", "ref-hard-swish"}) {
      std::vector<Input> in = {random_input(dims, rng)};
      for (float& v : in[0].values) v *= 12.0f;  // past the saturating ends
      const std::string name = kernel;
      NodeSpec spec("", name == "ref-sigmoid" ? "Sigmoid" : name == "ref-hard-sigmoid" ? "HardSigmoid" : "HardSwish", 1);
      if (name == "ref-hard-sigmoid") spec.real("alpha", 0.25f).real("beta", 0.4f);
      // HardSigmoid and HardSwish are exact; Sigmoid's float exp is within a few ulp.
      optimized[kernel] += check_all_tactics(kernel, spec, in, name, -1, name == "ref-sigmoid" ? 1e-6f : 0.0f).size();
    }
  }
  for (const char* kernel : {"ref-sigmoid", "ref-hard-sigmoid", "ref-hard-swish"})
    EXPECT_GT(optimized[kernel], 0u) << kernel << " lists no optimized tactic";
}

// Runs a node with any number of outputs at one tactic; every output's floats (NaN where
// nothing was written).
std::vector<std::vector<float>> run_tactic_outputs(const edgert_kernel& k, const edgert_node& node,
                                                   const std::vector<Input>& inputs, int64_t tactic) {
  std::vector<edgert_tensor> views;
  for (const Input& in : inputs) views.push_back(view(in, true));
  std::vector<edgert_tensor> outs(static_cast<size_t>(node.num_outputs));
  void* state = nullptr;
  edgert_prepare_info info{};
  edgert_error error{};
  edgert_status s = k.prepare(&k, &node, tactic, views.data(), outs.data(), &state, &info, &error);
  EXPECT_EQ(s, EDGERT_OK) << error.message;
  if (s != EDGERT_OK) return {};
  std::vector<std::vector<float>> values(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].dtype, EDGERT_DTYPE_FLOAT32) << "output " << i;
    int64_t n = 1;
    for (int d = 0; d < outs[i].rank; ++d) n *= outs[i].dims[d];
    values[i].assign(static_cast<size_t>(n), std::nanf(""));
    outs[i].data = values[i].data();
  }
  const size_t ws_bytes = (info.workspace_bytes + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> ws(ws_bytes ? std::aligned_alloc(64, ws_bytes) : nullptr, &std::free);
  s = k.execute(&k, state, &node, views.data(), outs.data(), ws.get(), nullptr, &error);
  EXPECT_EQ(s, EDGERT_OK) << error.message;
  k.release(&k, state);
  return values;
}

// `tactic` against the reference on every output, with 1 and 2 threads: within 1e-5 of each
// reference value plus 1e-6 of the output's largest one (the float statistics against the
// reference's double ones; the absolute part covers outputs near zero, where B cancels the rest).
void expect_outputs_near_the_reference(const char* kernel, const NodeSpec& spec, const std::vector<Input>& inputs,
                                       int64_t tactic, const std::string& what) {
  const edgert_kernel& k = kernel_named(kernel);
  const edgert_node node = spec.node();
  const std::vector<std::vector<float>> reference = run_tactic_outputs(k, node, inputs, 0);
  for (int threads : {1, 2}) {
    set_threads(threads);
    const std::vector<std::vector<float>> got = run_tactic_outputs(k, node, inputs, tactic);
    ASSERT_EQ(got.size(), reference.size()) << what;
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].size(), reference[o].size()) << what << " output " << o;
      float scale = 1.0f;
      for (float v : reference[o]) scale = std::max(scale, std::fabs(v));
      size_t bad = 0, first_bad = 0;
      for (size_t i = 0; i < got[o].size(); ++i)
        if (!(std::fabs(got[o][i] - reference[o][i]) <= 1e-5f * std::fabs(reference[o][i]) + 1e-6f * scale) &&
            bad++ == 0)
          first_bad = i;
      EXPECT_EQ(bad, 0u) << what << ": tactic " << tactic << " with " << threads << " thread(s), output " << o << ": "
                         << bad << " of " << got[o].size() << " elements differ; first at " << first_bad << ": "
                         << got[o][first_bad] << " vs " << reference[o][first_bad];
    }
  }
  set_threads(0);
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s + "]";
}

struct NormCase {
  std::vector<int64_t> dims;
  int64_t axis;
  float offset;  // added to every input: a mean far from zero
};

const std::vector<NormCase>& norm_cases() {
  static const std::vector<NormCase> cases = {
      {{5, 1}, -1, 0},        // rows of one element: the variance is 0
      {{3, 7}, -1, 0},        // shorter than the 16 lanes
      {{2, 5, 33}, -1, 0},    // two lane blocks and a tail of 1
      {{2, 3, 769}, -1, 0},   // BERT-like width, odd
      {{4, 6, 7}, 1, 0},      // two normalized dims, rows of 42
      {{2, 3, 4, 5}, 0, 0},   // everything one row
      {{3, 2, 17}, -2, 100},  // mean far above the spread
      {{3136, 96}, -1, 0},    // swin_t's first stage: rows spread over threads
      {{9, 768}, -1, 3},      // vit_b_16's width
  };
  return cases;
}

std::vector<int64_t> normalized_dims(const NormCase& c) {
  const int64_t rank = static_cast<int64_t>(c.dims.size());
  return std::vector<int64_t>(c.dims.begin() + (c.axis < 0 ? c.axis + rank : c.axis), c.dims.end());
}

TEST(CpuTactics, LayerNormTacticsMatchTheReference) {
  std::mt19937 rng(41);
  const edgert_kernel& k = kernel_named("ref-layer-normalization");
  for (const NormCase& c : norm_cases()) {
    for (bool bias : {true, false}) {
      for (int outputs : {1, 3}) {
        std::vector<Input> in = {random_input(c.dims, rng), random_input(normalized_dims(c), rng, true)};
        for (float& v : in[0].values) v += c.offset;
        if (bias) in.push_back(random_input(normalized_dims(c), rng, true));
        NodeSpec spec("", "LayerNormalization", static_cast<int>(in.size()), outputs);
        spec.integer("axis", c.axis).real("epsilon", 1e-5f);
        const std::string what = "LayerNormalization " + dims_string(c.dims) + " axis " + std::to_string(c.axis) +
                                 (bias ? " with B" : "") + (outputs > 1 ? ", Mean and InvStdDev" : "");
        const std::vector<edgert_tactic> listed = list_tactics(k, spec.node(), in);
        ASSERT_EQ(listed.size(), 2u) << what;
        EXPECT_STREQ(listed[0].name, "f32-layer-norm-rows-portable") << what;
        expect_outputs_near_the_reference("ref-layer-normalization", spec, in, listed[0].id, what);
        if (outputs == 1) {
          EXPECT_EQ(check_all_tactics("ref-layer-normalization", spec, in, what, -1, 1e-5f).size(), 1u);
        }
      }
    }
  }
  // Scale broadcast along the rows, or statistics stashed in double: only the reference is
  // listed, and the tactic asked for anyway runs it.
  std::vector<Input> in = {random_input({2, 6, 7}, rng), random_input({7}, rng, true)};
  NodeSpec broadcast("", "LayerNormalization", 2);
  broadcast.integer("axis", 1);
  EXPECT_EQ(list_tactics(k, broadcast.node(), in).size(), 1u) << "Scale [7] over rows of 6x7";
  expect_outputs_near_the_reference("ref-layer-normalization", broadcast, in, 60, "Scale broadcast");
  in = {random_input({2, 6, 7}, rng), random_input({7}, rng, true)};
  NodeSpec stash_double("", "LayerNormalization", 2, 3);
  stash_double.integer("stash_type", EDGERT_DTYPE_FLOAT64);
  EXPECT_EQ(list_tactics(k, stash_double.node(), in).size(), 1u) << "Mean and InvStdDev in float64";
  // A dynamic engine lists tactics on shapes whose dims are not known yet (-1: a vision
  // transformer's residual stream after its class token is concatenated at a dynamic batch): the
  // rows tactic is listed all the same (prepare checks the real shape).
  in = {random_input({2, 6, 7}, rng), random_input({7}, rng, true)};
  std::vector<edgert_tensor> views = {view(in[0], false), view(in[1], true)};
  for (int d = 0; d < 3; ++d) views[0].dims[d] = -1;
  NodeSpec dynamic("", "LayerNormalization", 2);
  const edgert_node node = dynamic.node();
  std::vector<edgert_tactic> listed(8);
  listed.resize(static_cast<size_t>(k.tactics(&k, &node, views.data(), listed.data(), 8)));
  ASSERT_EQ(listed.size(), 2u) << "X [-1, -1, -1], Scale [7]";
  EXPECT_STREQ(listed[0].name, "f32-layer-norm-rows-portable");
  views[0].rank = -1;  // not even the rank known
  listed.resize(8);
  listed.resize(static_cast<size_t>(k.tactics(&k, &node, views.data(), listed.data(), 8)));
  ASSERT_EQ(listed.size(), 2u) << "X of unknown rank, Scale [7]";
  EXPECT_STREQ(listed[0].name, "f32-layer-norm-rows-portable");
}

TEST(CpuTactics, RmsNormTacticsMatchTheReference) {
  std::mt19937 rng(42);
  const edgert_kernel& k = kernel_named("ref-rms-normalization");
  for (const NormCase& c : norm_cases()) {
    std::vector<Input> in = {random_input(c.dims, rng), random_input(normalized_dims(c), rng, true)};
    for (float& v : in[0].values) v += c.offset;
    NodeSpec spec("", "RMSNormalization", 2);
    spec.integer("axis", c.axis).real("epsilon", 1e-5f);
    const std::string what = "RMSNormalization " + dims_string(c.dims) + " axis " + std::to_string(c.axis);
    const std::vector<edgert_tactic> listed = list_tactics(k, spec.node(), in);
    ASSERT_EQ(listed.size(), 2u) << what;
    EXPECT_STREQ(listed[0].name, "f32-rms-norm-rows-portable") << what;
    expect_outputs_near_the_reference("ref-rms-normalization", spec, in, listed[0].id, what);
    EXPECT_EQ(check_all_tactics("ref-rms-normalization", spec, in, what, -1, 1e-5f).size(), 1u);
  }
  std::vector<Input> in = {random_input({2, 6, 7}, rng), random_input({6, 1}, rng, true)};
  NodeSpec broadcast("", "RMSNormalization", 2);
  broadcast.integer("axis", 1);
  EXPECT_EQ(list_tactics(k, broadcast.node(), in).size(), 1u) << "Scale [6x1] over rows of 6x7";
  expect_outputs_near_the_reference("ref-rms-normalization", broadcast, in, 60, "Scale broadcast");
}

// Random bytes of a tensor whose elements have `elem` bytes, as a dtype of that size: the ops
// below only move bytes, so any pattern (NaN payloads included) must come out the same.
Tensor random_tensor(size_t elem, std::vector<int64_t> dims, std::mt19937& rng) {
  const edgert_dtype dtype = elem == 1   ? EDGERT_DTYPE_UINT8
                             : elem == 2 ? EDGERT_DTYPE_FLOAT16
                             : elem == 4 ? EDGERT_DTYPE_FLOAT32
                                         : EDGERT_DTYPE_INT64;
  const int64_t bytes = count_of(dims) * static_cast<int64_t>(elem);  // before dims is moved from
  return Tensor::of<uint8_t>(dtype, std::move(dims), random_values<uint8_t>(rng, bytes, 0, 255));
}

// Every optimized tactic listed for the node against the reference, byte for byte, with 1 and 2
// threads (run_tactic poisons the output first: every byte must be written). Returns how many ran.
size_t check_tactics_bit_for_bit(const char* kernel, const NodeSpec& spec, const std::vector<Tensor>& inputs,
                                 const std::string& what) {
  const edgert_kernel& k = kernel_named(kernel);
  const edgert_node node = spec.node();
  const std::vector<edgert_tactic> tactics = list_tactics(k, node, inputs);
  EXPECT_EQ(tactics.back().id, 0) << "the reference must come last";
  const std::vector<uint8_t> reference = run_tactic(k, node, inputs, 0);
  size_t ran = 0;
  for (const edgert_tactic& t : tactics) {
    if (t.id == 0) continue;
    ++ran;
    for (int threads : {1, 2}) {
      set_threads(threads);
      const std::vector<uint8_t> got = run_tactic(k, node, inputs, t.id);
      EXPECT_EQ(got.size(), reference.size()) << what << " tactic " << t.name;
      if (got.size() != reference.size()) continue;
      size_t first_bad = 0;
      while (first_bad < got.size() && got[first_bad] == reference[first_bad]) ++first_bad;
      EXPECT_EQ(first_bad, got.size()) << what << ": tactic " << t.id << " (" << t.name << ") with " << threads
                                       << " thread(s) differs from the reference first at byte " << first_bad;
    }
  }
  set_threads(0);
  return ran;
}

TEST(CpuTactics, PadTacticMatchesTheReferenceBitForBit) {
  std::mt19937 rng(43);
  struct Case {
    std::vector<int64_t> dims, pads;
    const char* mode;
    size_t elem;
  };
  std::vector<Case> cases = {
      {{1, 56, 56, 96}, {0, 0, 0, 0, 0, 0, 0, 0}, "constant", 4},   // swin_t's windows at 224x224: a copy
      {{1, 55, 53, 96}, {0, 0, 0, 0, 0, 2, 4, 0}, "constant", 4},   // windows padded to 7s, rows of W x C
      {{1, 3, 17, 33}, {0, 0, 1, 2, 0, 0, 3, 1}, "reflect", 4},     // NCHW, H and W
      {{2, 5, 769}, {0, 1, 3, 1, 0, 5}, "edge", 2},                 // odd rows
      {{2, 5, 769}, {0, -1, -3, 0, 2, -5}, "constant", 1},          // crops and pads at once
      {{3, 1, 7}, {0, 2, 0, 0, 2, 0}, "reflect", 8},                // reflect of a dim of 1
      {{4, 7}, {2, 9, 3, 8}, "wrap", 4},                            // pads past the dim
      {{2, 0, 3}, {1, 2, 0, 0, 1, 1}, "constant", 4},               // an empty input
      {{6}, {-6, 3}, "constant", 2},                                // everything cropped
      {{129, 130, 3}, {1, 0, 0, 0, 2, 0}, "edge", 4},               // rows of rows, spread over threads
  };
  // Random ones: rank 1 to 5, dims 1 to 9, pads -2 to 3 (whatever leaves each dim >= 0; the
  // modes that read the input need a non-empty dim, and reflect one longer than its pads).
  const char* modes[] = {"constant", "reflect", "edge", "wrap"};
  const size_t elems[] = {1, 2, 4, 8};
  std::uniform_int_distribution<int64_t> rank_of(1, 5), dim_of(1, 9), pad_of(-2, 3);
  for (int i = 0; i < 60; ++i) {
    Case c{{}, {}, modes[i % 4], elems[(i / 4) % 4]};
    const int64_t rank = rank_of(rng);
    for (int64_t a = 0; a < rank; ++a) c.dims.push_back(dim_of(rng));
    c.pads.assign(static_cast<size_t>(2 * rank), 0);
    for (int64_t a = 0; a < rank; ++a) {
      if (rng() % 3 == 0) continue;  // many dims unpadded: those merge
      do {
        c.pads[a] = pad_of(rng);
        c.pads[a + rank] = pad_of(rng);
      } while (c.dims[a] + c.pads[a] + c.pads[a + rank] < 0);
    }
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    for (int value_kind = 0; value_kind < 3; ++value_kind) {  // none (zero), a random value, a zero value
      if (value_kind > 0 && std::string(c.mode) != "constant") break;
      std::vector<Tensor> in = {random_tensor(c.elem, c.dims, rng),
                                Tensor::of<int64_t>(EDGERT_DTYPE_INT64, {static_cast<int64_t>(c.pads.size())}, c.pads, true)};
      if (value_kind > 0) {
        Tensor value = random_tensor(c.elem, {}, rng);
        if (value_kind == 2) std::fill(value.bytes.begin(), value.bytes.end(), 0);
        value.constant = true;
        in.push_back(value);
      }
      NodeSpec spec("", "Pad", static_cast<int>(in.size()));
      spec.string("mode", c.mode);
      std::string pads;
      for (int64_t p : c.pads) pads += (pads.empty() ? "" : ",") + std::to_string(p);
      const std::string what = std::string("Pad ") + c.mode + " " + dims_string(c.dims) + " pads " + pads + " of " +
                               std::to_string(c.elem) + "-byte elements, value " + std::to_string(value_kind);
      const std::vector<edgert_tactic> listed = list_tactics(kernel_named("ref-pad"), spec.node(), in);
      ASSERT_EQ(listed.size(), 2u) << what;
      EXPECT_STREQ(listed[0].name, "xx-pad-rows-portable") << what;
      EXPECT_EQ(check_tactics_bit_for_bit("ref-pad", spec, in, what), 1u) << what;
    }
  }
  // Opset 18's axes: pads for the named dims only.
  std::vector<Tensor> in = {random_tensor(4, {2, 7, 5}, rng),
                            Tensor::of<int64_t>(EDGERT_DTYPE_INT64, {4}, std::vector<int64_t>{1, -1, 2, 3}, true),
                            Tensor::of<float>(EDGERT_DTYPE_FLOAT32, {}, std::vector<float>{-0.0f}, true),
                            Tensor::of<int64_t>(EDGERT_DTYPE_INT64, {2}, std::vector<int64_t>{-1, 0}, true)};
  NodeSpec with_axes("", "Pad", 4);
  EXPECT_EQ(check_tactics_bit_for_bit("ref-pad", with_axes, in, "Pad with axes and a value of -0"), 1u);
}

TEST(CpuTactics, TransposeTacticMatchesTheReferenceBitForBit) {
  std::mt19937 rng(44);
  struct Case {
    std::vector<int64_t> dims, perm;
    size_t elem;
  };
  std::vector<Case> cases = {
      {{1, 96, 56, 56}, {0, 2, 3, 1}, 4},            // NCHW to NHWC (swin_t's patch embedding)
      {{64, 3, 49, 32}, {0, 1, 3, 2}, 4},            // K^T of windowed attention
      {{1, 8, 7, 8, 7, 96}, {0, 1, 3, 2, 4, 5}, 4},  // window partition: runs of C
      {{3, 64, 49, 3, 32}, {3, 0, 1, 2, 4}, 4},      // QKV split: runs of the head dim
      {{33, 769}, {1, 0}, 1},
      {{33, 769}, {1, 0}, 2},
      {{17, 7, 31}, {2, 0, 1}, 8},
      {{5, 1, 9}, {2, 1, 0}, 4},                     // a dim of 1 in the middle
      {{4, 1}, {1, 0}, 4},                           // the innermost dim of 1: a copy
      {{2, 3, 4}, {0, 1, 2}, 2},                     // identity
      {{7}, {0}, 8},
      {{2, 0, 3}, {2, 1, 0}, 4},                     // empty
  };
  // Random permutations of rank 2 to 6 (identity among them), dims 1 to 9.
  const size_t elems[] = {1, 2, 4, 8};
  std::uniform_int_distribution<int64_t> rank_of(2, 6), dim_of(1, 9);
  for (int i = 0; i < 80; ++i) {
    Case c{{}, {}, elems[i % 4]};
    const int64_t rank = rank_of(rng);
    for (int64_t a = 0; a < rank; ++a) {
      c.dims.push_back(dim_of(rng));
      c.perm.push_back(a);
    }
    if (i % 10 != 0) std::shuffle(c.perm.begin(), c.perm.end(), rng);
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    std::vector<Tensor> in = {random_tensor(c.elem, c.dims, rng)};
    NodeSpec spec("", "Transpose", 1);
    spec.ints("perm", c.perm);
    const std::string what = "Transpose " + dims_string(c.dims) + " perm " + dims_string(c.perm) + " of " +
                             std::to_string(c.elem) + "-byte elements";
    const std::vector<edgert_tactic> listed = list_tactics(kernel_named("ref-transpose"), spec.node(), in);
    ASSERT_EQ(listed.size(), 2u) << what;
    EXPECT_STREQ(listed[0].name, "xx-transpose-tiled-portable") << what;
    EXPECT_EQ(check_tactics_bit_for_bit("ref-transpose", spec, in, what), 1u) << what;
  }
}

TEST(CpuTactics, ConfigureRefusesANegativeThreadCount) {
  edgert_plugin_config config{sizeof(edgert_plugin_config), -3, 0};
  edgert_error error{};
  EXPECT_EQ(cpu_plugin().table->configure(&config, &error), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(error.message, "num_threads"), nullptr) << error.message;
}

// edgertd runs engines on several threads at once (a worker per pipeline, a swap's warm-up) over
// the one process-wide pool: concurrent callers must each get the reference's results.
TEST(CpuTactics, ConcurrentCallersShareThePoolSafely) {
  std::mt19937 rng(99);
  const ConvCase& c = conv_cases()[8];  // 3x3 s1: im2col and Winograd, both threaded
  ASSERT_TRUE(c.kh == 3 && c.kw == 3 && c.stride_h == 1 && c.group == 1) << describe(c);
  const std::vector<Input> in = conv_inputs(c, rng);
  const edgert_kernel& k = kernel_named("ref-conv");
  const NodeSpec spec = conv_node(c, "", "Conv", 3);
  const edgert_node node = spec.node();
  const std::vector<edgert_tactic> tactics = list_tactics(k, node, in);
  ASSERT_GT(tactics.size(), 1u);
  const std::vector<float> reference = run_tactic(k, node, in, 0);
  set_threads(2);
  std::atomic<int> mismatches{0};
  auto hammer = [&](int64_t tactic) {
    for (int i = 0; i < 40; ++i) {
      std::vector<float> got = run_tactic(k, node, in, tactic);
      for (size_t j = 0; j < got.size(); ++j)
        if (!(std::fabs(got[j] - reference[j]) <= 2e-4f * std::max(1.0f, std::fabs(reference[j])))) {
          ++mismatches;
          break;
        }
    }
  };
  std::vector<std::thread> callers;
  for (size_t t = 0; t + 1 < tactics.size() && callers.size() < 3; ++t) callers.emplace_back(hammer, tactics[t].id);
  callers.emplace_back(hammer, tactics.front().id);
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(mismatches.load(), 0) << "runs that differ from the reference with " << callers.size() << " concurrent callers";
}

}  // namespace
}  // namespace edgert::test
