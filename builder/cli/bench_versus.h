// `edgert bench ENGINE --versus OTHER`: two engines timed in one process, their runs taking turns
// (A B, B A, A B, ...), and the answer given as the median of each pair's OTHER / ENGINE ratio.
// On a shared or thermally throttled machine the speed drifts over seconds and minutes; two
// `edgert bench` processes run one after the other see different machines, while the two runs
// of a pair, milliseconds apart, see the same one. Same-process A/B decided most of the CPU
// plugin's tuning changes where separate runs disagreed by 10-20% (the history of tests/bench/RESULTS.md).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "edgert/types.h"
#include "loaded_engine.h"

namespace edgert::cli {

struct VersusSettings {
  int warmup = 2;          // untimed runs of each engine first
  int pairs = 20;          // timed pairs, at least
  double duration_s = 0;   // and at least this long
  double warmup_ms = 0;    // warm-up goes on until this many milliseconds have passed too
};

// Times `a` and `b` on the same `inputs` (checked against both engines' input shapes: a mismatch
// throws BuildError naming the input); prints the report to `text` and returns it as JSON
// (fields in README.md).
nlohmann::ordered_json bench_versus(const LoadedEngine& a, const std::string& a_path, const LoadedEngine& b,
                                    const std::string& b_path, const std::vector<edgert_tensor>& inputs,
                                    const VersusSettings& settings, FILE* text);

}  // namespace edgert::cli
