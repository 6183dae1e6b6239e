// Matrix products: MatMul, Gemm, MatMulInteger, QLinearMatMul, and Det.
// Reference: plain i-k-j loops (innermost over a contiguous row of B and of the accumulator row);
// floats accumulate in double, integers in 64 bits (MatMulInteger/QLinearMatMul in int32 like
// ORT). Float32 MatMul and FusedMatMul also have the packed-GEMM tactics of fast/matmul_sgemm.h,
// and Gemm with a constant B the packed GEMV of gemm/gemv.h.
#include <algorithm>
#include <cmath>

#include "activation.h"
#include "broadcast.h"
#include "fast/matmul_sgemm.h"
#include "gemm/gemv.h"
#include "gemm/sgemm.h"
#include "thread_pool.h"
#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {
namespace {

// MatMul/MatMulInteger/QLinearMatMul (numpy matmul): 1-D operands are promoted to matrices
// and the promoted dim dropped from the result; leading dims broadcast.
struct MatMulShape {
  Shape batch_a, batch_b, batch, out;
  int64_t m = 0, k = 0, n = 0;
};

MatMulShape matmul_shape(const edgert_tensor& a, const edgert_tensor& b) {
  if (a.rank < 1 || b.rank < 1) fail(EDGERT_ERR_SHAPE, "MatMul operands must have rank >= 1, got %d and %d", a.rank, b.rank);
  Shape sa = shape_of(a), sb = shape_of(b);
  const bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  MatMulShape s;
  s.m = sa[sa.size() - 2];
  s.k = sa[sa.size() - 1];
  s.n = sb[sb.size() - 1];
  if (sb[sb.size() - 2] != s.k)
    fail(EDGERT_ERR_SHAPE, "inner dims differ: A is %s, B is %s", shape_string(shape_of(a)).c_str(),
         shape_string(shape_of(b)).c_str());
  s.batch_a.assign(sa.begin(), sa.end() - 2);
  s.batch_b.assign(sb.begin(), sb.end() - 2);
  s.batch = broadcast_shapes({s.batch_a, s.batch_b});
  s.out = s.batch;
  if (!a_vec) s.out.push_back(s.m);
  if (!b_vec) s.out.push_back(s.n);
  return s;
}

// Calls fn(batch index, A matrix index, B matrix index) for every matrix of the output.
template <typename Fn>
void for_each_matrix(const MatMulShape& s, Fn fn) {
  for (BroadcastIterator it(s.batch, {s.batch_a, s.batch_b}); !it.done(); it.next())
    fn(it.index(), it.offset(0), it.offset(1));
}

// One [m,k] x [k,n] product with zero points; store(i, row) receives each accumulated row.
template <typename TA, typename TB, typename Acc, typename AZero, typename BZero, typename Store>
void matmul_2d(const TA* a, const TB* b, int64_t m, int64_t k, int64_t n, AZero a_zero, BZero b_zero,
               Acc* row, Store store) {
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row, row + n, Acc(0));
    for (int64_t p = 0; p < k; ++p) {
      const Acc av = static_cast<Acc>(static_cast<compute_t<TA>>(a[i * k + p])) - a_zero(i);
      const TB* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += av * (static_cast<Acc>(static_cast<compute_t<TB>>(brow[j])) - b_zero(j));
    }
    store(i, row);
  }
}

constexpr unsigned kMatMulTypes = kFloats | kSigned | kUnsigned;

// ONNX allows float types and 32/64-bit integers for MatMul and Gemm.
void check_matmul_dtype(edgert_dtype d, const char* what) {
  if (is_float_dtype(d) || d == EDGERT_DTYPE_INT32 || d == EDGERT_DTYPE_INT64 || d == EDGERT_DTYPE_UINT32 ||
      d == EDGERT_DTYPE_UINT64)
    return;
  fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s, expected a float type or (u)int32/(u)int64", what, dtype_name(d));
}

class MatMulOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    check_matmul_dtype(in[0].dtype, "A");
    if (in[1].dtype != in[0].dtype)
      fail(EDGERT_ERR_SHAPE, "B has dtype %s, A has %s", dtype_name(in[1].dtype), dtype_name(in[0].dtype));
    s_ = matmul_shape(in[0], in[1]);
    set_output(out[0], in[0].dtype, s_.out);
    info.workspace_bytes = static_cast<size_t>(s_.n) * 8;
    fast_ = is_matmul_gemm_tactic(tactic()) && in[0].dtype == EDGERT_DTYPE_FLOAT32 && in[0].rank >= 2 && in[1].rank >= 2;
    if (fast_) info.workspace_bytes = sgemm_.prepare(tactic(), in[0], in[1], s_.out);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    if (fast_) {
      sgemm_.execute(in[0], in[1], data_as<float>(out[0]), nullptr, Activation{}, workspace);
      return;
    }
    reference(in, out, workspace);
  }

  size_t state_bytes() const override { return fast_ ? sgemm_.state_bytes() : 0; }

 protected:
  bool fast_ = false;
  MatMulSgemm sgemm_;

  void reference(const edgert_tensor* in, edgert_tensor* out, void* workspace) {
    dispatch(in[0].dtype, kMatMulTypes, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = acc_t<T>;
      const T* a = data_as<T>(in[0]);
      const T* b = data_as<T>(in[1]);
      T* y = data_as<T>(out[0]);
      const int64_t m = s_.m, k = s_.k, n = s_.n;
      auto zero = [](int64_t) { return Acc(0); };
      for_each_matrix(s_, [&](int64_t yi, int64_t ai, int64_t bi) {
        T* ym = y + yi * m * n;
        matmul_2d(a + ai * m * k, b + bi * k * n, m, k, n, zero, zero, static_cast<Acc*>(workspace),
                  [&](int64_t i, const Acc* row) {
                    for (int64_t j = 0; j < n; ++j) ym[i * n + j] = static_cast<T>(static_cast<compute_t<T>>(row[j]));
                  });
      });
    });
  }

 private:
  MatMulShape s_;
};

// Stable tactic ids of Gemm / FusedGemm (stored in engines and timing caches).
constexpr int64_t kGemmGemvPortable = 40;
constexpr int64_t kGemmGemvAvx2 = 41;
constexpr int64_t kGemmGemvAvx512 = 43;

// Float32 Gemm: the packed GEMM of fast/matmul_sgemm.h, and with a constant B the packed GEMV
// of gemm/gemv.h, one row of A' at a time.
std::vector<TacticSpec> gemm_tactics(const edgert_node*, const edgert_tensor* in) {
  const edgert_tensor &a = in[0], &b = in[1];
  if (b.dtype != EDGERT_DTYPE_FLOAT32 || b.rank != 2) return {};
  if (a.dtype != EDGERT_DTYPE_FLOAT32 && a.dtype != EDGERT_DTYPE_UNDEFINED) return {};
  // The packed GEMM (A's rows in tiles, or the weights') first, for A of many rows; GEMV for a few.
  std::vector<TacticSpec> out = matmul_gemm_tactics(in, "gemm");
  if (!b.data) return out;
#if defined(__x86_64__)
  if (gemm::isa_available(gemm::Isa::Avx512)) out.push_back({kGemmGemvAvx512, "f32-gemm-gemv-16-avx512"});
  if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({kGemmGemvAvx2, "f32-gemm-gemv-16-avx2"});
#endif
  out.push_back({kGemmGemvPortable, "f32-gemm-gemv-16-portable"});
  return out;
}

std::vector<TacticSpec> matmul_tactics(const edgert_node*, const edgert_tensor* in) { return matmul_gemm_tactics(in); }

class GemmOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const edgert_tensor &a = in[0], &b = in[1];
    check_matmul_dtype(a.dtype, "A");
    if (b.dtype != a.dtype) fail(EDGERT_ERR_SHAPE, "B has dtype %s, A has %s", dtype_name(b.dtype), dtype_name(a.dtype));
    if (a.rank != 2 || b.rank != 2) fail(EDGERT_ERR_SHAPE, "A and B must be 2-D, got ranks %d and %d", a.rank, b.rank);
    Attributes attrs(&node);
    trans_a_ = attrs.get_int("transA", 0) != 0;
    trans_b_ = attrs.get_int("transB", 0) != 0;
    alpha_ = attrs.get_float("alpha", 1.0f);
    beta_ = attrs.get_float("beta", 1.0f);
    m_ = trans_a_ ? a.dims[1] : a.dims[0];
    k_ = trans_a_ ? a.dims[0] : a.dims[1];
    n_ = trans_b_ ? b.dims[0] : b.dims[1];
    const int64_t kb = trans_b_ ? b.dims[1] : b.dims[0];
    if (kb != k_)
      fail(EDGERT_ERR_SHAPE, "inner dims differ: A' is [%lldx%lld], B' is [%lldx%lld]", static_cast<long long>(m_),
           static_cast<long long>(k_), static_cast<long long>(kb), static_cast<long long>(n_));
    if (const edgert_tensor* c = optional_input(node, in, 2)) {
      if (c->dtype != a.dtype) fail(EDGERT_ERR_SHAPE, "C has dtype %s, A has %s", dtype_name(c->dtype), dtype_name(a.dtype));
      Shape target = {m_, n_};
      Shape sc = shape_of(*c);
      bool ok = sc.size() <= 2;
      for (size_t i = 0; ok && i < sc.size(); ++i) ok = sc[i] == 1 || sc[i] == target[2 - sc.size() + i];
      if (!ok)
        fail(EDGERT_ERR_SHAPE, "C has shape %s, which does not broadcast to %s", shape_string(sc).c_str(),
             shape_string(target).c_str());
      c_strides_ = broadcast_strides(sc, target);
    }
    set_output(out[0], a.dtype, {m_, n_});
    info.workspace_bytes = static_cast<size_t>(n_) * 8;  // one accumulator row
    packed_gemm_ = is_matmul_gemm_tactic(tactic()) && a.dtype == EDGERT_DTYPE_FLOAT32;
    if (packed_gemm_)
      info.workspace_bytes =
          sgemm_.prepare_gemm(tactic(), m_, k_, n_, static_cast<const float*>(b.data), trans_b_);
    fast_ = (tactic() == kGemmGemvAvx512 || tactic() == kGemmGemvAvx2 || tactic() == kGemmGemvPortable) && a.dtype == EDGERT_DTYPE_FLOAT32 && b.data;
    if (fast_) {
      if (packed_from_ != b.data) {
        if (trans_b_) gemm::pack_panels(static_cast<const float*>(b.data), k_, n_, 1, k_, packed_);
        else gemm::pack_panels(static_cast<const float*>(b.data), k_, n_, n_, 1, packed_);
        packed_from_ = b.data;
      }
      gemv_ = gemm::gemv_panels_portable;
#if defined(__x86_64__)
      // An engine tuned on another CPU may name an ISA this one lacks: the best one here then.
      if (tactic() != kGemmGemvPortable && gemm::isa_available(gemm::Isa::Avx2Fma)) gemv_ = gemm::gemv_panels_avx2;
      if (tactic() == kGemmGemvAvx512 && gemm::isa_available(gemm::Isa::Avx512)) gemv_ = gemm::gemv_panels_avx512;
#endif
      const int64_t panels = (n_ + gemm::kGemvPanel - 1) / gemm::kGemvPanel;
      info.workspace_bytes = static_cast<size_t>(panels * gemm::kGemvPanel) * sizeof(float);
    }
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* c = optional_input(node, in, 2);
    if (packed_gemm_) {
      GemmTerms terms;
      terms.alpha = alpha_;
      if (c && beta_ != 0.0f) {
        terms.c = data_as<float>(*c);
        terms.c_row_stride = c_strides_[0];
        terms.c_col_stride = c_strides_[1];
        terms.beta = beta_;
      }
      sgemm_.execute_gemm(data_as<float>(in[0]), trans_a_, data_as<float>(in[1]), trans_b_, data_as<float>(out[0]),
                          terms, workspace);
      return;
    }
    if (fast_) {
      execute_gemv(data_as<float>(in[0]), c ? data_as<float>(*c) : nullptr, data_as<float>(out[0]),
                   static_cast<float*>(workspace));
      return;
    }
    dispatch(in[0].dtype, kMatMulTypes, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = acc_t<T>;
      const T* a = data_as<T>(in[0]);
      const T* b = data_as<T>(in[1]);
      const T* cp = c ? data_as<T>(*c) : nullptr;
      T* y = data_as<T>(out[0]);
      const int64_t lda = trans_a_ ? m_ : k_;
      // Integers scale by the attributes cast to T, as ONNX Runtime does.
      const Acc alpha = static_cast<Acc>(alpha_), beta = static_cast<Acc>(beta_);
      auto value = [](T v) { return static_cast<Acc>(static_cast<compute_t<T>>(v)); };
      Acc* row = static_cast<Acc*>(workspace);
      for (int64_t i = 0; i < m_; ++i) {
        // Loop order keeps the innermost loop contiguous: i-p-j for B [K,N], dot products
        // (i-j-p) for a transposed B [N,K].
        for (int64_t j = 0; j < n_; ++j) {
          Acc sum = 0;
          if (trans_b_) {
            const T* brow = b + j * k_;
            for (int64_t p = 0; p < k_; ++p) sum += value(trans_a_ ? a[p * lda + i] : a[i * lda + p]) * value(brow[p]);
          }
          row[j] = sum;
        }
        if (!trans_b_) {
          for (int64_t p = 0; p < k_; ++p) {
            const Acc av = value(trans_a_ ? a[p * lda + i] : a[i * lda + p]);
            const T* brow = b + p * n_;
            for (int64_t j = 0; j < n_; ++j) row[j] += av * value(brow[j]);
          }
        }
        for (int64_t j = 0; j < n_; ++j) {
          Acc r = alpha * row[j];
          if (cp) r += beta * value(cp[i * c_strides_[0] + j * c_strides_[1]]);
          y[i * n_ + j] = static_cast<T>(static_cast<compute_t<T>>(r));
        }
      }
    });
  }

 private:
  void execute_gemv(const float* a, const float* c, float* y, float* row) const {
    const int64_t panels = (n_ + gemm::kGemvPanel - 1) / gemm::kGemvPanel;
    ThreadPool& pool = ThreadPool::instance();
    const int64_t chunks = std::min<int64_t>(panels, 4 * pool.num_threads());
    for (int64_t i = 0; i < m_; ++i) {
      const float* x = trans_a_ ? a + i : a + i * k_;
      const int64_t x_stride = trans_a_ ? m_ : 1;
      pool.parallel_for(chunks, [&](int64_t t, int) {
        gemv_(x, x_stride, packed_.values(), k_, t * panels / chunks, (t + 1) * panels / chunks, row);
      });
      for (int64_t j = 0; j < n_; ++j) {
        float r = alpha_ * row[j];
        if (c) r += beta_ * c[i * c_strides_[0] + j * c_strides_[1]];
        y[i * n_ + j] = r;
      }
    }
  }

  bool trans_a_ = false, trans_b_ = false;
  float alpha_ = 1, beta_ = 1;
  int64_t m_ = 0, k_ = 0, n_ = 0;
  std::vector<int64_t> c_strides_;
  bool packed_gemm_ = false;  // a packed-GEMM tactic (fast/matmul_sgemm.h)
  MatMulSgemm sgemm_;
  bool fast_ = false;
  gemm::PackedPanels packed_;
  const void* packed_from_ = nullptr;
  gemm::GemvPanelsFn gemv_ = nullptr;

 public:
  size_t state_bytes() const override { return packed_gemm_ ? sgemm_.state_bytes() : packed_.state_bytes(); }
  uint64_t inputs_replaced() const override { return fast_ ? uint64_t{1} << 1 : 0; }
};

