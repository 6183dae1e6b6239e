// The INT8 QLinearConv tactics (u8 x s8, NCHW) against the float32 Conv tactics at the layer
// shapes of resnet18, mobilenet_v2, squeezenet1_1 and efficientnet_b0, through the CPU plugin's C ABI as an engine runs them:
//
//   edgert_qlinear_conv_vs_conv [--seconds 0.2] [--threads 1,2] [--only <part of a layer's name>] [--all 1]
//
// One line per shape and thread count: the fastest float32 tactic and the fastest INT8 one (each
// the best of every tactic the plugin lists for the node on this CPU, each timed as the best of
// several batches) and the ratio int8 time / fp32 time; --all 1 also prints every tactic's time.
// Not a test: nothing is asserted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_plugin_abi.h"

namespace {

using namespace edgert::test;

// Seconds per call of fn: the fastest of 5 batches, each long enough to last `seconds` / 5.
template <typename Fn>
double seconds_per_call(Fn&& fn, double seconds) {
  using Clock = std::chrono::steady_clock;
  fn();
  int64_t calls = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int64_t c = 0; c < calls; ++c) fn();
    if (std::chrono::duration<double>(Clock::now() - t0).count() > seconds / 20) break;
    calls *= 2;
  }
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    const auto t0 = Clock::now();
    for (int64_t c = 0; c < calls; ++c) fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(calls));
  }
  return best;
}

struct Layer {
  const char* what;
  int64_t channels, out_channels, size, kernel, stride, group;
};

NodeSpec conv_node(const char* op, const Layer& l, int inputs) {
  NodeSpec spec("", op, inputs);
  const int64_t pad = l.kernel / 2;
  spec.ints("kernel_shape", {l.kernel, l.kernel})
      .ints("strides", {l.stride, l.stride})
      .ints("pads", {pad, pad, pad, pad})
      .integer("group", l.group);
  return spec;
}

bool print_every_tactic = false;

struct Best {
  double seconds = 1e30;
  std::string name = "-";
};

