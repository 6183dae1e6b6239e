// TensorScatter (opset 24): the functional form of a KV-cache update. The output is past_cache
// with, for every index of the axes before `axis`, the rows of `update` along `axis` written from
// position write_indices[batch] on (wrapping around the axis in "circular" mode).
//
// Only bytes move, so one loop serves every dtype.
#include <cstring>
#include <string>

#include "kernel.h"

namespace edgert::cpu {
namespace {

class TensorScatterOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    std::string mode = attrs.get_string("mode", "linear");
    if (mode != "linear" && mode != "circular")
      fail(EDGERT_ERR_INVALID_ARGUMENT, "mode must be 'linear' or 'circular', got '%s'", mode.c_str());
    circular_ = mode == "circular";
    const edgert_tensor& past = in[0];
    const edgert_tensor& update = in[1];
    elem_ = dtype_size(past.dtype);
    if (elem_ == 0) throw_unsupported_dtype(past.dtype, "past_cache");
    if (update.dtype != past.dtype)
      fail(EDGERT_ERR_SHAPE, "update has dtype %s, past_cache has %s", dtype_name(update.dtype),
           dtype_name(past.dtype));
    if (past.rank < 1) fail(EDGERT_ERR_SHAPE, "past_cache must have rank >= 1 (batch first), it is a scalar");
    axis_ = normalize_axis(attrs.get_int("axis", -2), past.rank);
    if (axis_ == 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "axis must not be the batch axis 0");
    bool compatible = update.rank == past.rank;
    for (int i = 0; compatible && i < past.rank; ++i)
      compatible = i == axis_ ? update.dims[i] <= past.dims[i] : update.dims[i] == past.dims[i];
    if (!compatible)
      fail(EDGERT_ERR_SHAPE, "update has shape %s; past_cache %s allows it to differ only along axis %lld, "
           "and be no longer there", shape_string(shape_of(update)).c_str(), shape_string(shape_of(past)).c_str(),
           static_cast<long long>(axis_));
    has_indices_ = node.num_inputs > 2 && is_present(in[2]);
    if (has_indices_) {
      const edgert_tensor& w = in[2];
      if (w.dtype != EDGERT_DTYPE_INT64 && w.dtype != EDGERT_DTYPE_INT32)
        fail(EDGERT_ERR_SHAPE, "write_indices must be int64, got %s", dtype_name(w.dtype));
      if (w.rank != 1 || w.dims[0] != past.dims[0])
        fail(EDGERT_ERR_SHAPE, "write_indices must have shape [%lld] (one per batch), it has %s",
             static_cast<long long>(past.dims[0]), shape_string(shape_of(w)).c_str());
    }
    batch_ = past.dims[0];
    outer_per_batch_ = 1;
    for (int64_t i = 1; i < axis_; ++i) outer_per_batch_ *= past.dims[i];
    max_len_ = past.dims[axis_];
    len_ = update.dims[axis_];
    row_ = 1;
    for (int i = static_cast<int>(axis_) + 1; i < past.rank; ++i) row_ *= past.dims[i];
    set_output(out[0], past.dtype, shape_of(past));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const size_t row_bytes = static_cast<size_t>(row_) * elem_;
    const size_t total = static_cast<size_t>(numel(in[0])) * elem_;
    if (total && out[0].data != in[0].data) std::memcpy(out[0].data, in[0].data, total);
    const char* update = static_cast<const char*>(in[1].data);
    char* present = static_cast<char*>(out[0].data);
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t start = has_indices_ ? write_index(in[2], b) : 0;
      if (!circular_ && (start < 0 || start + len_ > max_len_))
        fail(EDGERT_ERR_INVALID_ARGUMENT, "write_indices[%lld] = %lld: %lld rows do not fit in %lld (linear mode)",
             static_cast<long long>(b), static_cast<long long>(start), static_cast<long long>(len_),
             static_cast<long long>(max_len_));
      for (int64_t o = 0; o < outer_per_batch_; ++o) {
        const int64_t prefix = b * outer_per_batch_ + o;
        for (int64_t s = 0; s < len_; ++s) {
          int64_t at = start + s;
          if (circular_) at = ((at % max_len_) + max_len_) % max_len_;
          std::memcpy(present + static_cast<size_t>(prefix * max_len_ + at) * row_bytes,
                      update + static_cast<size_t>(prefix * len_ + s) * row_bytes, row_bytes);
        }
      }
    }
  }

 private:
  static int64_t write_index(const edgert_tensor& w, int64_t b) {
    return w.dtype == EDGERT_DTYPE_INT64 ? data_as<const int64_t>(w)[b] : data_as<const int32_t>(w)[b];
  }

  bool circular_ = false, has_indices_ = false;
  size_t elem_ = 0;
  int64_t axis_ = 0, batch_ = 0, outer_per_batch_ = 1, max_len_ = 0, len_ = 0, row_ = 1;
};

}  // namespace

void register_tensor_scatter_kernels(KernelRegistry& r) {
  r.add<TensorScatterOp>("TensorScatter", "ref-tensor-scatter");
}

}  // namespace edgert::cpu
