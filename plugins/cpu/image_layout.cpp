// Ops that move image data between layouts: CenterCropPad (opset 18) crops or zero-pads chosen
// axes around their centre; Col2Im (opset 18) sums sliding blocks back into an image, the
// inverse arrangement of im2col.
#include <algorithm>
#include <cstring>

#include "kernel.h"

namespace edgert::cpu {
namespace {

class CenterCropPadOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    elem_ = dtype_size(in[0].dtype);
    if (elem_ == 0) throw_unsupported_dtype(in[0].dtype, "input_data");
    info.data_dependent = 1;  // the output shape is the values of `shape`
    const std::vector<int64_t> sizes = read_ints(in[1], "shape");
    const int rank = in[0].rank;
    std::vector<int64_t> axes = Attributes(&node).get_ints("axes");
    if (axes.empty())
      for (int i = 0; i < rank; ++i) axes.push_back(i);
    if (sizes.size() != axes.size())
      fail(EDGERT_ERR_SHAPE, "shape has %zu entries but %zu axes are cropped or padded", sizes.size(), axes.size());
    rank_ = rank;
    bool seen[EDGERT_MAX_RANK] = {};
    Shape out_shape = shape_of(in[0]);
    for (int i = 0; i < rank; ++i) {
      in_dims_[i] = out_shape[i];
      copy_[i] = out_shape[i];
      in_start_[i] = out_start_[i] = 0;
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normalize_axis(axes[k], rank, "axes entry");
      if (seen[a]) fail(EDGERT_ERR_INVALID_ARGUMENT, "axis %lld is listed twice in axes", static_cast<long long>(a));
      seen[a] = true;
      int64_t dim = in_dims_[a], size = sizes[k];
      if (size < 0) fail(EDGERT_ERR_INVALID_ARGUMENT, "shape[%zu] = %lld is negative", k, static_cast<long long>(size));
      // An odd difference leaves the extra element at the end, as the ONNX reference does.
      if (size < dim) in_start_[a] = (dim - size) / 2;
      else out_start_[a] = (size - dim) / 2;
      copy_[a] = std::min(dim, size);
      out_shape[a] = size;
    }
    for (int i = 0; i < rank; ++i) out_dims_[i] = out_shape[i];
    set_output(out[0], in[0].dtype, out_shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const int64_t total = numel(out[0]);
    if (total == 0) return;
    std::memset(out[0].data, 0, static_cast<size_t>(total) * elem_);
    for (int i = 0; i < rank_; ++i)
      if (copy_[i] == 0) return;
    const char* src = static_cast<const char*>(in[0].data);
    char* dst = static_cast<char*>(out[0].data);
    if (rank_ == 0) {
      std::memcpy(dst, src, elem_);
      return;
    }
    // Row-major walk over the copied block; the last axis is one memcpy.
    int64_t in_strides[EDGERT_MAX_RANK], out_strides[EDGERT_MAX_RANK], counter[EDGERT_MAX_RANK] = {};
    in_strides[rank_ - 1] = out_strides[rank_ - 1] = 1;
    for (int i = rank_ - 1; i > 0; --i) {
      in_strides[i - 1] = in_strides[i] * in_dims_[i];
      out_strides[i - 1] = out_strides[i] * out_dims_[i];
    }
    const size_t row_bytes = static_cast<size_t>(copy_[rank_ - 1]) * elem_;
    while (true) {
      int64_t src_at = 0, dst_at = 0;
      for (int i = 0; i < rank_; ++i) {
        src_at += (in_start_[i] + counter[i]) * in_strides[i];
        dst_at += (out_start_[i] + counter[i]) * out_strides[i];
      }
      std::memcpy(dst + static_cast<size_t>(dst_at) * elem_, src + static_cast<size_t>(src_at) * elem_, row_bytes);
      int i = rank_ - 2;
      for (; i >= 0; --i) {
        if (++counter[i] < copy_[i]) break;
        counter[i] = 0;
      }
      if (i < 0) break;
    }
  }