Best fastest(const char* kernel, const NodeSpec& spec, const std::vector<Tensor>& inputs, double seconds) {
  const edgert_kernel& k = kernel_named(cpu_plugin_in(EDGERT_BENCH_PLUGIN_DIR), kernel);
  const edgert_node node = spec.node();
  Best best;
  for (const edgert_tactic& t : list_tactics(k, node, inputs)) {
    if (t.id == 0) continue;  // the references are not what an engine would run
    PreparedRun run(k, node, inputs, t.id);
    const double s = seconds_per_call([&] { run.execute(); }, seconds);
    if (print_every_tactic) std::printf("    %-44s %10.1f us\n", t.name, s * 1e6);
    if (s < best.seconds) best = {s, t.name};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.2;
  std::vector<int> thread_counts = {1, 2};
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--all") == 0) print_every_tactic = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--threads") == 0) {
      thread_counts.clear();
      for (const char* p = argv[i + 1]; *p;) {
        thread_counts.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    }
  }
  const Layer layers[] = {
      {"resnet18 conv1 7x7/2", 3, 64, 224, 7, 2, 1},
      {"resnet18 layer1 3x3", 64, 64, 56, 3, 1, 1},
      {"resnet18 layer2 3x3/2", 64, 128, 56, 3, 2, 1},
      {"resnet18 layer2 3x3", 128, 128, 28, 3, 1, 1},
      {"resnet18 layer2 down 1x1/2", 64, 128, 56, 1, 2, 1},
      {"resnet18 layer3 3x3", 256, 256, 14, 3, 1, 1},
      {"resnet18 layer4 3x3", 512, 512, 7, 3, 1, 1},
      {"mnv2 expand 1x1 24->144", 24, 144, 56, 1, 1, 1},
      {"mnv2 dw 3x3 144", 144, 144, 56, 3, 1, 144},
      {"mnv2 dw 3x3/2 144", 144, 144, 56, 3, 2, 144},
      {"mnv2 project 1x1 144->24", 144, 24, 56, 1, 1, 1},
      {"mnv2 expand 1x1 32->192", 32, 192, 28, 1, 1, 1},
      {"mnv2 dw 3x3 192", 192, 192, 28, 3, 1, 192},
      {"mnv2 expand 1x1 96->576", 96, 576, 14, 1, 1, 1},
      {"mnv2 dw 3x3 576", 576, 576, 14, 3, 1, 576},
      {"mnv2 dw 3x3 960", 960, 960, 7, 3, 1, 960},
      {"mnv2 last 1x1 320->1280", 320, 1280, 7, 1, 1, 1},
      {"mnv2 stem 3x3/2", 3, 32, 224, 3, 2, 1},
      {"squeezenet expand 3x3 16->64", 16, 64, 55, 3, 1, 1},
      {"effnet dw 5x5/2 144", 144, 144, 56, 5, 2, 144},
      {"effnet dw 5x5 240", 240, 240, 28, 5, 1, 240},
      {"effnet dw 5x5 672", 672, 672, 14, 5, 1, 672},
      {"effnet dw 5x5 1152", 1152, 1152, 7, 5, 1, 1152},
      {"effnet se 1x1 1152->48", 1152, 48, 1, 1, 1, 1},
      {"effnet se 1x1 48->1152", 48, 1152, 1, 1, 1, 1},
  };
  std::mt19937 rng(1);
  std::printf("%-28s %3s %10s %-40s %10s %-40s %6s\n", "layer", "thr", "fp32 us", "fp32 tactic", "int8 us",
              "int8 tactic", "ratio");
  for (const Layer& l : layers) {
    if (std::string(l.what).find(only) == std::string::npos) continue;
    const int64_t cg = l.channels / l.group, k = cg * l.kernel * l.kernel, image = l.channels * l.size * l.size;
    std::vector<Tensor> f32 = {
        Tensor::of(EDGERT_DTYPE_FLOAT32, {1, l.channels, l.size, l.size}, random_values<float>(rng, image, -1, 1)),
        Tensor::of(EDGERT_DTYPE_FLOAT32, {l.out_channels, cg, l.kernel, l.kernel},
                   random_values<float>(rng, l.out_channels * k, -0.1, 0.1), true),
        Tensor::of(EDGERT_DTYPE_FLOAT32, {l.out_channels}, random_values<float>(rng, l.out_channels, -0.1, 0.1), true)};
    std::vector<Tensor> q = {
        Tensor::of(EDGERT_DTYPE_UINT8, {1, l.channels, l.size, l.size}, random_values<uint8_t>(rng, image, 0, 255)),
        Tensor::of<float>(EDGERT_DTYPE_FLOAT32, {}, {0.02f}, true),
        Tensor::of<uint8_t>(EDGERT_DTYPE_UINT8, {}, {128}, true),
        Tensor::of(EDGERT_DTYPE_INT8, {l.out_channels, cg, l.kernel, l.kernel},
                   random_values<int8_t>(rng, l.out_channels * k, -128, 127), true),
        Tensor::of(EDGERT_DTYPE_FLOAT32, {l.out_channels}, random_values<float>(rng, l.out_channels, 0.005, 0.02),
                   true),
        Tensor::of(EDGERT_DTYPE_INT8, {l.out_channels}, std::vector<int8_t>(static_cast<size_t>(l.out_channels), 0),
                   true),
        Tensor::of<float>(EDGERT_DTYPE_FLOAT32, {}, {0.02f * std::sqrt(static_cast<float>(k))}, true),
        Tensor::of<uint8_t>(EDGERT_DTYPE_UINT8, {}, {100}, true),
        Tensor::of(EDGERT_DTYPE_INT32, {l.out_channels}, random_values<int32_t>(rng, l.out_channels, -2000, 2000),
                   true)};
    for (int threads : thread_counts) {
      set_threads(cpu_plugin_in(EDGERT_BENCH_PLUGIN_DIR), threads);
      const Best a = fastest("ref-conv", conv_node("Conv", l, 3), f32, seconds);
      const Best b = fastest("ref-qlinear-conv", conv_node("QLinearConv", l, 9), q, seconds);
      std::printf("%-28s %3d %10.1f %-40s %10.1f %-40s %6.2f\n", l.what, threads, a.seconds * 1e6, a.name.c_str(),
                  b.seconds * 1e6, b.name.c_str(), b.seconds / a.seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