// edgert.FusedGemm and edgert.FusedMatMul (builder's activation fusion), float32 only: the
// plain product, then in one sweep over the output (still in cache for the sizes edge models
// have) the MatMul bias (input 2, [N], FusedMatMul only), the residual (input 3, of the output's
// element count, read as its shape) and the activation of activation.h, rounding to float where
// the separate Adds and activation did.
void apply_epilogue(float* y, int64_t count, int64_t n, const float* bias, const float* residual,
                    const Activation& activation) {
  for (int64_t i = 0; i < count; ++i) {
    float v = y[i];
    if (bias) v = v + bias[i % n];
    if (residual) v = v + residual[i];
    y[i] = activation.apply(v);
  }
}

// Input 3 of a fused product: the residual, float32 with as many elements as the output.
const float* residual_input(const edgert_node& node, const edgert_tensor* in, const edgert_tensor& out) {
  const edgert_tensor* r = optional_input(node, in, 3);
  if (!r) return nullptr;
  if (r->dtype != EDGERT_DTYPE_FLOAT32 || numel(*r) != numel(out))
    fail(EDGERT_ERR_SHAPE, "residual has dtype %s shape %s, expected float32 of the output's %lld elements",
         dtype_name(r->dtype), shape_string(shape_of(*r)).c_str(), static_cast<long long>(numel(out)));
  return data_as<float>(*r);
}

