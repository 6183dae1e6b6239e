#include "bench_versus.h"

#include <algorithm>
#include <chrono>

#include "build_error.h"
#include "execution_context.h"
#include "latency_stats.h"

namespace edgert::cli {

namespace {

struct Timed {
  ExecutionContext context;
  const char* label;
  std::vector<double> ms;

  Timed(const LoadedEngine& engine, const char* label) : context(engine), label(label) {}

  double run(const std::vector<edgert_tensor>& inputs) {
    edgert_error error{};
    const auto start = std::chrono::steady_clock::now();
    if (context.run(inputs.data(), static_cast<int32_t>(inputs.size()), &error) != EDGERT_OK)
      builder::build_fail(error.status, "%s: %s", label, error.message);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
};

}  // namespace

nlohmann::ordered_json bench_versus(const LoadedEngine& a, const std::string& a_path, const LoadedEngine& b,
                                    const std::string& b_path, const std::vector<edgert_tensor>& inputs,
                                    const VersusSettings& settings, FILE* text) {
  // Inputs are bound in engine order: the same names in the same order, or the comparison would
  // feed one engine's tensors to the other's different inputs.
  if (a.input_names() != b.input_names()) {
    std::string an, bn;
    for (const std::string& n : a.input_names()) an += (an.empty() ? "" : ", ") + n;
    for (const std::string& n : b.input_names()) bn += (bn.empty() ? "" : ", ") + n;
    builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "--versus: '%s' has inputs (%s) but '%s' has (%s)",
                        b_path.c_str(), bn.c_str(), a_path.c_str(), an.c_str());
  }
  const std::string a_label = "engine '" + a_path + "'", b_label = "--versus engine '" + b_path + "'";
  Timed first(a, a_label.c_str()), second(b, b_label.c_str());
  const auto warmup_start = std::chrono::steady_clock::now();
  int warmups = 0;
  while (warmups < settings.warmup ||
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_start).count() <
             settings.warmup_ms) {
    first.run(inputs);
    second.run(inputs);
    ++warmups;
  }
  std::vector<double> ratios;  // second / first, per pair
  int second_faster = 0;
  const auto start = std::chrono::steady_clock::now();
  double wall_s = 0;
  for (int pair = 0; pair < settings.pairs || wall_s < settings.duration_s; ++pair) {
    // Which goes first alternates: a run can leave the caches or the clock to the next one.
    double ms_first, ms_second;
    if (pair % 2 == 0) {
      ms_first = first.run(inputs);
      ms_second = second.run(inputs);
    } else {
      ms_second = second.run(inputs);
      ms_first = first.run(inputs);
    }
    first.ms.push_back(ms_first);
    second.ms.push_back(ms_second);
    ratios.push_back(ms_second / ms_first);
    second_faster += ms_second < ms_first;
    wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double ratio = median(ratios);
  const size_t pairs = ratios.size();
  std::fprintf(text, "engine %s: median %.3f ms, min %.3f ms\n", a_path.c_str(), median(first.ms),
               *std::min_element(first.ms.begin(), first.ms.end()));
  std::fprintf(text, "versus %s: median %.3f ms, min %.3f ms\n", b_path.c_str(), median(second.ms),
               *std::min_element(second.ms.begin(), second.ms.end()));
  std::fprintf(text, "versus / engine: %.3fx (median of %zu paired runs' ratios); versus faster in %d of %zu pairs, "
               "after %d warm-up run(s) each\n", ratio, pairs, second_faster, pairs, warmups);
  return {{"engine", a_path},
          {"versus", b_path},
          {"warmup_runs", warmups},
          {"pairs", pairs},
          {"duration_s", wall_s},
          {"latency_ms", latency_json(first.ms)},
          {"versus_latency_ms", latency_json(second.ms)},
          {"ratio", ratio},
          {"versus_faster_pairs", second_faster}};
}

}  // namespace edgert::cli
