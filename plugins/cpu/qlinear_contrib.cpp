// ONNX Runtime's INT8 contrib ops (domain com.microsoft) that quantized CNNs exported by its
// quantization tools use between QLinearConvs: QLinearAdd, QLinearMul (squeeze-excitation's
// channel scale) and QLinearGlobalAveragePool, u8.
// The float math is this file's (ORT's own differs in order between its kernels); each reference
// below states it, and its tactics (fast/qlinear_rows.h: AVX-512, AVX2, NEON) are bit-exact with it.
#include <algorithm>
#include <cstring>

#include "broadcast.h"
#include "fast/qlinear_rows.h"
#include "kernel.h"
#include "nn_common.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

void check_u8(const edgert_tensor& t, const char* what) {
  if (t.dtype != EDGERT_DTYPE_UINT8)
    fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s; only uint8 is supported (hint: quantize activations as uint8)",
         what, dtype_name(t.dtype));
}

void check_scalar_scale(const edgert_tensor& t, const char* what) {
  if (!is_float_dtype(t.dtype)) fail(EDGERT_ERR_SHAPE, "%s has dtype %s, expected float", what, dtype_name(t.dtype));
  check_per_channel(t, 1, what);
}

void check_scalar_zero_point(const edgert_node& node, const edgert_tensor* in, int i, const char* what) {
  if (const edgert_tensor* z = optional_input(node, in, i)) {
    check_u8(*z, what);
    check_per_channel(*z, 1, what);
  }
}

enum class QBinary { kAdd, kMul };

