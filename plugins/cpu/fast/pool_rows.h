// Optimized float32 MaxPool / AveragePool over 2-D (and 1-D) NCHW planes, the tactic
// f32-pool-2d-rows-portable (id 50): per output row, one vectorizable pass per kernel tap,
// planes spread over the thread pool. Same results as the reference (max is exact; the average
// sums in float instead of double).
#pragma once

#include <vector>

#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {

constexpr int64_t kPoolRowsTactic = 50;
constexpr int64_t kGlobalAverageRowsTactic = 51;
constexpr int64_t kMaxPoolAvx512Tactic = 52;
constexpr int64_t kReduceMeanRowsTactic = 53;  // ReduceMean over trailing axes (reduce.cpp)
constexpr int64_t kGlobalAverageAvx512Tactic = 54;
constexpr int64_t kMaxPoolU8RowsTactic = 55;  // MaxPool over uint8 (int8 networks' pools)

#if defined(__x86_64__)
// x86/max_pool_avx512.cpp: the window shapes it runs, and one plane (CPU with AVX-512F only).
bool max_pool_avx512_applies(int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w,
                             int64_t dilation_h, int64_t dilation_w);
void max_pool_plane_avx512(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           int64_t kernel, int64_t stride, int64_t pad_top, int64_t pad_left);
// x86/global_average_avx512.cpp: y[p] = the mean of the size floats of plane p (AVX-512F only).
void plane_means_avx512(const float* x, float* y, int64_t planes, int64_t size);
#endif

// The tactics of a MaxPool/AveragePool node (float32 without an Indices output): the rows
// above, and for MaxPool f32-max-pool-direct-avx512 (id 52) where its shapes apply; a uint8
// MaxPool (the int8 rewrite's) u8-max-pool-2d-rows-portable (id 55), the same rows on bytes.
std::vector<TacticSpec> pool_tactics(const edgert_node* node, const edgert_tensor* inputs);

// GlobalAveragePool float32, tactic f32-global-avgpool-rows-portable (id 51): eight float
// partial sums per plane (vectorized), planes spread over the thread pool; and on AVX-512
// f32-global-avgpool-rows-avx512 (id 54), the same spread over plane_means_avx512.
std::vector<TacticSpec> global_average_tactics(const edgert_node* node, const edgert_tensor* inputs);
void global_average_rows(const float* x, float* y, int64_t planes, int64_t size, bool avx512 = false);

class FastPool {
 public:
  // Returns false when the tactic does not apply (the caller runs the reference).
  bool prepare(int64_t tactic, bool max, bool count_include_pad, const WindowGeometry& g, const edgert_tensor& x,
               int num_outputs);
  void execute(const float* x, float* y) const;
  void execute(const uint8_t* x, uint8_t* y) const;  // uint8 MaxPool (tactic 55)

 private:
  template <typename T>
  void execute_rows(const T* x, T* y) const;
  bool max_ = true;
  bool avx512_ = false;
  int64_t planes_ = 0, in_h_ = 1, in_w_ = 1, out_h_ = 1, out_w_ = 1;
  int64_t kernel_h_ = 1, kernel_w_ = 1, stride_h_ = 1, stride_w_ = 1, dilation_h_ = 1, dilation_w_ = 1;
  int64_t pad_top_ = 0, pad_left_ = 0;
  std::vector<float> row_count_, col_count_;  // AveragePool: the divisor is their product
};

}  // namespace edgert::cpu
