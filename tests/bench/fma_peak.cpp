// The machine's measured float32 FMA peak, the ceiling kernel GFLOP/s are compared against
// (tests/bench/RESULTS.md).
//
//   edgert_fma_peak [--threads 1,2] [--seconds 1.0]
//
// Each thread runs chains of independent fused multiply-adds on registers only (enough chains
// to cover FMA latency times the FMA ports), so the figure is the core's arithmetic ceiling,
// not memory's. One line per ISA and thread count, then a JSON line with every figure:
//   {"cpu": ..., "results": [{"isa": "avx2-fma", "threads": 1, "gflops": ...}, ...]}
// The ISA is chosen at run time (cpuid): AVX2+FMA (8 floats per FMA) and, where the CPU and OS
// have it, AVX-512F (16). Built for any x86-64; on other machines it says so and exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

// Independent accumulators per thread (EDGERT_FMA_CHAINS): FMA latency (4-5 cycles) x 2 ports
// needs >= 10.
constexpr int kChains = 12;

#if defined(__x86_64__)
// Twelve named accumulators, not an array: an array indexed in a loop may live in memory,
// and a store/load per FMA would measure the cache instead of the FMA units.
#define EDGERT_FMA_CHAINS(FMA) \
  FMA(a0) FMA(a1) FMA(a2) FMA(a3) FMA(a4) FMA(a5) FMA(a6) FMA(a7) FMA(a8) FMA(a9) FMA(a10) FMA(a11)

__attribute__((target("avx2,fma"))) double fma_avx2(long iterations) {
  __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(0.1f), a2 = _mm256_set1_ps(0.2f), a3 = _mm256_set1_ps(0.3f),
         a4 = _mm256_set1_ps(0.4f), a5 = _mm256_set1_ps(0.5f), a6 = _mm256_set1_ps(0.6f), a7 = _mm256_set1_ps(0.7f),
         a8 = _mm256_set1_ps(0.8f), a9 = _mm256_set1_ps(0.9f), a10 = _mm256_set1_ps(1.0f), a11 = _mm256_set1_ps(1.1f);
  const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i) {
#define EDGERT_FMA256(x) x = _mm256_fmadd_ps(x, m, b);
    EDGERT_FMA_CHAINS(EDGERT_FMA256)
#undef EDGERT_FMA256
  }
  __m256 sum = _mm256_setzero_ps();
#define EDGERT_ADD256(x) sum = _mm256_add_ps(sum, x);
  EDGERT_FMA_CHAINS(EDGERT_ADD256)
#undef EDGERT_ADD256
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0];  // keeps the chains alive
}

__attribute__((target("avx512f"))) double fma_avx512(long iterations) {
  __m512 a0 = _mm512_set1_ps(0.0f), a1 = _mm512_set1_ps(0.1f), a2 = _mm512_set1_ps(0.2f), a3 = _mm512_set1_ps(0.3f),
         a4 = _mm512_set1_ps(0.4f), a5 = _mm512_set1_ps(0.5f), a6 = _mm512_set1_ps(0.6f), a7 = _mm512_set1_ps(0.7f),
         a8 = _mm512_set1_ps(0.8f), a9 = _mm512_set1_ps(0.9f), a10 = _mm512_set1_ps(1.0f), a11 = _mm512_set1_ps(1.1f);
  const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i) {
#define EDGERT_FMA512(x) x = _mm512_fmadd_ps(x, m, b);
    EDGERT_FMA_CHAINS(EDGERT_FMA512)
#undef EDGERT_FMA512
  }
  __m512 sum = _mm512_setzero_ps();
#define EDGERT_ADD512(x) sum = _mm512_add_ps(sum, x);
  EDGERT_FMA_CHAINS(EDGERT_ADD512)
#undef EDGERT_ADD512
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return lanes[0];
}
#endif

struct Isa {
  const char* name;
  int lanes;
  double (*kernel)(long);
};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// GFLOP/s of `threads` threads each running `isa` for about `seconds`.
double measure(const Isa& isa, int threads, double seconds) {
  // Calibrate the iteration count on one short run, then time the real one.
  long iterations = 1 << 16;
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    volatile double sink = isa.kernel(iterations);
    (void)sink;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > 0.05) {
      iterations = static_cast<long>(static_cast<double>(iterations) * seconds / s);
      break;
    }
    iterations *= 4;
  }
  std::vector<std::thread> pool;
  std::vector<double> sinks(static_cast<size_t>(threads));
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sinks[static_cast<size_t>(t)] = isa.kernel(iterations); });
  for (std::thread& t : pool) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double flops = 2.0 * isa.lanes * kChains * static_cast<double>(iterations) * threads;
  return flops / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  double seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      std::string list = argv[++i];
      for (size_t pos = 0; pos < list.size();) {
        size_t comma = list.find(',', pos);
        thread_counts.push_back(std::atoi(list.substr(pos, comma - pos).c_str()));
        pos = comma == std::string::npos ? list.size() : comma + 1;
      }
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--seconds 1.0]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Isa> isas;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isas.push_back({"avx2-fma", 8, fma_avx2});
  if (__builtin_cpu_supports("avx512f")) isas.push_back({"avx512f", 16, fma_avx512});
#endif
  if (isas.empty()) {
    std::printf("no supported FMA ISA on this machine (x86-64 AVX2+FMA or AVX-512F)\n");
    return 0;
  }
  std::string json = "{\"cpu\": \"" + cpu_model() + "\", \"results\": [";
  bool first = true;
  for (const Isa& isa : isas)
    for (int threads : thread_counts) {
      if (threads < 1) continue;
      double gflops = measure(isa, threads, seconds);
      std::printf("%-9s threads %d: %8.1f GFLOP/s\n", isa.name, threads, gflops);
      char item[160];
      std::snprintf(item, sizeof item, "%s{\"isa\": \"%s\", \"threads\": %d, \"gflops\": %.2f}", first ? "" : ", ",
                    isa.name, threads, gflops);
      json += item;
      first = false;
    }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
