#include "fast/unary_rows.h"

#include <algorithm>
#include <cstring>

#include "gemm/sgemm.h"
#include "thread_pool.h"

namespace edgert::cpu {

std::vector<TacticSpec> activation_tactics(const edgert_node*, const edgert_tensor* inputs) {
  if (inputs[0].dtype != EDGERT_DTYPE_FLOAT32) return {};
  return {{kActivationRowsTactic, "f32-activation-rows-portable"}};
}

void activation_rows(const float* x, float* y, int64_t n, const Activation& activation) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto run = [&](int64_t c, int) {
    const int64_t begin = c * kChunk, count = std::min(kChunk, n - begin);
    if (x != y) std::memcpy(y + begin, x + begin, static_cast<size_t>(count) * sizeof(float));
    gemm::apply_activation(y + begin, count, activation);
  };
  if (chunks <= 1) {
    if (n > 0) run(0, 0);
    return;
  }
  ThreadPool::instance().parallel_for(chunks, run);
}

}  // namespace edgert::cpu
