// edgert_engine_agreement ENGINE_A ENGINE_B COUNT [SEED]: runs COUNT seeded random inputs
// (standard normal, the distribution the zoo's batch norms were calibrated on) through two engines of the same model (e.g. its FP16 and FP32
// builds) and prints one JSON object: how often their first outputs' top-1 classes agree,
// and the largest and median relative L2 distance between those outputs. tests/gpu/gpu_zoo.py
// runs it on the GPU machine for the FP16 accuracy criterion (top-1 on at least 99% of 200
// inputs, relative L2 <= 1e-2).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "edgert/edgert.hpp"

namespace {

size_t argmax(const float* p, size_t n) { return static_cast<size_t>(std::max_element(p, p + n) - p); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s ENGINE_A ENGINE_B COUNT [SEED]\n", argv[0]);
    return 2;
  }
  const int count = std::atoi(argv[3]);
  const unsigned seed = argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : 2026u;
  try {
    edgert_load_options options;
    edgert_load_options_init(&options);
    options.allow_board_mismatch = 1;
    edgert::Engine a(argv[1], &options), b(argv[2], &options);
    edgert_tensor_info info{};
    edgert_engine_input_info(a.get(), 0, &info);
    size_t n = 1;
    for (int32_t d = 0; d < info.rank; ++d) n *= static_cast<size_t>(info.dims[d] > 0 ? info.dims[d] : 1);
    edgert::Context ca(a), cb(b);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    int agree = 0;
    std::vector<double> distances;
    for (int i = 0; i < count; ++i) {
      for (float& v : x) v = normal(rng);
      edgert_tensor t{EDGERT_DTYPE_FLOAT32, info.rank, {}, x.data()};
      for (int32_t d = 0; d < info.rank; ++d) t.dims[d] = info.dims[d] > 0 ? info.dims[d] : 1;
      ca.run({t});
      cb.run({t});
      const edgert_tensor ya = ca.output(0), yb = cb.output(0);
      size_t m = 1;
      for (int32_t d = 0; d < ya.rank; ++d) m *= static_cast<size_t>(ya.dims[d]);
      const float* pa = static_cast<const float*>(ya.data);
      const float* pb = static_cast<const float*>(yb.data);
      agree += argmax(pa, m) == argmax(pb, m);
      double num = 0, den = 0;
      for (size_t k = 0; k < m; ++k) {
        num += (pa[k] - pb[k]) * double(pa[k] - pb[k]);
        den += pb[k] * double(pb[k]);
      }
      distances.push_back(std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-30)) : 1e30);
    }
    std::sort(distances.begin(), distances.end());
    std::printf("{\"count\": %d, \"top1_agreement\": %.4f, \"max_rel_l2\": %.3g, \"median_rel_l2\": %.3g}\n", count,
                count ? double(agree) / count : 0.0, distances.empty() ? 0.0 : distances.back(),
                distances.empty() ? 0.0 : distances[distances.size() / 2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgert_engine_agreement: %s\n", e.what());
    return 1;
  }
  return 0;
}
