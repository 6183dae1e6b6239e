// Optimized float32 LayerNormalization and RMSNormalization over contiguous rows, the tactics
// f32-layer-norm-rows-portable and f32-rms-norm-rows-portable (id 60 of each kernel): the
// normalized axes are the trailing ones (any `axis`), so each of `rows` rows is `cols`
// consecutive floats, and Scale (and B) have the shape of those trailing dims, so element j of
// every row takes scale[j]. Rows are spread over the thread pool.
//
// The statistics are float sums over 16 lanes in a fixed order (lane l takes elements l, l + 16,
// ...): GCC vectorizes them as written, at any vector width, and x86 and Arm builds give the
// same bits (no FMA contraction in this plugin). The reference sums in double; the float sums
// stay within a few ulp of it for the row lengths transformers use, because the variance is
// summed over deviations from a first-pass mean (two passes), never as E[x^2] - mean^2.
// Other cases (another dtype, Scale broadcast inside the rows, Mean and InvStdDev stashed in
// another type than float32) run the reference.
#pragma once

#include <vector>

#include "kernel.h"

namespace edgert::cpu {

constexpr int64_t kLayerNormRowsTactic = 60;
constexpr int64_t kRmsNormRowsTactic = 60;

std::vector<TacticSpec> layer_norm_tactics(const edgert_node* node, const edgert_tensor* inputs);
std::vector<TacticSpec> rms_norm_tactics(const edgert_node* node, const edgert_tensor* inputs);

// One LayerNormalization: y = (x - mean) * inv_std * scale + bias per row. `bias` may be null
// (no B input); `mean` and `inv_std` (one float per row, the optional outputs) may be null.
// The pointers are borrowed for the call only.
struct LayerNormRows {
  const float* x = nullptr;
  float* y = nullptr;
  const float* scale = nullptr;
  const float* bias = nullptr;
  float* mean = nullptr;
  float* inv_std = nullptr;
  int64_t rows = 0, cols = 0;
  double epsilon = 1e-5;
};
void layer_norm_rows(const LayerNormRows& job);

// RMSNormalization: y = x / sqrt(mean(x^2) + epsilon) * scale per row.
void rms_norm_rows(const float* x, float* y, const float* scale, int64_t rows, int64_t cols, double epsilon);

}  // namespace edgert::cpu