 private:
  size_t elem_ = 0;
  int rank_ = 0;
  int64_t in_dims_[EDGERT_MAX_RANK] = {}, out_dims_[EDGERT_MAX_RANK] = {};
  int64_t in_start_[EDGERT_MAX_RANK] = {}, out_start_[EDGERT_MAX_RANK] = {}, copy_[EDGERT_MAX_RANK] = {};
};

// input [N, C * prod(block_shape), L] -> output [N, C, *image_shape], where L is the number of
// block positions. Each input column adds its block to the image at its position; overlapping
// blocks sum, in the order the ONNX reference adds them (kernel offset, then block position).
class Col2ImOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info& info) override {
    dispatch(in[0].dtype, kNumeric, [](auto) {}, "input");
    info.data_dependent = 1;  // the output shape is the values of image_shape
    image_ = read_ints(in[1], "image_shape");
    block_ = read_ints(in[2], "block_shape");
    const size_t n = image_.size();
    if (n == 0 || block_.size() != n)
      fail(EDGERT_ERR_SHAPE, "image_shape (%zu values) and block_shape (%zu values) must have the same, non-zero length",
           n, block_.size());
    if (n + 2 > EDGERT_MAX_RANK) fail(EDGERT_ERR_UNSUPPORTED, "%zu spatial dimensions is too many", n);
    Attributes attrs(&node);
    dilations_ = attrs.get_ints("dilations", std::vector<int64_t>(n, 1));
    strides_ = attrs.get_ints("strides", std::vector<int64_t>(n, 1));
    pads_ = attrs.get_ints("pads", std::vector<int64_t>(2 * n, 0));
    if (dilations_.size() != n || strides_.size() != n || pads_.size() != 2 * n)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "dilations (%zu), strides (%zu) and pads (%zu) must have %zu, %zu and %zu values",
           dilations_.size(), strides_.size(), pads_.size(), n, n, 2 * n);
    if (in[0].rank != 3)
      fail(EDGERT_ERR_SHAPE, "input must be 3-D [N, C * prod(block_shape), L], its shape is %s",
           shape_string(shape_of(in[0])).c_str());
    kernel_size_ = 1;
    blocks_.assign(n, 0);
    int64_t positions = 1;
    for (size_t i = 0; i < n; ++i) {
      if (image_[i] <= 0 || block_[i] <= 0 || dilations_[i] <= 0 || strides_[i] <= 0 || pads_[i] < 0 || pads_[i + n] < 0)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "dimension %zu: image %lld, block %lld, dilation %lld, stride %lld must be "
             "positive and pads non-negative", i, static_cast<long long>(image_[i]), static_cast<long long>(block_[i]),
             static_cast<long long>(dilations_[i]), static_cast<long long>(strides_[i]));
      kernel_size_ *= block_[i];
      blocks_[i] = (image_[i] + pads_[i] + pads_[i + n] - dilations_[i] * (block_[i] - 1) - 1) / strides_[i] + 1;
      if (blocks_[i] <= 0)
        fail(EDGERT_ERR_SHAPE, "dimension %zu: the block (%lld, dilation %lld) does not fit the padded image (%lld)", i,
             static_cast<long long>(block_[i]), static_cast<long long>(dilations_[i]),
             static_cast<long long>(image_[i] + pads_[i] + pads_[i + n]));
      positions *= blocks_[i];
    }
    if (in[0].dims[1] % kernel_size_ != 0)
      fail(EDGERT_ERR_SHAPE, "input dimension 1 (%lld) is not a multiple of prod(block_shape) = %lld",
           static_cast<long long>(in[0].dims[1]), static_cast<long long>(kernel_size_));
    if (in[0].dims[2] != positions)
      fail(EDGERT_ERR_SHAPE, "input dimension 2 (%lld) must be the number of block positions, %lld",
           static_cast<long long>(in[0].dims[2]), static_cast<long long>(positions));
    channels_ = in[0].dims[0] * (in[0].dims[1] / kernel_size_);
    positions_ = positions;
    Shape shape = {in[0].dims[0], in[0].dims[1] / kernel_size_};
    shape.insert(shape.end(), image_.begin(), image_.end());
    set_output(out[0], in[0].dtype, shape);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const int n = static_cast<int>(image_.size());
    int64_t image_size = 1;
    for (int64_t d : image_) image_size *= d;
    dispatch_only<kNumeric>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<const T>(in[0]);
      T* y = data_as<T>(out[0]);
      for (int64_t i = 0, total = numel(out[0]); i < total; ++i) y[i] = T(C(0));
      for (int64_t ch = 0; ch < channels_; ++ch) {
        T* image = y + ch * image_size;
        for (int64_t k = 0; k < kernel_size_; ++k) {
          int64_t offset[EDGERT_MAX_RANK];
          for (int64_t d = n - 1, rest = k; d >= 0; --d) {
            offset[d] = rest % block_[d];
            rest /= block_[d];
          }
          const T* column = x + (ch * kernel_size_ + k) * positions_;
          for (int64_t p = 0; p < positions_; ++p) {
            int64_t at = 0;
            bool inside = true;
            for (int64_t d = n - 1, rest = p, stride = 1; d >= 0; --d) {
              int64_t position = rest % blocks_[d];
              rest /= blocks_[d];
              int64_t coord = position * strides_[d] - pads_[d] + offset[d] * dilations_[d];
              if (coord < 0 || coord >= image_[d]) inside = false;
              at += coord * stride;
              stride *= image_[d];
            }
            if (inside) image[at] = static_cast<T>(static_cast<C>(static_cast<C>(image[at]) + static_cast<C>(column[p])));
          }
        }
      }
    }, "input");
  }

 private:
  std::vector<int64_t> image_, block_, dilations_, strides_, pads_, blocks_;
  int64_t kernel_size_ = 1, channels_ = 0, positions_ = 0;
};

}  // namespace

void register_image_layout_kernels(KernelRegistry& r) {
  r.add<CenterCropPadOp>("CenterCropPad", "ref-center-crop-pad");
  r.add<Col2ImOp>("Col2Im", "ref-col2im");
}

}  // namespace edgert::cpu
