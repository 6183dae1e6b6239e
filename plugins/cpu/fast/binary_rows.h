// Optimized float32 Add / Sub / Mul / Div for the broadcasts CNNs use, tactic
// f32-binary-rows-portable (id 60): equal shapes, a scalar operand, and an operand that is
// constant along the trailing dims (the [N, C, 1, 1] scale of a squeeze-excitation block).
// Other broadcasts report that the tactic does not apply and run the reference.
#pragma once

#include <vector>

#include "kernel.h"

namespace edgert::cpu {

constexpr int64_t kBinaryRowsTactic = 60;

enum class ArithmeticKind { Add, Sub, Mul, Div };

std::vector<TacticSpec> binary_tactics(const edgert_node* node, const edgert_tensor* inputs);

class FastBinary {
 public:
  // Returns false when the shapes are not one of the fast cases (or not float32).
  bool prepare(ArithmeticKind kind, const edgert_tensor& a, const edgert_tensor& b, const Shape& out_shape);
  void execute(const float* a, const float* b, float* c) const;

 private:
  ArithmeticKind kind_ = ArithmeticKind::Add;
  // c[r * inner + i] = a[r * a_row + i * a_col] op b[r * b_row + i * b_col], a_col / b_col 0 or 1.
  int64_t rows_ = 0, inner_ = 0, a_row_ = 0, a_col_ = 0, b_row_ = 0, b_col_ = 0;
};

}  // namespace edgert::cpu
