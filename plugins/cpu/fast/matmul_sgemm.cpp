#include "fast/matmul_sgemm.h"

#include <string>

#include "broadcast.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

// The family by the id's offset: portable, AVX2+FMA, NEON, AVX-512.
gemm::Isa isa_of(int64_t tactic) {
  switch ((tactic - kMatMulGemmPortable) % 4) {
    case 1: return gemm::Isa::Avx2Fma;
    case 2: return gemm::Isa::Neon;
    case 3: return gemm::Isa::Avx512;
    default: return gemm::Isa::Portable;
  }
}

bool weights_as_a(int64_t tactic) { return tactic >= kMatMulGemmWeightsPortable; }

}  // namespace

bool is_matmul_gemm_tactic(int64_t tactic) {
  return tactic >= kMatMulGemmPortable && tactic <= kMatMulGemmWeightsAvx512;
}

std::vector<TacticSpec> matmul_gemm_tactics(const edgert_tensor* in, const char* op) {
  const edgert_tensor &a = in[0], &b = in[1];
  auto float32 = [](const edgert_tensor& t) { return t.dtype == EDGERT_DTYPE_FLOAT32 || t.dtype == EDGERT_DTYPE_UNDEFINED; };
  if (!float32(a) || !float32(b)) return {};
  // 1-D operands (vector products) stay with the reference: there is no matrix to tile.
  auto vector = [](const edgert_tensor& t) { return t.dtype != EDGERT_DTYPE_UNDEFINED && t.rank >= 0 && t.rank < 2; };
  if (vector(a) || vector(b)) return {};
  // Names live as long as the plugin: one table per op and way.
  static const char* const kNames[2][2][4] = {
      {{"f32-matmul-gemm-6x16-portable", "f32-matmul-gemm-6x16-avx2", "f32-matmul-gemm-6x16-neon", "f32-matmul-gemm-8x32-avx512"},
       {"f32-matmul-gemm-w-6x16-portable", "f32-matmul-gemm-w-6x16-avx2", "f32-matmul-gemm-w-6x16-neon", "f32-matmul-gemm-w-8x32-avx512"}},
      {{"f32-gemm-packed-6x16-portable", "f32-gemm-packed-6x16-avx2", "f32-gemm-packed-6x16-neon", "f32-gemm-packed-8x32-avx512"},
       {"f32-gemm-packed-w-6x16-portable", "f32-gemm-packed-w-6x16-avx2", "f32-gemm-packed-w-6x16-neon", "f32-gemm-packed-w-8x32-avx512"}}};
  const int which = std::string(op) == "gemm" ? 1 : 0;
  const bool constant_b = b.data != nullptr && b.rank == 2;
  std::vector<TacticSpec> out;
  for (int way = 0; way < (constant_b ? 2 : 1); ++way)
    for (int family : {3, 1, 2, 0}) {
      const gemm::Isa isa = isa_of(kMatMulGemmPortable + family);
      if (isa != gemm::Isa::Portable && !gemm::isa_available(isa)) continue;
      out.push_back({kMatMulGemmPortable + 4 * way + family, kNames[which][way][family]});
    }
  return out;
}

void MatMulSgemm::choose_isa(int64_t tactic) {
  isa_ = isa_of(tactic);
  // An engine tuned on another CPU may name a family this one lacks: the best one here then.
  if (!gemm::isa_available(isa_)) isa_ = gemm::best_isa();
  threads_ = ThreadPool::instance().num_threads();
}

void MatMulSgemm::pack(const float* a, int64_t rows, int64_t row_stride, int64_t col_stride) {
  // With no k there is nothing to pack: sgemm writes the epilogue of zero sums.
  if (k_ == 0) packed_ = gemm::packed_a_layout(isa_, rows, 0);
  else gemm::pack_a(isa_, a, rows, k_, row_stride, col_stride, packed_);
}

void MatMulSgemm::times_weights(const float* x, int64_t rows, int64_t x_row_stride, int64_t x_col_stride, float* y,
                                const gemm::Epilogue& epilogue, void* workspace) const {
  if (rows == 0 || n_ == 0) return;
  gemm::BSource source;  // X^T: B(p, r) = X(r, p)
  source.data = x;
  source.row_stride = x_col_stride;
  source.col_stride = x_row_stride;
  gemm::sgemm(packed_, source, rows, gemm::Output{y, 1, n_}, epilogue, workspace, threads_);
}

