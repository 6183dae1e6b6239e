// FlexAttention (ai.onnx.preview, version 1): Y = softmax(Q K^T * scale) V over rank-4
// [batch, heads, seq, head_size] tensors, with optional score_mod / prob_mod subgraphs that
// rewrite the scores before the softmax and the probabilities after it.
//
// This kernel runs the op without modifiers. A plugin kernel is handed a graph attribute only
// as the index of a subgraph in the engine and has no way to evaluate it, so nodes that carry
// score_mod or prob_mod are refused in supports() and left to a plugin that can.
//
// Query head h reads key/value head h / (q_heads / kv_heads). Rounding follows the ONNX
// reference: Q and K are each multiplied by sqrt(scale) in their own dtype, the scores are
// rounded to that dtype, then converted to the softmax precision (softmax_precision, or float32
// for every input but double), in which the softmax and the product with V are taken before
// the result is rounded back. The sums themselves run in double.
#include <cmath>
#include <limits>

#include "kernel.h"

namespace edgert::cpu {
namespace {

enum Input { kQ, kK, kV };

long long ll(int64_t v) { return static_cast<long long>(v); }

bool has_modifier_graph(const Attributes& attrs) { return attrs.has("score_mod") || attrs.has("prob_mod"); }

// Rounds a value to the precision of `dtype` (one of the float dtypes), keeping it a double.
double round_to(edgert_dtype dtype, double v) {
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT16: return static_cast<float>(float16(static_cast<float>(v)));
    case EDGERT_DTYPE_BFLOAT16: return static_cast<float>(bfloat16(static_cast<float>(v)));
    case EDGERT_DTYPE_FLOAT32: return static_cast<float>(v);
    default: return v;
  }
}

class FlexAttentionOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    if (has_modifier_graph(attrs))
      fail(EDGERT_ERR_UNSUPPORTED, "score_mod / prob_mod subgraphs cannot be evaluated inside a plugin kernel");
    dtype_ = in[kQ].dtype;
    dispatch(dtype_, kFloats, [](auto) {}, "Q");
    for (int i : {kQ, kK, kV}) {
      if (in[i].rank != 4)
        fail(EDGERT_ERR_SHAPE, "%s must be 4-D [batch, heads, seq, head_size], it is %s", input_name(i),
             shape_string(shape_of(in[i])).c_str());
      if (in[i].dtype != dtype_)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "%s has dtype %s, expected Q's dtype %s", input_name(i),
             dtype_name(in[i].dtype), dtype_name(dtype_));
    }
    const Shape q = shape_of(in[kQ]), k = shape_of(in[kK]), v = shape_of(in[kV]);
    batch_ = q[0];
    q_heads_ = q[1];
    q_seq_ = q[2];
    head_size_ = q[3];
    kv_heads_ = k[1];
    kv_seq_ = k[2];
    v_head_size_ = v[3];
    if (k[0] != batch_ || v[0] != batch_ || k[3] != head_size_ || v[1] != kv_heads_ || v[2] != kv_seq_)
      fail(EDGERT_ERR_SHAPE, "Q %s, K %s, V %s: batch must agree, K must have Q's head size, V K's heads and sequence length",
           shape_string(q).c_str(), shape_string(k).c_str(), shape_string(v).c_str());
    if (kv_heads_ <= 0 || q_heads_ % kv_heads_ != 0)
      fail(EDGERT_ERR_SHAPE, "the %lld query heads are not a multiple of the %lld kv heads", ll(q_heads_), ll(kv_heads_));

    const double scale = attrs.has("scale") ? attrs.get_float("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(head_size_));
    // sqrt(scale) is taken in float32, then rounded to the inputs' dtype.
    sqrt_scale_ = round_to(dtype_, std::sqrt(static_cast<float>(scale)));
    softmax_dtype_ = dtype_ == EDGERT_DTYPE_FLOAT64 ? EDGERT_DTYPE_FLOAT64 : EDGERT_DTYPE_FLOAT32;
    if (attrs.has("softmax_precision")) {
      softmax_dtype_ = static_cast<edgert_dtype>(attrs.get_int("softmax_precision", EDGERT_DTYPE_FLOAT32));
      if (softmax_dtype_ != EDGERT_DTYPE_FLOAT32 && softmax_dtype_ != EDGERT_DTYPE_FLOAT64 &&
          softmax_dtype_ != EDGERT_DTYPE_FLOAT16 && softmax_dtype_ != EDGERT_DTYPE_BFLOAT16)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "softmax_precision must name a floating point type, got %d",
             static_cast<int>(softmax_dtype_));
    }
    set_output(out[0], dtype_, {batch_, q_heads_, q_seq_, v_head_size_});
    // One row of scores over the keys, then the query row pre-scaled.
    info.workspace_bytes = static_cast<size_t>(kv_seq_ + head_size_) * sizeof(double);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    double* probs = static_cast<double*>(workspace);
    double* q_row = probs + kv_seq_;
    const int64_t group = q_heads_ / kv_heads_;
    dispatch(dtype_, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      auto value = [](const T* p, int64_t i) { return static_cast<double>(static_cast<C>(p[i])); };
      const T* q = data_as<T>(in[kQ]);
      const T* k = data_as<T>(in[kK]);
      const T* v = data_as<T>(in[kV]);
      T* y = data_as<T>(out[0]);
      for (int64_t b = 0; b < batch_; ++b)
        for (int64_t h = 0; h < q_heads_; ++h) {
          const int64_t kv = b * kv_heads_ + h / group;
          const T* k_head = k + kv * kv_seq_ * head_size_;
          const T* v_head = v + kv * kv_seq_ * v_head_size_;
          for (int64_t i = 0; i < q_seq_; ++i) {
            const int64_t row = (b * q_heads_ + h) * q_seq_ + i;
            for (int64_t d = 0; d < head_size_; ++d) q_row[d] = round_to(dtype_, value(q, row * head_size_ + d) * sqrt_scale_);
            double max = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < kv_seq_; ++j) {
              double dot = 0;
              for (int64_t d = 0; d < head_size_; ++d)
                dot += q_row[d] * round_to(dtype_, value(k_head, j * head_size_ + d) * sqrt_scale_);
              probs[j] = round_to(softmax_dtype_, round_to(dtype_, dot));
              max = probs[j] > max ? probs[j] : max;
            }
            double sum = 0;
            for (int64_t j = 0; j < kv_seq_; ++j) {
              probs[j] = std::exp(probs[j] - max);
              sum += probs[j];
            }
            for (int64_t j = 0; j < kv_seq_; ++j) probs[j] = round_to(softmax_dtype_, probs[j] / sum);
            for (int64_t e = 0; e < v_head_size_; ++e) {
              double acc = 0;
              for (int64_t j = 0; j < kv_seq_; ++j) acc += probs[j] * round_to(softmax_dtype_, value(v_head, j * v_head_size_ + e));
              y[row * v_head_size_ + e] = static_cast<T>(static_cast<C>(round_to(softmax_dtype_, acc)));
            }
          }
        }
    });
  }

 private:
  static const char* input_name(int i) {
    static const char* const names[] = {"Q", "K", "V"};
    return names[i];
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_UNDEFINED, softmax_dtype_ = EDGERT_DTYPE_FLOAT32;
  int64_t batch_ = 0, q_heads_ = 0, q_seq_ = 0, head_size_ = 0, kv_heads_ = 0, kv_seq_ = 0, v_head_size_ = 0;
  double sqrt_scale_ = 1;
};

int32_t flex_attention_supports(const edgert_node* node, const edgert_tensor*) {
  return has_modifier_graph(Attributes(node)) ? 0 : 1;
}

}  // namespace

void register_flex_attention_kernels(KernelRegistry& r) {
  r.add_in_domain<FlexAttentionOp>("ai.onnx.preview", "FlexAttention", "ref-flex-attention", flex_attention_supports);
}

}  // namespace edgert::cpu
