// The INT8 GEMM (qgemm, u8 x s8 with a requantising epilogue) against the float32 sgemm at the
// shapes of the 1x1 convolutions of mobilenet and resnet, on one thread:
//
//   edgert_qgemm_vs_sgemm [--seconds 0.3]
//
// One line per shape: M (output pixels) x N (output channels) x K (input channels), and the
// GOP/s of each (2 M N K operations per run, the best of several timed batches), the FP32 figure
// being the fastest of the sgemm tiles a tactic could pick (8x32 packed or in place, 48x7 tall).
// Not a test: nothing is asserted, the numbers are for tests/bench/RESULTS.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gemm/qgemm.h"
#include "gemm/sgemm.h"
#include "thread_pool.h"

namespace {

using namespace edgert::cpu;
using namespace edgert::cpu::gemm;

// Seconds per call of fn: the fastest of 5 batches, each long enough to last `seconds` / 5.
template <typename Fn>
double seconds_per_call(Fn&& fn, double seconds) {
  using Clock = std::chrono::steady_clock;
  fn();
  int64_t calls = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int64_t c = 0; c < calls; ++c) fn();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t > seconds / 20) break;
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

struct GemmShape {
  int64_t m, n, k;
  const char* what;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.3;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
  ThreadPool::instance().configure(1, false);
  const QgemmIsa qisa = qgemm_best_isa();
  std::printf("int8: %s, fp32: sgemm best of its AVX-512 tiles; 1 thread; GOP/s = 2 M N K / s\n",
              qisa == QgemmIsa::Avx512Vnni ? "u8s8-12x32-avx512vnni" : "reference (no VNNI on this CPU)");
  const GemmShape shapes[] = {
      {56 * 56, 64, 64, "resnet 56x56 64->64"},     {56 * 56, 256, 64, "resnet 56x56 64->256"},
      {56 * 56, 64, 256, "resnet 56x56 256->64"},   {56 * 56, 128, 128, "56x56 128->128"},
      {56 * 56, 256, 256, "56x56 256->256"},        {28 * 28, 512, 128, "resnet 28x28 128->512"},
      {14 * 14, 256, 1024, "resnet 14x14 1024->256"}, {7 * 7, 1280, 320, "mobilenet_v2 7x7 320->1280"},
  };
  std::mt19937 rng(1);
  std::printf("%-28s %6s %5s %5s %10s %10s %8s %10s\n", "shape", "M", "N", "K", "int8 GOP/s", "fp32 GFLOP/s", "ratio",
              "int8 s32");
  for (const GemmShape& s : shapes) {
    std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127);
    // INT8: activations [M, K] (NHWC), weights [N, K].
    std::vector<uint8_t> a(static_cast<size_t>(s.m * s.k));
    for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
    std::vector<int8_t> w(static_cast<size_t>(s.n * s.k));
    for (auto& v : w) v = static_cast<int8_t>(weight(rng));
    PackedQWeights packed;
    pack_qweights(w.data(), s.n, s.k, s.k, 1, packed);
    std::vector<int32_t> bias(static_cast<size_t>(s.n), 100);
    std::vector<float> scale(static_cast<size_t>(s.n), 1e-3f);
    std::vector<uint8_t> y_u8(static_cast<size_t>(s.m * s.n));
    std::vector<int32_t> y_s32(static_cast<size_t>(s.m * s.n));
    const QActivations qa{a.data(), s.k, 128};
    QOutput requantised;
    requantised.kind = QOutput::Kind::Uint8;
    requantised.data = y_u8.data();
    requantised.row_stride = s.n;
    requantised.bias = bias.data();
    requantised.scale = scale.data();
    requantised.zero_point = 128;
    requantised.q_min = 128;  // ReLU
    QOutput accumulators;
    accumulators.data = y_s32.data();
    accumulators.row_stride = s.n;
    const double t_u8 = seconds_per_call([&] { qgemm(qisa, packed, qa, s.m, requantised, 1); }, seconds);
    const double t_s32 = seconds_per_call([&] { qgemm(qisa, packed, qa, s.m, accumulators, 1); }, seconds);

    // FP32 as the plugin's 1x1 convolution runs it (NCHW): A = weights [N, K], B = the image [K, M].
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::vector<float> wf(static_cast<size_t>(s.n * s.k)), xf(static_cast<size_t>(s.k * s.m)),
        yf(static_cast<size_t>(s.n * s.m));
    for (auto& v : wf) v = unit(rng);
    for (auto& v : xf) v = unit(rng);
    std::vector<float> bias_f(static_cast<size_t>(s.n), 0.1f);
    Epilogue ep;
    ep.bias_row = bias_f.data();
    ep.activation.kind = ActivationKind::Relu;
    double t_f32 = 1e30;
    for (Isa isa : {Isa::Avx512, Isa::Avx512Tall}) {
      if (!isa_available(isa)) continue;
      PackedA pa;
      pack_a(isa, wf.data(), s.n, s.k, s.k, 1, pa);
      for (bool in_place : {false, true}) {
        BSource b;
        b.data = xf.data();
        b.row_stride = s.m;
        b.in_place = in_place;
        const size_t bytes = workspace_bytes(1, pa, s.m);
        std::vector<float> workspace(bytes / sizeof(float) + 16);
        void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(workspace.data()) + 63) & ~uintptr_t{63});
        const Output y{yf.data(), s.m, 1};
        t_f32 = std::min(t_f32, seconds_per_call([&] { sgemm(pa, b, s.m, y, ep, aligned, 1); }, seconds));
      }
    }
    const double ops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
    std::printf("%-28s %6lld %5lld %5lld %10.1f %10.1f %8.2f %10.1f\n", s.what, static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), ops / t_u8 * 1e-9, ops / t_f32 * 1e-9,
                t_f32 / t_u8, ops / t_s32 * 1e-9);
  }
  return 0;
}