// Inputs: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point (numpy
// broadcasting of A and B).
// QLinearAdd, with ra = A_scale / C_scale and rb = B_scale / C_scale (float):
//   C = saturate_round(float(A - za) * ra + float(B - zb) * rb, zc)
// two products rounded to float, then their sum (no FMA), then round half to even.
// QLinearMul, with r = (A_scale * B_scale) / C_scale (float):
//   C = saturate_round(float((A - za) * (B - zb)) * r, zc)
// the integer product exact (|product| <= 65025), one float product, round half to even.
template <QBinary K>
class QLinearBinaryOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (node.num_inputs < 7) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least 7 inputs, got %d", node.num_inputs);
    check_u8(in[0], "A");
    check_u8(in[3], "B");
    check_scalar_scale(in[1], "A_scale");
    check_scalar_scale(in[4], "B_scale");
    check_scalar_scale(in[6], "C_scale");
    check_scalar_zero_point(node, in, 2, "A_zero_point");
    check_scalar_zero_point(node, in, 5, "B_zero_point");
    check_scalar_zero_point(node, in, 7, "C_zero_point");
    const Shape a = shape_of(in[0]), b = shape_of(in[3]);
    out_shape_ = broadcast_shapes({a, b});
    a_strides_ = broadcast_strides(a, out_shape_);
    b_strides_ = broadcast_strides(b, out_shape_);
    set_output(out[0], EDGERT_DTYPE_UINT8, out_shape_);
    rows_ = plan_runs(a, b) ? qrows::row_kernels(tactic()) : nullptr;
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const float sc = scale_at(in[6], 0);
    // For Mul, ra carries the one multiplier r and rb is unused.
    const float ra = K == QBinary::kAdd ? scale_at(in[1], 0) / sc : scale_at(in[1], 0) * scale_at(in[4], 0) / sc;
    const float rb = scale_at(in[4], 0) / sc;
    const int32_t za = zero_point_at(optional_input(node, in, 2), 0);
    const int32_t zb = zero_point_at(optional_input(node, in, 5), 0);
    const int32_t zc = zero_point_at(optional_input(node, in, 7), 0);
    const uint8_t *a = data_as<uint8_t>(in[0]), *b = data_as<uint8_t>(in[3]);
    uint8_t* c = data_as<uint8_t>(out[0]);
    if (rows_) return execute_runs(a, za, ra, b, zb, rb, zc, c);
    const int rank = static_cast<int>(out_shape_.size());
    const int64_t n = numel(out[0]);
    int64_t index[EDGERT_MAX_RANK] = {};
    int64_t ia = 0, ib = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t da = static_cast<int32_t>(a[ia]) - za, db = static_cast<int32_t>(b[ib]) - zb;
      const float v = K == QBinary::kAdd ? static_cast<float>(da) * ra + static_cast<float>(db) * rb
                                         : static_cast<float>(da * db) * ra;
      c[i] = saturate_round<uint8_t>(v, zc);
      for (int d = rank - 1; d >= 0; --d) {  // odometer, keeping both inputs' offsets
        ia += a_strides_[static_cast<size_t>(d)];
        ib += b_strides_[static_cast<size_t>(d)];
        if (++index[d] < out_shape_[static_cast<size_t>(d)]) break;
        ia -= index[d] * a_strides_[static_cast<size_t>(d)];
        ib -= index[d] * b_strides_[static_cast<size_t>(d)];
        index[d] = 0;
      }
    }
  }

 private:
  // The row tactics' layout: one operand of the output's shape ("full"), the other either
  // the same or constant over runs of `inner_` elements (a per-channel [N, C, 1, 1] or scalar
  // operand of an NCHW tensor). float addition and the integer product commute, so either of A
  // and B may be full.
  bool plan_runs(const Shape& a, const Shape& b) {
    const int64_t n = numel_of(out_shape_);
    swapped_ = numel_of(a) != n;
    const Shape& small = swapped_ ? a : b;
    if (numel_of(swapped_ ? b : a) != n) return false;
    if (numel_of(small) == n) {
      inner_ = n;
      small_step_ = 1;
      return true;
    }
    // Runs end at the last axis along which the small operand varies.
    const std::vector<int64_t>& strides = swapped_ ? a_strides_ : b_strides_;
    run_axes_ = 0;
    for (size_t d = 0; d < strides.size(); ++d)
      if (strides[d] != 0) run_axes_ = static_cast<int>(d) + 1;
    inner_ = 1;
    for (size_t d = static_cast<size_t>(run_axes_); d < out_shape_.size(); ++d) inner_ *= out_shape_[d];
    small_step_ = 0;
    return inner_ >= 16;  // shorter runs would spend their time on the partial steps
  }

  static int64_t numel_of(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  }

  void execute_runs(const uint8_t* a, int32_t za, float ra, const uint8_t* b, int32_t zb, float rb, int32_t zc,
                    uint8_t* c) const {
    if (swapped_) std::swap(a, b), std::swap(za, zb);
    if (swapped_ && K == QBinary::kAdd) std::swap(ra, rb);
    auto rows = [&](const uint8_t* ra_rows, const uint8_t* rb_rows, int64_t b_step, int64_t count, uint8_t* out) {
      if (K == QBinary::kAdd)
        rows_->add(ra_rows, za, ra, rb_rows, b_step, zb, rb, count, zc, out);
      else
        rows_->mul(ra_rows, za, rb_rows, b_step, zb, ra, count, zc, out);
    };
    const std::vector<int64_t>& strides = swapped_ ? a_strides_ : b_strides_;
    const int64_t n = numel_of(out_shape_);
    if (small_step_ == 1) {
      // One run: cut into pieces of 16 K elements for the threads.
      constexpr int64_t kPiece = 16384;
      ThreadPool::instance().parallel_ranges((n + kPiece - 1) / kPiece, [&](int64_t p0, int64_t p1, int) {
        const int64_t i0 = p0 * kPiece, i1 = std::min(n, p1 * kPiece);
        rows(a + i0, b + i0, 1, i1 - i0, c + i0);
      });
      return;
    }
    ThreadPool::instance().parallel_ranges(n / inner_, [&](int64_t r0, int64_t r1, int) {
      for (int64_t run = r0; run < r1; ++run) {
        int64_t offset = 0, rest = run;
        for (int d = run_axes_ - 1; d >= 0; --d) {
          offset += (rest % out_shape_[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
          rest /= out_shape_[static_cast<size_t>(d)];
        }
        rows(a + run * inner_, b + offset, 0, inner_, c + run * inner_);
      }
    });
  }

  Shape out_shape_;
  std::vector<int64_t> a_strides_, b_strides_;
  const qrows::RowKernels* rows_ = nullptr;  // the tactic's family; null: the reference
  bool swapped_ = false;
  int run_axes_ = 0;
  int64_t inner_ = 0, small_step_ = 1;
};

// Inputs: X [N, C, spatial...], x_scale, x_zero_point, y_scale, y_zero_point; attribute
// channels_last (only 0, NCHW). Y [N, C, 1, ...]: with the plane's sum s of `size` bytes,
//   Y = saturate_round(float(s - zx size) * (x_scale / (y_scale * float(size))), zy)
// the sum exact in integers (ORT's order for the multiplier).
class QLinearGlobalAveragePoolOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (node.num_inputs < 4) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least 4 inputs, got %d", node.num_inputs);
    if (Attributes(&node).get_int("channels_last", 0) != 0)
      fail(EDGERT_ERR_UNSUPPORTED, "channels_last = 1 is not supported (hint: keep the tensor NCHW)");
    const edgert_tensor& x = in[0];
    check_u8(x, "X");
    if (x.rank < 3) fail(EDGERT_ERR_SHAPE, "X has rank %d, expected [N, C, spatial...]", x.rank);
    check_scalar_scale(in[1], "x_scale");
    check_scalar_scale(in[3], "y_scale");
    check_scalar_zero_point(node, in, 2, "x_zero_point");
    check_scalar_zero_point(node, in, 4, "y_zero_point");
    Shape out_shape = shape_of(x);
    size_ = 1;
    for (size_t d = 2; d < out_shape.size(); ++d) {
      size_ *= out_shape[d];
      out_shape[d] = 1;
    }
    set_output(out[0], EDGERT_DTYPE_UINT8, out_shape);
    rows_ = qrows::row_kernels(tactic());
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const uint8_t* x = data_as<uint8_t>(in[0]);
    uint8_t* y = data_as<uint8_t>(out[0]);
    const int32_t zx = zero_point_at(optional_input(node, in, 2), 0);
    const int32_t zy = zero_point_at(optional_input(node, in, 4), 0);
    const float multiplier = scale_at(in[1], 0) / (scale_at(in[3], 0) * static_cast<float>(size_));
    const int64_t planes = in[0].dims[0] * in[0].dims[1];
    ThreadPool::instance().parallel_ranges(planes, [&](int64_t p0, int64_t p1, int) {
      // In pieces of 64 planes, their sums on the stack.
      int64_t sums[64];
      for (int64_t first = p0; first < p1; first += 64) {
        const int64_t count = std::min<int64_t>(64, p1 - first);
        if (rows_) {
          rows_->plane_sums(x + first * size_, count, size_, sums);
        } else {
          for (int64_t p = 0; p < count; ++p) {
            const uint8_t* plane = x + (first + p) * size_;
            int64_t s = 0;
            for (int64_t i = 0; i < size_; ++i) s += plane[i];
            sums[p] = s;
          }
        }
        for (int64_t p = 0; p < count; ++p)
          y[first + p] = saturate_round<uint8_t>(static_cast<float>(sums[p] - zx * size_) * multiplier, zy);
      }
    });
  }

 private:
  int64_t size_ = 1;
  const qrows::RowKernels* rows_ = nullptr;  // the tactic's family; null: the reference
};

