#include "fast/binary_rows.h"

#include "thread_pool.h"

namespace edgert::cpu {

std::vector<TacticSpec> binary_tactics(const edgert_node*, const edgert_tensor* in) {
  if (in[0].dtype != EDGERT_DTYPE_FLOAT32 || in[1].dtype != EDGERT_DTYPE_FLOAT32) return {};
  return {{kBinaryRowsTactic, "f32-binary-rows-portable"}};
}

namespace {

// How an operand of shape `s` maps onto `out` split at `split` (rows = dims before, inner =
// dims after): 1 = this part is the output's own, 0 = all ones (broadcast), -1 = neither.
int part_kind(const Shape& s, const Shape& out, size_t begin, size_t end) {
  bool own = true, ones = true;
  for (size_t d = begin; d < end; ++d) {
    own = own && s[d] == out[d];
    ones = ones && s[d] == 1;
  }
  return own ? 1 : ones ? 0 : -1;
}

Shape aligned(const edgert_tensor& t, size_t rank) {
  Shape s(rank - static_cast<size_t>(t.rank), 1);
  for (int i = 0; i < t.rank; ++i) s.push_back(t.dims[i]);
  return s;
}

template <ArithmeticKind K>
inline float op(float x, float y) {
  if constexpr (K == ArithmeticKind::Add) return x + y;
  else if constexpr (K == ArithmeticKind::Sub) return x - y;
  else if constexpr (K == ArithmeticKind::Mul) return x * y;
  else return x / y;
}

template <ArithmeticKind K>
void rows(const float* a, const float* b, float* c, int64_t r0, int64_t r1, int64_t inner, int64_t a_row,
          int64_t a_col, int64_t b_row, int64_t b_col) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* ar = a + r * a_row;
    const float* br = b + r * b_row;
    float* cr = c + r * inner;
    if (a_col && b_col) {
      for (int64_t i = 0; i < inner; ++i) cr[i] = op<K>(ar[i], br[i]);
    } else if (a_col) {
      const float bv = br[0];
      for (int64_t i = 0; i < inner; ++i) cr[i] = op<K>(ar[i], bv);
    } else if (b_col) {
      const float av = ar[0];
      for (int64_t i = 0; i < inner; ++i) cr[i] = op<K>(av, br[i]);
    } else {
      const float v = op<K>(ar[0], br[0]);
      for (int64_t i = 0; i < inner; ++i) cr[i] = v;
    }
  }
}

}  // namespace

bool FastBinary::prepare(ArithmeticKind kind, const edgert_tensor& a, const edgert_tensor& b, const Shape& out) {
  if (a.dtype != EDGERT_DTYPE_FLOAT32 || b.dtype != EDGERT_DTYPE_FLOAT32) return false;
  kind_ = kind;
  const size_t rank = out.size();
  const Shape sa = aligned(a, rank), sb = aligned(b, rank);
  // The first split where both operands are each either the output's own or all ones on both
  // sides; the largest inner part wins (longest vector loops).
  for (size_t split = 0; split <= rank; ++split) {
    const int ar = part_kind(sa, out, 0, split), ai = part_kind(sa, out, split, rank);
    const int br = part_kind(sb, out, 0, split), bi = part_kind(sb, out, split, rank);
    if (ar < 0 || ai < 0 || br < 0 || bi < 0) continue;
    rows_ = 1;
    inner_ = 1;
    for (size_t d = 0; d < split; ++d) rows_ *= out[d];
    for (size_t d = split; d < rank; ++d) inner_ *= out[d];
    a_col_ = ai;
    b_col_ = bi;
    a_row_ = ar ? (ai ? inner_ : 1) : 0;
    b_row_ = br ? (bi ? inner_ : 1) : 0;
    return true;
  }
  return false;
}

void FastBinary::execute(const float* a, const float* b, float* c) const {
  const int64_t total = rows_ * inner_;
  // Split rows over the pool only when there is enough work to pay for waking it.
  const int64_t tasks = total < (1 << 15) ? 1 : std::min<int64_t>(rows_, 4 * ThreadPool::instance().num_threads());
  auto run = [&](int64_t r0, int64_t r1) {
    switch (kind_) {
      case ArithmeticKind::Add: rows<ArithmeticKind::Add>(a, b, c, r0, r1, inner_, a_row_, a_col_, b_row_, b_col_); break;
      case ArithmeticKind::Sub: rows<ArithmeticKind::Sub>(a, b, c, r0, r1, inner_, a_row_, a_col_, b_row_, b_col_); break;
      case ArithmeticKind::Mul: rows<ArithmeticKind::Mul>(a, b, c, r0, r1, inner_, a_row_, a_col_, b_row_, b_col_); break;
      case ArithmeticKind::Div: rows<ArithmeticKind::Div>(a, b, c, r0, r1, inner_, a_row_, a_col_, b_row_, b_col_); break;
    }
  };
  if (tasks <= 1) return run(0, rows_);
  ThreadPool::instance().parallel_for(tasks, [&](int64_t t, int) { run(t * rows_ / tasks, (t + 1) * rows_ / tasks); });
}

}  // namespace edgert::cpu
