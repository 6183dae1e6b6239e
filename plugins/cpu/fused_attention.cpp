// edgert.FusedAttention (builder/src/passes/attention_fusion.cpp): for every batch matrix,
//   O = softmax(((Q * q_scale / q_divisor) Kt) * score_scale / score_divisor + mask) V
// with Q [..., L, D], Kt [..., D, S], V [..., S, Dv] (batch dims broadcasting as MatMul's) and an
// optional additive mask broadcasting over the scores [..., L, S]. With keys_transposed 0 the
// second input is K [..., S, D] itself, read as Kt through the GEMM's strides; operands given as
// the inputs of Transposes (q_perm, k_perm, v_perm), one index of a packed input's axis
// (q_select, k_select, v_select) and an output written as its Transpose
// (y_perm) are read and written in place by their strides (attention_operands.h). Each matrix's scaled Q and
// scores live in the workspace while they are used: the [batch, L, S] scores never go to memory.
// The products are the packed GEMM of the MatMul tactics (tactic f32-attention-gemm-<tile>-<isa>),
// the softmax the float exp of the Softmax tactic; each step rounds as the unfused graph does.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_operands.h"
#include "broadcast.h"
#include "gemm/sgemm.h"
#include "kernel.h"
#include "nn_common.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

using plugin::attention_operands;
using plugin::AttentionOperands;
using plugin::batch_offset;

constexpr int64_t kAttentionPortable = 50;  // + 1 AVX2, + 2 NEON, + 3 AVX-512, as MatMul's

gemm::Isa isa_of(int64_t tactic) {
  switch (tactic - kAttentionPortable) {
    case 1: return gemm::Isa::Avx2Fma;
    case 2: return gemm::Isa::Neon;
    case 3: return gemm::Isa::Avx512;
    default: return gemm::Isa::Portable;
  }
}

std::vector<TacticSpec> attention_tactics(const edgert_node*, const edgert_tensor*) {
  std::vector<TacticSpec> out;
  if (gemm::isa_available(gemm::Isa::Avx512)) out.push_back({kAttentionPortable + 3, "f32-attention-gemm-8x32-avx512"});
  if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({kAttentionPortable + 1, "f32-attention-gemm-6x16-avx2"});
  if (gemm::isa_available(gemm::Isa::Neon)) out.push_back({kAttentionPortable + 2, "f32-attention-gemm-6x16-neon"});
  out.push_back({kAttentionPortable, "f32-attention-gemm-6x16-portable"});
  return out;
}

class FusedAttentionOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    for (int i = 0; i < 3; ++i)
      if (in[i].dtype != EDGERT_DTYPE_FLOAT32) fail(EDGERT_ERR_UNSUPPORTED, "input %d is %s; FusedAttention runs float32", i, dtype_name(in[i].dtype));
    ops_ = attention_operands(node, in);
    keys_transposed_ = ops_.keys_transposed;
    l_ = ops_.l;
    d_ = ops_.d;
    s_ = ops_.s;
    dv_ = ops_.dv;
    out_batch_ = ops_.batch;
    batches_ = numel(out_batch_);
    set_output(out[0], EDGERT_DTYPE_FLOAT32, ops_.y_shape);
    // The mask as strides over [batch..., L, S].
    mask_strides_.clear();
    if (const edgert_tensor* mask = optional_input(node, in, 3)) {
      if (mask->dtype != EDGERT_DTYPE_FLOAT32) fail(EDGERT_ERR_SHAPE, "mask is %s, expected float32", dtype_name(mask->dtype));
      Shape scores = out_batch_;
      scores.push_back(l_);
      scores.push_back(s_);
      if (broadcast_shapes({scores, shape_of(*mask)}) != scores)
        fail(EDGERT_ERR_SHAPE, "mask %s does not broadcast over the scores %s", shape_string(shape_of(*mask)).c_str(),
             shape_string(scores).c_str());
      mask_strides_ = broadcast_strides(shape_of(*mask), scores);
    }
    Attributes a(&node);
    q_scale_ = a.get_float("q_scale", 1.0f);
    q_divisor_ = a.get_float("q_divisor", 1.0f);
    score_scale_ = a.get_float("score_scale", 1.0f);
    score_divisor_ = a.get_float("score_divisor", 1.0f);
    isa_ = isa_of(tactic());
    if (!gemm::isa_available(isa_)) isa_ = gemm::best_isa();
    threads_ = ThreadPool::instance().num_threads();
    const size_t gemm_bytes = std::max(gemm::workspace_bytes(threads_, gemm::packed_a_layout(isa_, l_, d_), s_),
                                       gemm::workspace_bytes(threads_, gemm::packed_a_layout(isa_, l_, s_), dv_));
    scratch_floats_ = (l_ * d_ + l_ * s_ + 15) / 16 * 16;
    info.workspace_bytes = gemm_bytes + static_cast<size_t>(scratch_floats_) * sizeof(float);
    const int64_t mr = gemm::tile_rows(isa_);
    packed_.data.reserve(static_cast<size_t>((l_ + mr - 1) / mr * mr * std::max(d_, s_)));
  }

  size_t state_bytes() const override { return gemm::state_bytes(packed_); }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const float* q = data_as<float>(in[0]);
    const float* kt = data_as<float>(in[1]);
    const float* v = data_as<float>(in[2]);
    const edgert_tensor* mask = optional_input(node, in, 3);
    float* y = data_as<float>(out[0]);
    float* qs = static_cast<float*>(workspace);
    float* scores = qs + l_ * d_;
    void* gemm_workspace = static_cast<float*>(workspace) + scratch_floats_;
    const int64_t q_row = ops_.q.row_stride(), k_row = ops_.keys.row_stride(), v_row = ops_.v.row_stride();
    for (int64_t b = 0; b < batches_; ++b) {
      const float* qb = q + batch_offset(ops_, ops_.q, b);
      for (int64_t r = 0; r < l_; ++r)
        for (int64_t c = 0; c < d_; ++c) qs[r * d_ + c] = qb[r * q_row + c] * q_scale_ / q_divisor_;
      // Kt (d, j) at d * (its row stride) + j; K read as Kt: at d + j * (K's row stride).
      product(qs, l_, d_, kt + batch_offset(ops_, ops_.keys, b), s_, scores, gemm_workspace,
              keys_transposed_ ? k_row : 1, keys_transposed_ ? 1 : k_row);
      for (int64_t r = 0; r < l_; ++r) {
        float* row = scores + r * s_;
        for (int64_t j = 0; j < s_; ++j) row[j] = row[j] * score_scale_ / score_divisor_;
        if (mask) add_mask(data_as<float>(*mask), b, r, row);
        softmax_row(row);
      }
      product(scores, l_, s_, v + batch_offset(ops_, ops_.v, b), dv_, y + batch_offset(ops_, ops_.y, b), gemm_workspace,
              v_row, 1, ops_.y.row_stride());
    }
  }

 private:
  AttentionOperands ops_;
  int64_t l_ = 0, d_ = 0, s_ = 0, dv_ = 0, batches_ = 0, scratch_floats_ = 0;
  float q_scale_ = 1, q_divisor_ = 1, score_scale_ = 1, score_divisor_ = 1;
  Shape out_batch_;
  std::vector<int64_t> mask_strides_;
  gemm::Isa isa_ = gemm::Isa::Portable;
  int threads_ = 1;
  gemm::PackedA packed_;

  bool keys_transposed_ = true;

  // y [m, n] (row stride y_row_stride) = a [m, k] b [k, n]: a row-major, b(p, j) at
  // p * b_row_stride + j * b_col_stride.
  void product(const float* a, int64_t m, int64_t k, const float* b, int64_t n, float* y, void* workspace,
               int64_t b_row_stride, int64_t b_col_stride, int64_t y_row_stride = -1) {
    if (m == 0 || n == 0) return;
    if (k == 0) packed_ = gemm::packed_a_layout(isa_, m, 0);
    else gemm::pack_a(isa_, a, m, k, k, 1, packed_);
    gemm::BSource source;
    source.data = b;
    source.row_stride = b_row_stride;
    source.col_stride = b_col_stride;
    gemm::sgemm(packed_, source, n, gemm::Output{y, y_row_stride < 0 ? n : y_row_stride, 1}, gemm::Epilogue{}, workspace,
                threads_);
  }

  // Adds the mask's row for batch matrix `b`, query `r`.
  void add_mask(const float* mask, int64_t b, int64_t r, float* row) const {
    // The batch index as the mask's offset: its batch dims' strides against the output's.
    int64_t offset = 0, rest = b;
    for (int64_t d = static_cast<int64_t>(out_batch_.size()) - 1; d >= 0; --d) {
      const int64_t extent = out_batch_[d];
      offset += (rest % extent) * mask_strides_[d];
      rest /= extent;
    }
    const size_t n = out_batch_.size();
    offset += r * mask_strides_[n];
    const int64_t step = mask_strides_[n + 1];
    for (int64_t j = 0; j < s_; ++j) row[j] += mask[offset + j * step];
  }

  void softmax_row(float* row) const {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < s_; ++j) m = std::max(m, row[j]);
    for (int64_t j = 0; j < s_; ++j) row[j] -= m;
    gemm::exp_rows(row, s_);
    double sum = 0;
    for (int64_t j = 0; j < s_; ++j) sum += row[j];
    const float scale = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < s_; ++j) row[j] *= scale;
  }
};

}  // namespace

void register_fused_attention_kernels(KernelRegistry& r) {
  r.add_in_domain<FusedAttentionOp>("edgert", "FusedAttention", "ref-fused-attention", nullptr, attention_tactics);
}

}  // namespace edgert::cpu