class FusedGemmOp : public GemmOp {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (in[0].dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "A is %s; FusedGemm runs float32 only", dtype_name(in[0].dtype));
    GemmOp::prepare(node, in, out, info);
    residual_input(node, in, out[0]);
    activation_ = Activation::from_node(node);
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    GemmOp::execute(node, in, out, workspace);
    apply_epilogue(data_as<float>(out[0]), numel(out[0]), 1, nullptr, residual_input(node, in, out[0]), activation_);
  }

 private:
  Activation activation_;
};

class FusedMatMulOp : public MatMulOp {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (in[0].dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "A is %s; FusedMatMul runs float32 only", dtype_name(in[0].dtype));
    MatMulOp::prepare(node, in, out, info);
    n_ = out[0].rank > 0 ? out[0].dims[out[0].rank - 1] : 1;
    if (const edgert_tensor* b = optional_input(node, in, 2)) {
      if (b->dtype != EDGERT_DTYPE_FLOAT32 || b->rank != 1 || b->dims[0] != n_ || out[0].rank < 2)
        fail(EDGERT_ERR_SHAPE, "bias has dtype %s shape %s, expected float32 [%lld]", dtype_name(b->dtype),
             shape_string(shape_of(*b)).c_str(), static_cast<long long>(n_));
    }
    residual_input(node, in, out[0]);
    activation_ = Activation::from_node(node);
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* b = optional_input(node, in, 2);
    const float* bias = b ? data_as<float>(*b) : nullptr;
    const float* residual = residual_input(node, in, out[0]);
    float* y = data_as<float>(out[0]);
    if (fast_ && !residual) {  // bias and activation in the GEMM's epilogue, while each strip is in cache
      sgemm_.execute(in[0], in[1], y, bias, activation_, workspace);
      return;
    }
    if (fast_) {  // the bias in the GEMM's epilogue; the residual, then the activation, after it
      sgemm_.execute(in[0], in[1], y, bias, Activation{}, workspace);
      apply_epilogue(y, numel(out[0]), n_, nullptr, residual, activation_);
      return;
    }
    reference(in, out, workspace);
    apply_epilogue(y, numel(out[0]), n_, bias, residual, activation_);
  }

 private:
  int64_t n_ = 1;
  Activation activation_;
};

// Zero points / scales of the quantized products: per tensor, per row of A, per column of B.
void check_quant_param(const edgert_tensor& t, int64_t count, const char* what) { check_per_channel(t, count, what); }

class MatMulIntegerOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (!is_8bit(in[0].dtype) || !is_8bit(in[1].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "A is %s and B is %s, expected uint8 or int8", dtype_name(in[0].dtype),
           dtype_name(in[1].dtype));
    s_ = matmul_shape(in[0], in[1]);
    if (const edgert_tensor* z = optional_input(node, in, 2)) {
      if (z->dtype != in[0].dtype) fail(EDGERT_ERR_SHAPE, "a_zero_point dtype %s differs from A's %s", dtype_name(z->dtype), dtype_name(in[0].dtype));
      check_quant_param(*z, s_.m, "a_zero_point");
    }
    if (const edgert_tensor* z = optional_input(node, in, 3)) {
      if (z->dtype != in[1].dtype) fail(EDGERT_ERR_SHAPE, "b_zero_point dtype %s differs from B's %s", dtype_name(z->dtype), dtype_name(in[1].dtype));
      check_quant_param(*z, s_.n, "b_zero_point");
    }
    set_output(out[0], EDGERT_DTYPE_INT32, s_.out);
    info.workspace_bytes = static_cast<size_t>(s_.n) * sizeof(int32_t);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const edgert_tensor* az = optional_input(node, in, 2);
    const edgert_tensor* bz = optional_input(node, in, 3);
    dispatch_8bit(in[0].dtype, [&](auto atag) {
      dispatch_8bit(in[1].dtype, [&](auto btag) {
        using TA = typename decltype(atag)::type;
        using TB = typename decltype(btag)::type;
        const int64_t m = s_.m, k = s_.k, n = s_.n;
        int32_t* y = data_as<int32_t>(out[0]);
        for_each_matrix(s_, [&](int64_t yi, int64_t ai, int64_t bi) {
          int32_t* ym = y + yi * m * n;
          matmul_2d(data_as<TA>(in[0]) + ai * m * k, data_as<TB>(in[1]) + bi * k * n, m, k, n,
                    [&](int64_t i) { return zero_point_at(az, i); }, [&](int64_t j) { return zero_point_at(bz, j); },
                    static_cast<int32_t*>(workspace),
                    [&](int64_t i, const int32_t* row) { std::copy(row, row + n, ym + i * n); });
        });
      }, "B");
    }, "A");
  }

 private:
  MatMulShape s_;
};

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
class QLinearMatMulOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (node.num_inputs < 8) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs 8 inputs, got %d", node.num_inputs);
    if (!is_8bit(in[0].dtype) || !is_8bit(in[3].dtype) || !is_8bit(in[7].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "a, b, y_zero_point are %s, %s, %s; expected uint8 or int8", dtype_name(in[0].dtype),
           dtype_name(in[3].dtype), dtype_name(in[7].dtype));
    s_ = matmul_shape(in[0], in[3]);
    if (in[2].dtype != in[0].dtype || in[5].dtype != in[3].dtype)
      fail(EDGERT_ERR_SHAPE, "zero points must have the dtype of their operand");
    for (int i : {1, 4, 6})
      if (!is_float_dtype(in[i].dtype)) fail(EDGERT_ERR_SHAPE, "scale input %d has dtype %s, expected float", i, dtype_name(in[i].dtype));
    check_quant_param(in[1], s_.m, "a_scale");
    check_quant_param(in[2], s_.m, "a_zero_point");
    check_quant_param(in[4], s_.n, "b_scale");
    check_quant_param(in[5], s_.n, "b_zero_point");
    check_quant_param(in[6], 1, "y_scale");
    check_quant_param(in[7], 1, "y_zero_point");
    set_output(out[0], in[7].dtype, s_.out);
    info.workspace_bytes = static_cast<size_t>(s_.n) * sizeof(int32_t);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const float y_scale = scale_at(in[6], 0);
    const int32_t y_zero = zero_point_at(&in[7], 0);
    dispatch_8bit(in[0].dtype, [&](auto atag) {
      dispatch_8bit(in[3].dtype, [&](auto btag) {
        dispatch_8bit(in[7].dtype, [&](auto ytag) {
          using TA = typename decltype(atag)::type;
          using TB = typename decltype(btag)::type;
          using TY = typename decltype(ytag)::type;
          const int64_t m = s_.m, k = s_.k, n = s_.n;
          TY* y = data_as<TY>(out[0]);
          for_each_matrix(s_, [&](int64_t yi, int64_t ai, int64_t bi) {
            TY* ym = y + yi * m * n;
            matmul_2d(data_as<TA>(in[0]) + ai * m * k, data_as<TB>(in[3]) + bi * k * n, m, k, n,
                      [&](int64_t i) { return zero_point_at(&in[2], i); },
                      [&](int64_t j) { return zero_point_at(&in[5], j); }, static_cast<int32_t*>(workspace),
                      [&](int64_t i, const int32_t* row) {
                        const float a_scale = scale_at(in[1], i);
                        for (int64_t j = 0; j < n; ++j) {
                          // Float multiplier and rounding like ONNX Runtime's requantization.
                          const float multiplier = a_scale * scale_at(in[4], j) / y_scale;
                          ym[i * n + j] = saturate_round<TY>(static_cast<float>(row[j]) * multiplier, y_zero);
                        }
                      });
          });
        }, "y_zero_point");
      }, "b");
    }, "a");
  }

 private:
  MatMulShape s_;
};

