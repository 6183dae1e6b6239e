// RotaryEmbedding (opset 23): rotates pairs of each head's first rotary_embedding_dim features
// by the angle whose cos/sin the caches hold for the token's position.
//
// Input is [batch, heads, seq, head_size] or [batch, seq, heads * head_size] (num_heads then
// required); the output has the input's layout. The caches are [max_position, dim / 2] indexed
// by position_ids [batch, seq], or, without position_ids, already [batch, seq, dim / 2].
// Pairs are (i, i + dim / 2) by default, (2i, 2i + 1) when interleaved.
#include "kernel.h"

namespace edgert::cpu {
namespace {

class RotaryEmbeddingOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    const edgert_tensor& x = in[0];
    dispatch(x.dtype, kFloats, [](auto) {}, "X");
    if (node.num_inputs < 3 || !is_present(in[1]) || !is_present(in[2]))
      fail(EDGERT_ERR_SHAPE, "inputs 'cos_cache' and 'sin_cache' are required (X, cos_cache, sin_cache[, position_ids])");
    for (int i = 1; i <= 2; ++i)
      if (in[i].dtype != x.dtype)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "%s must have X's dtype %s, it has %s", i == 1 ? "cos_cache" : "sin_cache",
             dtype_name(x.dtype), dtype_name(in[i].dtype));
    interleaved_ = attrs.get_int("interleaved", 0) != 0;
    int64_t num_heads = attrs.get_int("num_heads", 0);

    if (x.rank == 4) {
      batch_ = x.dims[0];
      heads_ = x.dims[1];
      seq_ = x.dims[2];
      head_size_ = x.dims[3];
      heads_outer_ = true;
    } else if (x.rank == 3) {
      if (num_heads <= 0)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "3-D input %s needs the num_heads attribute (> 0) to split its hidden size",
             shape_string(shape_of(x)).c_str());
      if (x.dims[2] % num_heads != 0)
        fail(EDGERT_ERR_SHAPE, "hidden size %lld of input %s is not divisible by num_heads %lld",
             static_cast<long long>(x.dims[2]), shape_string(shape_of(x)).c_str(), static_cast<long long>(num_heads));
      batch_ = x.dims[0];
      seq_ = x.dims[1];
      heads_ = num_heads;
      head_size_ = x.dims[2] / num_heads;
      heads_outer_ = false;
    } else {
      fail(EDGERT_ERR_SHAPE, "input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], it is %s",
           shape_string(shape_of(x)).c_str());
    }

    rotary_dim_ = attrs.get_int("rotary_embedding_dim", 0);
    if (rotary_dim_ == 0) rotary_dim_ = head_size_;
    if (rotary_dim_ < 0 || rotary_dim_ > head_size_ || rotary_dim_ % 2 != 0)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "rotary_embedding_dim %lld must be even and at most the head size %lld",
           static_cast<long long>(rotary_dim_), static_cast<long long>(head_size_));
    const int64_t half = rotary_dim_ / 2;

    has_positions_ = node.num_inputs > 3 && is_present(in[3]);
    Shape cache = shape_of(in[1]);
    if (shape_of(in[2]) != cache)
      fail(EDGERT_ERR_SHAPE, "cos_cache %s and sin_cache %s must have the same shape", shape_string(cache).c_str(),
           shape_string(shape_of(in[2])).c_str());
    if (has_positions_) {
      if (in[3].dtype != EDGERT_DTYPE_INT64)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "position_ids must be int64, it is %s", dtype_name(in[3].dtype));
      if (shape_of(in[3]) != Shape{batch_, seq_})
        fail(EDGERT_ERR_SHAPE, "position_ids must be [batch, seq] = [%lldx%lld], it is %s",
             static_cast<long long>(batch_), static_cast<long long>(seq_), shape_string(shape_of(in[3])).c_str());
      if (cache.size() != 2 || cache[1] != half)
        fail(EDGERT_ERR_SHAPE, "with position_ids the caches must be [max_position, rotary_dim / 2 = %lld], they are %s",
             static_cast<long long>(half), shape_string(cache).c_str());
      max_position_ = cache[0];
    } else if (cache != Shape{batch_, seq_, half}) {
      fail(EDGERT_ERR_SHAPE, "without position_ids the caches must be [batch, seq, rotary_dim / 2] = [%lldx%lldx%lld], they are %s",
           static_cast<long long>(batch_), static_cast<long long>(seq_), static_cast<long long>(half),
           shape_string(cache).c_str());
    }
    set_output(out[0], x.dtype, shape_of(x));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const int64_t* positions = has_positions_ ? data_as<int64_t>(in[3]) : nullptr;
    dispatch(in[0].dtype, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[0]);
      const T* cos_cache = data_as<T>(in[1]);
      const T* sin_cache = data_as<T>(in[2]);
      T* y = data_as<T>(out[0]);
      const int64_t half = rotary_dim_ / 2;
      const int64_t first = interleaved_ ? 1 : half;  // distance from a pair's first element to its second
      const int64_t step = interleaved_ ? 2 : 1;      // distance between consecutive pairs
      for (int64_t b = 0; b < batch_; ++b)
        for (int64_t s = 0; s < seq_; ++s) {
          int64_t row = b * seq_ + s;
          if (positions) {
            row = positions[b * seq_ + s];
            if (row < 0 || row >= max_position_)
              fail(EDGERT_ERR_INVALID_ARGUMENT, "position_ids[%lld][%lld] = %lld is outside the caches' %lld positions",
                   static_cast<long long>(b), static_cast<long long>(s), static_cast<long long>(row),
                   static_cast<long long>(max_position_));
          }
          const T* cos_row = cos_cache + row * half;
          const T* sin_row = sin_cache + row * half;
          for (int64_t h = 0; h < heads_; ++h) {
            int64_t offset = heads_outer_ ? ((b * heads_ + h) * seq_ + s) * head_size_
                                          : ((b * seq_ + s) * heads_ + h) * head_size_;
            const T* xh = x + offset;
            T* yh = y + offset;
            for (int64_t i = 0; i < half; ++i) {
              int64_t p = i * step, q = p + first;
              double c = static_cast<C>(cos_row[i]), sn = static_cast<C>(sin_row[i]);
              double x1 = static_cast<C>(xh[p]), x2 = static_cast<C>(xh[q]);
              yh[p] = static_cast<T>(static_cast<C>(c * x1 - sn * x2));
              yh[q] = static_cast<T>(static_cast<C>(sn * x1 + c * x2));
            }
            for (int64_t d = rotary_dim_; d < head_size_; ++d) yh[d] = xh[d];
          }
        }
    });
  }

 private:
  bool interleaved_ = false, heads_outer_ = true, has_positions_ = false;
  int64_t batch_ = 0, heads_ = 0, seq_ = 0, head_size_ = 0, rotary_dim_ = 0, max_position_ = 0;
};

}  // namespace

void register_rotary_embedding_kernels(KernelRegistry& r) {
  r.add<RotaryEmbeddingOp>("RotaryEmbedding", "ref-rotary-embedding");
}

}  // namespace edgert::cpu
