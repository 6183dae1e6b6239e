// LinearAttention (opset 27): attention as a recurrence over a matrix state per kv head, for
// decoding (one token) and prefill (many) alike.
//
// query [B, T, Hq * dk], key [B, T, Hkv * dk] and value [B, T, Hkv * dv] pack their heads in the
// last axis; the state S is [B, Hkv, dk, dv], from past_state or zeros. For each token t in turn:
//   gated rules:  S = exp(g_t) * S             (decay g: [B, T, Hkv * dk] per key row, or [B, T, Hkv])
//   delta rules:  v_t = beta_t * (v_t - S^T k_t) (beta: [B, T, Hkv] or [B, T, 1])
//   always:       S = S + k_t v_t^T,  o_t = scale * S^T q_t
// update_rule picks the lines: linear (neither), gated, delta, gated_delta (both). Query head h
// reads kv head h / (Hq / Hkv). scale 0 means 1 / sqrt(dk).
//
// The recurrence runs in double in the workspace and is rounded once: output to the query's
// dtype, present_state to past_state's dtype (the query's when there is no past_state).
#include <cmath>
#include <string>

#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {
namespace {

enum Input { kQuery, kKey, kValue, kPastState, kDecay, kBeta };
enum Output { kOutput, kPresentState };

long long ll(int64_t v) { return static_cast<long long>(v); }

class LinearAttentionOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    dtype_ = in[kQuery].dtype;
    dispatch(dtype_, kFloats, [](auto) {}, "query");
    for (int i : {kQuery, kKey, kValue}) {
      if (in[i].rank != 3)
        fail(EDGERT_ERR_SHAPE, "%s must be 3-D [batch, seq, heads * head_size], it is %s", input_name(i),
             shape_string(shape_of(in[i])).c_str());
      if (i != kQuery) require_dtype(in[i], input_name(i));
    }
    read_update_rule(attrs.get_string("update_rule", "gated_delta"));
    read_heads(attrs, in);

    const float scale = attrs.get_float("scale", 0.0f);
    scale_ = scale != 0.0f ? scale : 1.0 / std::sqrt(static_cast<double>(dk_));

