#include "fast/matmul_sgemm.h"

#include "broadcast.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

gemm::Isa isa_of(int64_t tactic) {
  switch (tactic) {
    case kMatMulGemmAvx2: return gemm::Isa::Avx2Fma;
    case kMatMulGemmNeon: return gemm::Isa::Neon;
    case kMatMulGemmAvx512: return gemm::Isa::Avx512;
    default: return gemm::Isa::Portable;
  }
}

}  // namespace

bool is_matmul_gemm_tactic(int64_t tactic) { return tactic >= kMatMulGemmPortable && tactic <= kMatMulGemmAvx512; }

std::vector<TacticSpec> matmul_gemm_tactics(const edgert_tensor* in) {
  const edgert_tensor &a = in[0], &b = in[1];
  auto float32 = [](const edgert_tensor& t) { return t.dtype == EDGERT_DTYPE_FLOAT32 || t.dtype == EDGERT_DTYPE_UNDEFINED; };
  if (!float32(a) || !float32(b)) return {};
  // 1-D operands (vector products) stay with the reference: there is no matrix to tile.
  if ((a.rank >= 0 && a.rank < 2 && a.dtype != EDGERT_DTYPE_UNDEFINED) || (b.rank >= 0 && b.rank < 2 && b.dtype != EDGERT_DTYPE_UNDEFINED))
    return {};
  std::vector<TacticSpec> out;
  if (gemm::isa_available(gemm::Isa::Avx512)) out.push_back({kMatMulGemmAvx512, "f32-matmul-gemm-8x32-avx512"});
  if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({kMatMulGemmAvx2, "f32-matmul-gemm-6x16-avx2"});
  if (gemm::isa_available(gemm::Isa::Neon)) out.push_back({kMatMulGemmNeon, "f32-matmul-gemm-6x16-neon"});
  out.push_back({kMatMulGemmPortable, "f32-matmul-gemm-6x16-portable"});
  return out;
}

void MatMulSgemm::pack(const float* a, int64_t rows, int64_t row_stride, int64_t col_stride) {
  // With no k there is nothing to pack: sgemm writes the epilogue of zero sums.
  if (k_ == 0) packed_ = gemm::packed_a_layout(isa_, rows, 0);
  else gemm::pack_a(isa_, a, rows, k_, row_stride, col_stride, packed_);
}

size_t MatMulSgemm::prepare_gemm(int64_t tactic, int64_t m, int64_t k, int64_t n) {
  isa_ = isa_of(tactic);
  // An engine tuned on another CPU may name a family this one lacks: the best one here then.
  if (!gemm::isa_available(isa_)) isa_ = gemm::best_isa();
  threads_ = ThreadPool::instance().num_threads();
  m_ = m;
  k_ = k;
  n_ = n;
  return gemm::workspace_bytes(threads_, gemm::packed_a_layout(isa_, m_, k_), n_);
}

void MatMulSgemm::execute_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* y,
                               const gemm::Epilogue& epilogue, void* workspace) {
  if (m_ == 0 || n_ == 0) return;
  pack(a, m_, trans_a ? 1 : k_, trans_a ? m_ : 1);
  gemm::BSource source;
  source.data = b;
  source.row_stride = trans_b ? 1 : n_;
  source.col_stride = trans_b ? k_ : 1;
  gemm::sgemm(packed_, source, n_, gemm::Output{y, n_, 1}, epilogue, workspace, threads_);
}

size_t MatMulSgemm::prepare(int64_t tactic, const edgert_tensor& a, const edgert_tensor& b, const Shape& out_shape) {
  isa_ = isa_of(tactic);
  if (!gemm::isa_available(isa_)) isa_ = gemm::best_isa();
  threads_ = ThreadPool::instance().num_threads();
  m_ = a.dims[a.rank - 2];
  k_ = a.dims[a.rank - 1];
  n_ = b.dims[b.rank - 1];
  a_batch_.assign(a.dims, a.dims + a.rank - 2);
  b_batch_.assign(b.dims, b.dims + b.rank - 2);
  out_batch_.assign(out_shape.begin(), out_shape.end() - 2);
  int64_t b_matrices = 1;
  for (int64_t d : b_batch_) b_matrices *= d;
  // With one B, A's matrices lie one after another as the output's do: [rows, k] x [k, n].
  flatten_ = b_matrices == 1 && a_batch_.size() >= b_batch_.size();
  int64_t rows = m_;
  if (flatten_)
    for (int64_t d : a_batch_) rows *= d;
  // sgemm places B, packed once for all threads, after the threads' blocks when it splits A's
  // rows: the workspace is sized for the A execute packs.
  return gemm::workspace_bytes(threads_, gemm::packed_a_layout(isa_, rows, k_), n_);
}

void MatMulSgemm::execute(const edgert_tensor& a, const edgert_tensor& b, float* y, const float* bias,
                          const Activation& activation, void* workspace) {
  const float* pa = static_cast<const float*>(a.data);
  const float* pb = static_cast<const float*>(b.data);
  gemm::Epilogue epilogue;
  epilogue.bias_col = bias;
  epilogue.activation = activation;
  auto product = [&](const float* am, const float* bm, float* ym, int64_t rows) {
    if (rows == 0 || n_ == 0) return;
    pack(am, rows, k_, 1);
    gemm::BSource source;
    source.data = bm;
    source.row_stride = n_;
    gemm::Output output{ym, n_, 1};
    gemm::sgemm(packed_, source, n_, output, epilogue, workspace, threads_);
  };
  if (flatten_) {
    int64_t rows = m_;
    for (int64_t d : a_batch_) rows *= d;
    product(pa, pb, y, rows);
    return;
  }
  for (BroadcastIterator it(out_batch_, {a_batch_, b_batch_}); !it.done(); it.next())
    product(pa + it.offset(0) * m_ * k_, pb + it.offset(1) * k_ * n_, y + it.index() * m_ * n_, m_);
}

}  // namespace edgert::cpu