std::vector<TacticSpec> qlinear_add_tactics(const edgert_node*, const edgert_tensor*) {
  return qrows::row_tactics({"u8-qlinear-add-avx512", "u8-qlinear-add-avx2", "u8-qlinear-add-neon"});
}

std::vector<TacticSpec> qlinear_mul_tactics(const edgert_node*, const edgert_tensor*) {
  return qrows::row_tactics({"u8-qlinear-mul-avx512", "u8-qlinear-mul-avx2", "u8-qlinear-mul-neon"});
}

std::vector<TacticSpec> qlinear_global_average_pool_tactics(const edgert_node*, const edgert_tensor*) {
  return qrows::row_tactics(
      {"u8-qlinear-global-avgpool-avx512", "u8-qlinear-global-avgpool-avx2", "u8-qlinear-global-avgpool-neon"});
}

int32_t qlinear_global_average_pool_supports(const edgert_node* node, const edgert_tensor*) {
  return Attributes(node).get_int("channels_last", 0) == 0 ? 1 : 0;
}

}  // namespace

void register_qlinear_contrib_kernels(KernelRegistry& r) {
  r.add_in_domain<QLinearBinaryOp<QBinary::kAdd>>("com.microsoft", "QLinearAdd", "ref-qlinear-add", nullptr,
                                                  qlinear_add_tactics);
  r.add_in_domain<QLinearBinaryOp<QBinary::kMul>>("com.microsoft", "QLinearMul", "ref-qlinear-mul", nullptr,
                                                  qlinear_mul_tactics);
  r.add_in_domain<QLinearGlobalAveragePoolOp>("com.microsoft", "QLinearGlobalAveragePool",
                                              "ref-qlinear-global-average-pool", qlinear_global_average_pool_supports,
                                              qlinear_global_average_pool_tactics);
}

}  // namespace edgert::cpu