// Determinant of the trailing square matrices by LU decomposition with partial pivoting.
class DetOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const edgert_tensor& x = in[0];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (x.rank < 2 || x.dims[x.rank - 1] != x.dims[x.rank - 2])
      fail(EDGERT_ERR_SHAPE, "X has shape %s, expected [*, M, M]", shape_string(shape_of(x)).c_str());
    n_ = x.dims[x.rank - 1];
    set_output(out[0], x.dtype, Shape(x.dims, x.dims + x.rank - 2));
    info.workspace_bytes = static_cast<size_t>(n_ * n_) * sizeof(double);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      double* lu = static_cast<double*>(workspace);
      const int64_t n = n_, count = numel(out[0]);
      for (int64_t b = 0; b < count; ++b) {
        for (int64_t i = 0; i < n * n; ++i) lu[i] = static_cast<double>(static_cast<compute_t<T>>(x[b * n * n + i]));
        double det = 1;
        for (int64_t c = 0; c < n; ++c) {
          int64_t pivot = c;
          for (int64_t r = c + 1; r < n; ++r)
            if (std::fabs(lu[r * n + c]) > std::fabs(lu[pivot * n + c])) pivot = r;
          if (lu[pivot * n + c] == 0) {
            det = 0;
            break;
          }
          if (pivot != c) {
            for (int64_t j = 0; j < n; ++j) std::swap(lu[c * n + j], lu[pivot * n + j]);
            det = -det;
          }
          const double d = lu[c * n + c];
          det *= d;
          for (int64_t r = c + 1; r < n; ++r) {
            const double f = lu[r * n + c] / d;
            for (int64_t j = c; j < n; ++j) lu[r * n + j] -= f * lu[c * n + j];
          }
        }
        y[b] = static_cast<T>(static_cast<compute_t<T>>(det));
      }
    });
  }

 private:
  int64_t n_ = 0;
};

}  // namespace

void register_matmul_kernels(KernelRegistry& r) {
  r.add<MatMulOp>("MatMul", "ref-matmul", nullptr, matmul_tactics);
  r.add<GemmOp>("Gemm", "ref-gemm", nullptr, gemm_tactics);
  r.add_in_domain<FusedGemmOp>("edgert", "FusedGemm", "ref-fused-gemm", nullptr, gemm_tactics);
  r.add_in_domain<FusedMatMulOp>("edgert", "FusedMatMul", "ref-fused-matmul", nullptr, matmul_tactics);
  r.add<MatMulIntegerOp>("MatMulInteger", "ref-matmul-integer");
  r.add<QLinearMatMulOp>("QLinearMatMul", "ref-qlinear-matmul");
  r.add<DetOp>("Det", "ref-det");
}

}  // namespace edgert::cpu
