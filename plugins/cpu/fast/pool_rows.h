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
constexpr int64_t kMaxPoolU8Avx512VbmiTactic = 56;
constexpr int64_t kMaxPoolU8Avx2Tactic = 57;
constexpr int64_t kMaxPoolU8NeonTactic = 58;

// A uint8 MaxPool plane for the direct kernels (x86/max_pool_u8_avx512vbmi.cpp,
// x86/max_pool_u8_avx2.cpp, arm/max_pool_u8_neon.cpp): square-strided (1 or 2), no dilation.
// The scratch plane they pad the input into has u8_pool_padded_rows x u8_pool_padded_cols bytes
// (the columns with room for the last step's 128-byte loads; the narrower kernels read less).
struct U8PoolGeometry {
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0, kernel_h = 1, kernel_w = 1, stride = 1, pad_top = 0, pad_left = 0;
};
inline int64_t u8_pool_padded_rows(const U8PoolGeometry& g) {
  const int64_t needed = (g.out_h - 1) * g.stride + g.kernel_h;
  return needed > g.in_h + g.pad_top ? needed : g.in_h + g.pad_top;
}
inline int64_t u8_pool_padded_cols(const U8PoolGeometry& g) {
  const int64_t steps = (g.out_w + 63) / 64;
  const int64_t read = (steps * 64 - 1) * g.stride + g.kernel_w + 64;  // the last tap's second load included
  const int64_t cols = read > g.in_w + g.pad_left ? read : g.in_w + g.pad_left;
  return (cols + 63) / 64 * 64;
}

#if defined(__x86_64__)
// x86/max_pool_avx512.cpp: the window shapes it runs, and one plane (CPU with AVX-512F only).
bool max_pool_avx512_applies(int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w,
                             int64_t dilation_h, int64_t dilation_w);
void max_pool_plane_avx512(const float* x, float* y, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                           int64_t kernel, int64_t stride, int64_t pad_top, int64_t pad_left);
// x86/max_pool_u8_avx512vbmi.cpp: one uint8 plane (CPU with AVX-512 VBMI only).
void max_pool_plane_u8_avx512vbmi(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch);
// x86/max_pool_u8_avx2.cpp: the same with AVX2.
void max_pool_plane_u8_avx2(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch);
// x86/global_average_avx512.cpp: y[p] = the mean of the size floats of plane p (AVX-512F only).
void plane_means_avx512(const float* x, float* y, int64_t planes, int64_t size);
#endif
#if defined(__aarch64__)
// arm/max_pool_u8_neon.cpp: the uint8 plane with Advanced SIMD.
void max_pool_plane_u8_neon(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch);
#endif

// The tactics of a MaxPool/AveragePool node (float32 without an Indices output): the rows
// above, and for MaxPool f32-max-pool-direct-avx512 (id 52) where its shapes apply; a uint8
// MaxPool (the int8 rewrite's) u8-max-pool-2d-rows-portable (id 55), the same rows on bytes,
// after the direct kernels where strides allow: u8-max-pool-direct-avx512vbmi (56),
// u8-max-pool-direct-avx2 (57), u8-max-pool-direct-neon (58).
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
  // uint8 MaxPool (tactics 55 to 58); `workspace` of workspace_bytes().
  void execute(const uint8_t* x, uint8_t* y, void* workspace) const;
  size_t workspace_bytes() const;

 private:
  template <typename T>
  void execute_rows(const T* x, T* y) const;
  bool max_ = true;
  bool avx512_ = false;
  // The direct uint8 plane of tactics 56 to 58; null: the rows.
  void (*u8_direct_)(const uint8_t* x, uint8_t* y, const U8PoolGeometry& g, uint8_t* scratch) = nullptr;
  int threads_ = 1;
  int64_t planes_ = 0, in_h_ = 1, in_w_ = 1, out_h_ = 1, out_w_ = 1;
  int64_t kernel_h_ = 1, kernel_w_ = 1, stride_h_ = 1, stride_w_ = 1, dilation_h_ = 1, dilation_w_ = 1;
  int64_t pad_top_ = 0, pad_left_ = 0;
  std::vector<float> row_count_, col_count_;  // AveragePool: the divisor is their product
};

}  // namespace edgert::cpu