    if (gated_ != has_input(node, in, kDecay))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "update_rule '%s' %s the decay input", rule_.c_str(),
           gated_ ? "requires" : "does not take");
    if (delta_ != has_input(node, in, kBeta))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "update_rule '%s' %s the beta input", rule_.c_str(),
           delta_ ? "requires" : "does not take");
    if (gated_) {
      const edgert_tensor& g = in[kDecay];
      require_dtype(g, "decay");
      const int64_t last = g.rank == 3 ? g.dims[2] : -1;
      if (g.rank != 3 || g.dims[0] != batch_ || g.dims[1] != seq_ || (last != kv_heads_ && last != kv_heads_ * dk_))
        fail(EDGERT_ERR_SHAPE, "decay must be [%lld, %lld, %lld] (per key row) or [%lld, %lld, %lld] (per head), it is %s",
             ll(batch_), ll(seq_), ll(kv_heads_ * dk_), ll(batch_), ll(seq_), ll(kv_heads_),
             shape_string(shape_of(g)).c_str());
      decay_per_row_ = last == kv_heads_ * dk_;
    }
    if (delta_) {
      const edgert_tensor& beta = in[kBeta];
      require_dtype(beta, "beta");
      const int64_t last = beta.rank == 3 ? beta.dims[2] : -1;
      if (beta.rank != 3 || beta.dims[0] != batch_ || beta.dims[1] != seq_ || (last != kv_heads_ && last != 1))
        fail(EDGERT_ERR_SHAPE, "beta must be [%lld, %lld, %lld] or [%lld, %lld, 1], it is %s", ll(batch_), ll(seq_),
             ll(kv_heads_), ll(batch_), ll(seq_), shape_string(shape_of(beta)).c_str());
      beta_per_head_ = last == kv_heads_ && kv_heads_ != 1;
    }

    const Shape state_shape{batch_, kv_heads_, dk_, dv_};
    state_dtype_ = dtype_;
    has_past_ = has_input(node, in, kPastState);
    if (has_past_) {
      state_dtype_ = in[kPastState].dtype;
      dispatch(state_dtype_, kFloats, [](auto) {}, "past_state");
      if (shape_of(in[kPastState]) != state_shape)
        fail(EDGERT_ERR_SHAPE, "past_state must be [batch, kv_num_heads, dk, dv] = %s, it is %s",
             shape_string(state_shape).c_str(), shape_string(shape_of(in[kPastState])).c_str());
    }

    if (node.num_outputs > 2) fail(EDGERT_ERR_UNSUPPORTED, "expects at most 2 outputs, node has %d", node.num_outputs);
    set_output(out[kOutput], dtype_, {batch_, seq_, q_heads_ * dv_});
    if (node.num_outputs > kPresentState) set_output(out[kPresentState], state_dtype_, state_shape);
    // The state of every (batch, kv head), then one row of dv for the corrected value.
    info.workspace_bytes = static_cast<size_t>(numel(state_shape) + dv_) * sizeof(double);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    double* state = static_cast<double*>(workspace);
    double* value_row = state + batch_ * kv_heads_ * dk_ * dv_;
    load_state(in, state);
    dispatch(dtype_, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      auto at = [](const edgert_tensor& t, int64_t i) { return static_cast<double>(static_cast<C>(data_as<T>(t)[i])); };
      T* y = data_as<T>(out[kOutput]);
      const int64_t group = q_heads_ / kv_heads_;
      const int64_t decay_width = decay_per_row_ ? kv_heads_ * dk_ : kv_heads_;
      const int64_t beta_width = beta_per_head_ ? kv_heads_ : 1;
      for (int64_t b = 0; b < batch_; ++b)
        for (int64_t t = 0; t < seq_; ++t) {
          const int64_t token = b * seq_ + t;
          for (int64_t h = 0; h < kv_heads_; ++h) {
            double* s = state + (b * kv_heads_ + h) * dk_ * dv_;
            const int64_t k_base = (token * kv_heads_ + h) * dk_;
            const int64_t v_base = (token * kv_heads_ + h) * dv_;
            if (gated_)
              for (int64_t i = 0; i < dk_; ++i) {
                const double g = at(in[kDecay], token * decay_width + (decay_per_row_ ? h * dk_ + i : h));
                const double factor = std::exp(g);
                for (int64_t m = 0; m < dv_; ++m) s[i * dv_ + m] *= factor;
              }
            for (int64_t m = 0; m < dv_; ++m) value_row[m] = at(in[kValue], v_base + m);
            if (delta_) {
              const double beta = at(in[kBeta], token * beta_width + (beta_per_head_ ? h : 0));
              for (int64_t m = 0; m < dv_; ++m) {
                double retrieved = 0;
                for (int64_t i = 0; i < dk_; ++i) retrieved += s[i * dv_ + m] * at(in[kKey], k_base + i);
                value_row[m] = beta * (value_row[m] - retrieved);
              }
            }
            for (int64_t i = 0; i < dk_; ++i) {
              const double k = at(in[kKey], k_base + i);
              for (int64_t m = 0; m < dv_; ++m) s[i * dv_ + m] += k * value_row[m];
            }
            for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
              const int64_t q_base = (token * q_heads_ + qh) * dk_;
              T* y_row = y + (token * q_heads_ + qh) * dv_;
              for (int64_t m = 0; m < dv_; ++m) {
                double sum = 0;
                for (int64_t i = 0; i < dk_; ++i) sum += at(in[kQuery], q_base + i) * s[i * dv_ + m];
                y_row[m] = static_cast<T>(static_cast<C>(scale_ * sum));
              }
            }
          }
        }
    });
    if (node.num_outputs > kPresentState) store_state(state, out[kPresentState]);
  }

 private:
  static const char* input_name(int i) {
    static const char* const names[] = {"query", "key", "value", "past_state", "decay", "beta"};
    return names[i];
  }

  void require_dtype(const edgert_tensor& t, const char* what) const {
    if (t.dtype != dtype_)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "%s has dtype %s, expected the query's dtype %s", what, dtype_name(t.dtype),
           dtype_name(dtype_));
  }

  void read_update_rule(const std::string& rule) {
    rule_ = rule;
    if (rule == "linear") gated_ = false, delta_ = false;
    else if (rule == "gated") gated_ = true, delta_ = false;
    else if (rule == "delta") gated_ = false, delta_ = true;
    else if (rule == "gated_delta") gated_ = true, delta_ = true;
    else fail(EDGERT_ERR_INVALID_ARGUMENT, "update_rule '%s' is not one of 'linear', 'gated', 'delta', 'gated_delta'", rule.c_str());
  }

  void read_heads(const Attributes& attrs, const edgert_tensor* in) {
    if (!attrs.has("q_num_heads") || !attrs.has("kv_num_heads"))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "the q_num_heads and kv_num_heads attributes are required");
    q_heads_ = attrs.get_int("q_num_heads", 0);
    kv_heads_ = attrs.get_int("kv_num_heads", 0);
    if (q_heads_ <= 0 || kv_heads_ <= 0 || q_heads_ % kv_heads_ != 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "q_num_heads %lld must be a positive multiple of kv_num_heads %lld", ll(q_heads_),
           ll(kv_heads_));
    const Shape q = shape_of(in[kQuery]), k = shape_of(in[kKey]), v = shape_of(in[kValue]);
    batch_ = q[0];
    seq_ = q[1];
    if (q[2] % q_heads_ != 0)
      fail(EDGERT_ERR_SHAPE, "query %s: hidden size not divisible by q_num_heads %lld", shape_string(q).c_str(), ll(q_heads_));
    if (v[2] % kv_heads_ != 0)
      fail(EDGERT_ERR_SHAPE, "value %s: hidden size not divisible by kv_num_heads %lld", shape_string(v).c_str(),
           ll(kv_heads_));
    dk_ = q[2] / q_heads_;
    dv_ = v[2] / kv_heads_;
    if (k != Shape{batch_, seq_, kv_heads_ * dk_} || v[0] != batch_ || v[1] != seq_)
      fail(EDGERT_ERR_SHAPE, "key %s must be [%lld, %lld, kv_num_heads * dk = %lld] and value %s [%lld, %lld, *] (query is %s)",
           shape_string(k).c_str(), ll(batch_), ll(seq_), ll(kv_heads_ * dk_), shape_string(v).c_str(), ll(batch_),
           ll(seq_), shape_string(q).c_str());
  }

  void load_state(const edgert_tensor* in, double* state) const {
    const int64_t n = batch_ * kv_heads_ * dk_ * dv_;
    if (!has_past_) {
      for (int64_t i = 0; i < n; ++i) state[i] = 0;
      return;
    }
    dispatch(state_dtype_, kFloats, [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* past = data_as<S>(in[kPastState]);
      for (int64_t i = 0; i < n; ++i) state[i] = static_cast<compute_t<S>>(past[i]);
    });
  }

  void store_state(const double* state, edgert_tensor& present) const {
    const int64_t n = batch_ * kv_heads_ * dk_ * dv_;
    dispatch(state_dtype_, kFloats, [&](auto tag) {
      using S = typename decltype(tag)::type;
      S* p = data_as<S>(present);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<S>(static_cast<compute_t<S>>(state[i]));
    });
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_UNDEFINED, state_dtype_ = EDGERT_DTYPE_UNDEFINED;
  std::string rule_;
  bool gated_ = true, delta_ = true, has_past_ = false, decay_per_row_ = false, beta_per_head_ = false;
  int64_t batch_ = 0, seq_ = 0, q_heads_ = 0, kv_heads_ = 0, dk_ = 0, dv_ = 0;
  double scale_ = 1;
};

}  // namespace

void register_linear_attention_kernels(KernelRegistry& r) {
  r.add<LinearAttentionOp>("LinearAttention", "ref-linear-attention");
}

}  // namespace edgert::cpu