size_t MatMulSgemm::prepare(int64_t tactic, const edgert_tensor& a, const edgert_tensor& b, const Shape& out_shape) {
  choose_isa(tactic);
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
  weights_ = weights_as_a(tactic) && flatten_ && b.data != nullptr;
  if (weights_) {
    pack(static_cast<const float*>(b.data), n_, 1, n_);  // B^T(i, p) = B[p, i]
    return gemm::workspace_bytes(threads_, packed_, rows);
  }
  // Room for A now, so runs at this shape allocate nothing. sgemm places B, packed once for
  // all threads, after the threads' blocks when it splits A's rows: sized for that A too.
  const int64_t mr = gemm::tile_rows(isa_);
  packed_.data.reserve(static_cast<size_t>((rows + mr - 1) / mr * mr * k_));
  return gemm::workspace_bytes(threads_, gemm::packed_a_layout(isa_, rows, k_), n_);
}

void MatMulSgemm::execute(const edgert_tensor& a, const edgert_tensor& b, float* y, const float* bias,
                          const Activation& activation, void* workspace) {
  const float* pa = static_cast<const float*>(a.data);
  const float* pb = static_cast<const float*>(b.data);
  gemm::Epilogue epilogue;
  epilogue.activation = activation;
  int64_t rows = m_;
  if (flatten_)
    for (int64_t d : a_batch_) rows *= d;
  if (weights_) {
    epilogue.bias_row = bias;  // Y^T's rows are Y's columns
    times_weights(pa, rows, k_, 1, y, epilogue, workspace);
    return;
  }
  epilogue.bias_col = bias;
  auto product = [&](const float* am, const float* bm, float* ym, int64_t count) {
    if (count == 0 || n_ == 0) return;
    pack(am, count, k_, 1);
    gemm::BSource source;
    source.data = bm;
    source.row_stride = n_;
    gemm::sgemm(packed_, source, n_, gemm::Output{ym, n_, 1}, epilogue, workspace, threads_);
  };
  if (flatten_) return product(pa, pb, y, rows);
  for (BroadcastIterator it(out_batch_, {a_batch_, b_batch_}); !it.done(); it.next())
    product(pa + it.offset(0) * m_ * k_, pb + it.offset(1) * k_ * n_, y + it.index() * m_ * n_, m_);
}

size_t MatMulSgemm::prepare_gemm(int64_t tactic, int64_t m, int64_t k, int64_t n, const float* constant_b,
                                 bool trans_b) {
  choose_isa(tactic);
  m_ = m;
  k_ = k;
  n_ = n;
  weights_ = weights_as_a(tactic) && constant_b != nullptr;
  if (weights_) {
    // B'^T(i, p) = B'(p, i): B [n, k] row by row when transposed, else B [k, n] column by column.
    pack(constant_b, n_, trans_b ? k_ : 1, trans_b ? 1 : n_);
    return gemm::workspace_bytes(threads_, packed_, m_);
  }
  const int64_t mr = gemm::tile_rows(isa_);
  packed_.data.reserve(static_cast<size_t>((m_ + mr - 1) / mr * mr * k_));
  return gemm::workspace_bytes(threads_, gemm::packed_a_layout(isa_, m_, k_), n_);
}

void MatMulSgemm::execute_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* y,
                               const GemmTerms& terms, void* workspace) {
  if (m_ == 0 || n_ == 0) return;
  gemm::Epilogue epilogue;
  epilogue.alpha = terms.alpha;
  epilogue.addend = terms.c;
  epilogue.beta = terms.beta;
  if (weights_) {
    // Y^T's element (i, r) takes C's (r, i).
    epilogue.addend_row_stride = terms.c_col_stride;
    epilogue.addend_col_stride = terms.c_row_stride;
    times_weights(a, m_, trans_a ? 1 : k_, trans_a ? m_ : 1, y, epilogue, workspace);
    return;
  }
  epilogue.addend_row_stride = terms.c_row_stride;
  epilogue.addend_col_stride = terms.c_col_stride;
  pack(a, m_, trans_a ? 1 : k_, trans_a ? m_ : 1);
  gemm::BSource source;
  source.data = b;
  source.row_stride = trans_b ? 1 : n_;
  source.col_stride = trans_b ? k_ : 1;
  gemm::sgemm(packed_, source, n_, gemm::Output{y, n_, 1}, epilogue, workspace, threads_);
}

}  // namespace edgert::cpu
