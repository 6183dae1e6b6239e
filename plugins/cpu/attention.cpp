// Attention (opsets 23 and 24): Y = softmax(softcap(Q K^T * scale) + bias) V per query head.
//
// Q, K, V come as 4-D [batch, heads, seq, head_size] or as 3-D [batch, seq, heads * head_size]
// (q_num_heads / kv_num_heads then say how to split); Y has Q's layout. past_key/past_value
// [batch, kv_heads, past, head_size] go before K/V along the sequence and the result is
// present_key/present_value, always 4-D. Query head h reads key/value head h / (q_heads /
// kv_heads) (grouped-query attention repeats each kv head for consecutive query heads).
//
// The bias is the sum of: attn_mask (float added, bool false = -inf; broadcast to [batch,
// q_heads, q_seq, total_seq], its last axis -inf-padded when shorter), the causal mask (query i
// sees key j <= i + offset, offset = past length, or nonpad_kv_seqlen[b] - q_seq with only an
// external cache), and opset 24's nonpad_kv_seqlen (keys from nonpad_kv_seqlen[b] on hidden).
// Softcap comes before the bias so that masked scores stay -inf. As in the ONNX reference, a
// row with every key masked gives NaN.
//
// Everything is accumulated in double and rounded once to the output dtype: that is at least
// the precision softmax_precision may ask for.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {
namespace {

enum Input { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonpadKvSeqlen };
enum Output { kY, kPresentKey, kPresentValue, kQkMatmul };

// Which intermediate the optional qk_matmul_output output holds, in the order they are
// computed (softcap before the bias).
enum class QkOutput { Scores = 0, Softcapped = 1, WithBias = 2, Softmax = 3 };

// How a Q/K/V tensor lays out its [batch, heads, seq] rows of head vectors.
struct HeadLayout {
  int64_t heads = 0, seq = 0, head_size = 0;
  bool heads_outer = true;  // 4-D [b, h, s, d]; 3-D is [b, s, h * d]
  int64_t offset(int64_t b, int64_t h, int64_t s) const {
    return heads_outer ? ((b * heads + h) * seq + s) * head_size : ((b * seq + s) * heads + h) * head_size;
  }
};

long long ll(int64_t v) { return static_cast<long long>(v); }

class AttentionOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    Attributes attrs(&node);
    if (node.num_inputs < 3 || !is_present(in[kQ]) || !is_present(in[kK]) || !is_present(in[kV]))
      fail(EDGERT_ERR_SHAPE, "inputs Q, K and V are required");
    dtype_ = in[kQ].dtype;
    dispatch(dtype_, kFloats, [](auto) {}, "Q");
    for (int i : {kK, kV, kPastKey, kPastValue})
      if (has_input(node, in, i) && in[i].dtype != dtype_)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "%s has dtype %s, expected Q's dtype %s", input_name(i),
             dtype_name(in[i].dtype), dtype_name(dtype_));
    read_layouts(attrs, in);

    has_past_ = has_input(node, in, kPastKey);
    if (has_past_ != has_input(node, in, kPastValue))
      fail(EDGERT_ERR_SHAPE, "past_key and past_value must be given together");
    past_ = 0;
    if (has_past_) {
      if (in[kPastKey].rank != 4)
        fail(EDGERT_ERR_SHAPE, "past_key must be 4-D [batch, kv_heads, past_seq, head_size], it is %s",
             shape_string(shape_of(in[kPastKey])).c_str());
      past_ = in[kPastKey].dims[2];
      require_shape(in[kPastKey], {batch_, k_.heads, past_, k_.head_size}, "past_key");
      require_shape(in[kPastValue], {batch_, v_.heads, past_, v_.head_size}, "past_value");
    }
    total_ = past_ + k_.seq;

    has_nonpad_ = has_input(node, in, kNonpadKvSeqlen);
    if (has_nonpad_) {
      if (in[kNonpadKvSeqlen].dtype != EDGERT_DTYPE_INT64)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "nonpad_kv_seqlen must be int64, it is %s",
             dtype_name(in[kNonpadKvSeqlen].dtype));
      require_shape(in[kNonpadKvSeqlen], {batch_}, "nonpad_kv_seqlen");
    }
    has_mask_ = has_input(node, in, kMask);
    if (has_mask_) read_mask(in[kMask]);

    is_causal_ = attrs.get_int("is_causal", 0) != 0;
    scale_ = attrs.has("scale") ? attrs.get_float("scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(q_.head_size));
    softcap_ = attrs.get_float("softcap", 0.0f);
    if (attrs.has("softmax_precision")) {
      auto precision = static_cast<edgert_dtype>(attrs.get_int("softmax_precision", EDGERT_DTYPE_FLOAT32));
      if (precision != EDGERT_DTYPE_FLOAT32 && precision != EDGERT_DTYPE_FLOAT64 && precision != EDGERT_DTYPE_FLOAT16 &&
          precision != EDGERT_DTYPE_BFLOAT16)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "softmax_precision must name a floating point type, got %d",
             static_cast<int>(precision));
    }
    int64_t mode = attrs.get_int("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "qk_matmul_output_mode must be 0..3, got %lld", ll(mode));
    qk_output_ = static_cast<QkOutput>(mode);

    if (node.num_outputs > 4) fail(EDGERT_ERR_UNSUPPORTED, "expects at most 4 outputs, node has %d", node.num_outputs);
    if (in[kQ].rank == 3) set_output(out[kY], dtype_, {batch_, q_.seq, q_.heads * v_.head_size});
    else set_output(out[kY], dtype_, {batch_, q_.heads, q_.seq, v_.head_size});
    if (node.num_outputs > kPresentKey) set_output(out[kPresentKey], dtype_, {batch_, k_.heads, total_, k_.head_size});
    if (node.num_outputs > kPresentValue) set_output(out[kPresentValue], dtype_, {batch_, v_.heads, total_, v_.head_size});
    if (node.num_outputs > kQkMatmul) set_output(out[kQkMatmul], dtype_, {batch_, q_.heads, q_.seq, total_});
    // Three rows of total_seq: the mask's bias, the scores softmax works on, and the row
    // qk_matmul_output keeps.
    info.workspace_bytes = 3 * static_cast<size_t>(total_) * sizeof(double);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace) override {
    const int64_t* nonpad = has_nonpad_ ? data_as<int64_t>(in[kNonpadKvSeqlen]) : nullptr;
    double* mask_bias = static_cast<double*>(workspace);
    double* scores = mask_bias + total_;
    double* kept = scores + total_;
    const int64_t group = q_.heads / k_.heads;
    const double neg_inf = -std::numeric_limits<double>::infinity();
    dispatch(dtype_, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* q = data_as<T>(in[kQ]);
      // Row j of the key (value) sequence of one kv head: the past first, then K (V).
      auto cached_row = [&](int input, int past_input, const HeadLayout& layout, int64_t b, int64_t h, int64_t j) {
        if (j < past_) return data_as<T>(in[past_input]) + ((b * layout.heads + h) * past_ + j) * layout.head_size;
        return data_as<T>(in[input]) + layout.offset(b, h, j - past_);
      };
      T* qk_out = node.num_outputs > kQkMatmul ? data_as<T>(out[kQkMatmul]) : nullptr;
      T* y = data_as<T>(out[kY]);
      HeadLayout y_layout{q_.heads, q_.seq, v_.head_size, q_.heads_outer};

      for (int64_t b = 0; b < batch_; ++b) {
        const int64_t valid_keys = nonpad ? nonpad[b] : total_;
        const int64_t causal_offset = has_past_ ? past_ : (nonpad ? nonpad[b] - q_.seq : 0);
        for (int64_t h = 0; h < q_.heads; ++h) {
          const int64_t kv_head = h / group;
          for (int64_t i = 0; i < q_.seq; ++i) {
            const T* q_row = q + q_.offset(b, h, i);
            if (has_mask_) mask_row(in[kMask], b, h, i, mask_bias);
            for (int64_t j = 0; j < total_; ++j) {
              const T* k_row = cached_row(kK, kPastKey, k_, b, kv_head, j);
              double dot = 0;
              for (int64_t d = 0; d < q_.head_size; ++d)
                dot += static_cast<double>(static_cast<C>(q_row[d])) * static_cast<C>(k_row[d]);
              const double raw = dot * scale_;
              const double score = softcap_ > 0 ? softcap_ * std::tanh(raw / softcap_) : raw;
              double bias = has_mask_ ? mask_bias[j] : 0;
              if (is_causal_ && j > i + causal_offset) bias += neg_inf;
              if (j >= valid_keys) bias += neg_inf;
              scores[j] = score + bias;
              if (qk_out && qk_output_ != QkOutput::Softmax)
                kept[j] = qk_output_ == QkOutput::Scores ? raw : qk_output_ == QkOutput::Softcapped ? score : scores[j];
            }
            softmax(scores);
            T* y_row = y + y_layout.offset(b, h, i);
            for (int64_t d = 0; d < v_.head_size; ++d) {
              double sum = 0;
              for (int64_t j = 0; j < total_; ++j)
                sum += scores[j] * static_cast<C>(cached_row(kV, kPastValue, v_, b, kv_head, j)[d]);
              y_row[d] = static_cast<T>(static_cast<C>(sum));
            }
            if (qk_out) {
              const double* source = qk_output_ == QkOutput::Softmax ? scores : kept;
              T* qk_row = qk_out + ((b * q_.heads + h) * q_.seq + i) * total_;
              for (int64_t j = 0; j < total_; ++j) qk_row[j] = static_cast<T>(static_cast<C>(source[j]));
            }
          }
        }
      }
      write_present(node, out, kK, kPastKey, kPresentKey, k_, cached_row);
      write_present(node, out, kV, kPastValue, kPresentValue, v_, cached_row);
    });
  }

 private:
  static const char* input_name(int i) {
    static const char* const names[] = {"Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"};
    return names[i];
  }

  void read_layouts(const Attributes& attrs, const edgert_tensor* in) {
    const int rank = in[kQ].rank;
    if (rank != 3 && rank != 4)
      fail(EDGERT_ERR_SHAPE, "Q must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], it is %s",
           shape_string(shape_of(in[kQ])).c_str());
    for (int i : {kK, kV})
      if (in[i].rank != rank)
        fail(EDGERT_ERR_SHAPE, "%s %s must have Q's rank %d (Q is %s)", input_name(i), shape_string(shape_of(in[i])).c_str(),
             rank, shape_string(shape_of(in[kQ])).c_str());
    batch_ = in[kQ].dims[0];
    for (int i : {kK, kV})
      if (in[i].dims[0] != batch_)
        fail(EDGERT_ERR_SHAPE, "%s %s has batch %lld, Q has %lld", input_name(i), shape_string(shape_of(in[i])).c_str(),
             ll(in[i].dims[0]), ll(batch_));
    if (rank == 4) {
      q_ = {in[kQ].dims[1], in[kQ].dims[2], in[kQ].dims[3], true};
      k_ = {in[kK].dims[1], in[kK].dims[2], in[kK].dims[3], true};
      v_ = {in[kV].dims[1], in[kV].dims[2], in[kV].dims[3], true};
    } else {
      int64_t q_heads = attrs.get_int("q_num_heads", 0), kv_heads = attrs.get_int("kv_num_heads", 0);
      if (q_heads <= 0 || kv_heads <= 0)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "3-D Q/K/V need the q_num_heads and kv_num_heads attributes (> 0), got %lld and %lld",
             ll(q_heads), ll(kv_heads));
      q_ = split_heads(in[kQ], q_heads, "Q", "q_num_heads");
      k_ = split_heads(in[kK], kv_heads, "K", "kv_num_heads");
      v_ = split_heads(in[kV], kv_heads, "V", "kv_num_heads");
    }
    if (k_.heads != v_.heads || k_.seq != v_.seq)
      fail(EDGERT_ERR_SHAPE, "K %s and V %s must have the same kv heads and sequence length",
           shape_string(shape_of(in[kK])).c_str(), shape_string(shape_of(in[kV])).c_str());
    if (k_.head_size != q_.head_size)
      fail(EDGERT_ERR_SHAPE, "K's head size %lld differs from Q's %lld", ll(k_.head_size), ll(q_.head_size));
    if (k_.heads <= 0 || q_.heads % k_.heads != 0)
      fail(EDGERT_ERR_SHAPE, "the %lld query heads are not a multiple of the %lld kv heads", ll(q_.heads), ll(k_.heads));
  }

  static HeadLayout split_heads(const edgert_tensor& t, int64_t heads, const char* what, const char* attribute) {
    if (t.dims[2] % heads != 0)
      fail(EDGERT_ERR_SHAPE, "%s's hidden size %lld (shape %s) is not divisible by %s = %lld", what, ll(t.dims[2]),
           shape_string(shape_of(t)).c_str(), attribute, ll(heads));
    return {heads, t.dims[1], t.dims[2] / heads, false};
  }

  static void require_shape(const edgert_tensor& t, const Shape& expected, const char* what) {
    if (shape_of(t) != expected)
      fail(EDGERT_ERR_SHAPE, "%s must be %s, it is %s", what, shape_string(expected).c_str(),
           shape_string(shape_of(t)).c_str());
  }

  // attn_mask broadcasts to [batch, q_heads, q_seq, total_seq] (rank 2 to 4, right-aligned);
  // its last axis may be shorter than total_seq.
  void read_mask(const edgert_tensor& m) {
    if (m.dtype != EDGERT_DTYPE_BOOL) dispatch(m.dtype, kFloats, [](auto) {}, "attn_mask");
    if (m.rank < 2 || m.rank > 4)
      fail(EDGERT_ERR_SHAPE, "attn_mask must have rank 2 to 4, it is %s", shape_string(shape_of(m)).c_str());
    const int64_t target[4] = {batch_, q_.heads, q_.seq, total_};
    const char* axis_names[4] = {"batch", "q_num_heads", "q_sequence_length", "total_sequence_length"};
    mask_keys_ = m.dims[m.rank - 1];
    if (mask_keys_ > total_)
      fail(EDGERT_ERR_SHAPE, "attn_mask %s has %lld keys, more than the total sequence length %lld",
           shape_string(shape_of(m)).c_str(), ll(mask_keys_), ll(total_));
    int64_t stride = mask_keys_;
    for (int axis = 2; axis >= 0; --axis) {
      int mask_axis = m.rank - 4 + axis;
      int64_t dim = mask_axis >= 0 ? m.dims[mask_axis] : 1;
      if (dim != 1 && dim != target[axis])
        fail(EDGERT_ERR_SHAPE, "attn_mask %s does not broadcast to [%lldx%lldx%lldx%lld]: its %s axis is %lld",
             shape_string(shape_of(m)).c_str(), ll(target[0]), ll(target[1]), ll(target[2]), ll(target[3]),
             axis_names[axis], ll(dim));
      mask_strides_[axis] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  }

  // The mask's additive bias for the keys of query row (b, h, i).
  void mask_row(const edgert_tensor& m, int64_t b, int64_t h, int64_t i, double* row) const {
    const int64_t base = b * mask_strides_[0] + h * mask_strides_[1] + i * mask_strides_[2];
    const double neg_inf = -std::numeric_limits<double>::infinity();
    dispatch(m.dtype, kFloats | kBool, [&](auto tag) {
      using M = typename decltype(tag)::type;
      const M* mask = data_as<M>(m) + base;
      for (int64_t j = 0; j < mask_keys_; ++j) {
        if constexpr (std::is_same_v<M, bool>) row[j] = mask[j] ? 0.0 : neg_inf;
        else row[j] = static_cast<compute_t<M>>(mask[j]);
      }
    }, "attn_mask");
    for (int64_t j = mask_keys_; j < total_; ++j) row[j] = neg_inf;
  }

  void softmax(double* row) const {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < total_; ++j) m = row[j] > m ? row[j] : m;
    double sum = 0;
    for (int64_t j = 0; j < total_; ++j) {
      // With every key masked m is -inf and this is NaN, as numpy gives.
      row[j] = std::exp(row[j] - m);
      sum += row[j];
    }
    for (int64_t j = 0; j < total_; ++j) row[j] /= sum;
  }

  template <typename RowFn>
  void write_present(const edgert_node& node, edgert_tensor* out, int input, int past_input,
                     int output, const HeadLayout& layout, RowFn& cached_row) const {
    if (node.num_outputs <= output || !out[output].data) return;
    using T = std::remove_const_t<std::remove_pointer_t<decltype(cached_row(0, 0, layout, 0, 0, 0))>>;
    T* present = data_as<T>(out[output]);
    const size_t row_bytes = static_cast<size_t>(layout.head_size) * sizeof(T);
    for (int64_t b = 0; b < batch_; ++b)
      for (int64_t h = 0; h < layout.heads; ++h)
        for (int64_t j = 0; j < total_; ++j)
          std::memcpy(present + ((b * layout.heads + h) * total_ + j) * layout.head_size,
                      cached_row(input, past_input, layout, b, h, j), row_bytes);
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_UNDEFINED;
  HeadLayout q_, k_, v_;
  int64_t batch_ = 0, past_ = 0, total_ = 0, mask_keys_ = 0;
  int64_t mask_strides_[3] = {};
  bool has_past_ = false, has_mask_ = false, has_nonpad_ = false, is_causal_ = false;
  double scale_ = 1, softcap_ = 0;
  QkOutput qk_output_ = QkOutput::Scores;
};

}  // namespace

void register_attention_kernels(KernelRegistry& r) {
  r.add<AttentionOp>("Attention", "ref-attention");
}

}  // namespace edgert::cpu
