// QLinearConv on the GPU: dense 2-D convolutions of uint8 activations with per-channel (or
// per-tensor) symmetric int8 weights, int32 bias, uint8 output, on our IMMA kernel
// (qconv_imma.h): channels-last with weights [M, KH, KW, C] (the builder's layout pass writes
// them so for INT8 networks on the GPU), or NCHW on a slower gather; one tactic per tiling and
// number of reduction slices. edgert.QLinearConvAdd is the same with a residual QLinearAdd in the
// epilogue. Grouped and depthwise int8 convolutions, int8 activations and weight zero points
// other than 0 stay on the CPU plugin (supports() refuses them).
#include <map>
#include <string>

#include "conv_geometry.h"
#include "cuda_op.h"
#include "quantization_operands.h"
#include "qconv_imma.h"

namespace edgert::cuda {
namespace {

// Inputs: X, x_scale, x_zero_point, W, w_scale, w_zero_point, y_scale, y_zero_point, B, and for
// edgert.QLinearConvAdd (QLinearConv followed by QLinearAdd, which the builder fuses on the GPU)
// R, r_scale, r_zero_point, sum_scale, sum_zero_point: the output is QLinearAdd(conv bytes at
// y_scale / y_zero_point, R) at sum_scale / sum_zero_point (B may then be absent). The scalars
// and W's scales and zero points are read on the host (prepare uploads the per-filter
// multipliers); W, B and R are read on the device.
constexpr uint64_t kHostOperands = (1u << 1) | (1u << 2) | (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7) |
                                   (1u << 10) | (1u << 11) | (1u << 12) | (1u << 13);
constexpr int kResidualInput = 9, kFusedInputs = 14;

bool fused_add(const edgert_node& node) { return node.domain && std::string(node.domain) == "edgert"; }

// Tactic ids: tiling index * 100 + slices (qconv_tilings(); ids 1..64: the 64x64 tiling).
constexpr int64_t kTilingStride = 100;

// "u8-conv-imma-64x32-split4-edgert": static storage, one name per id.
const char* tactic_name(int64_t id) {
  static const std::map<int64_t, std::string> names = [] {
    std::map<int64_t, std::string> made;
    for (size_t t = 0; t < qconv_tilings().size(); ++t)
      for (int splits = 1; splits <= 64; splits *= 2) {
        const QConvTiling& tiling = qconv_tilings()[t];
        made[static_cast<int64_t>(t) * kTilingStride + splits] =
            "u8-conv-imma-" + std::to_string(tiling.pixels) + "x" + std::to_string(tiling.filters) +
            (splits > 1 ? "-split" + std::to_string(splits) : "") + "-edgert";
      }
    return made;
  }();
  const auto it = names.find(id);
  return it == names.end() ? "u8-conv-imma-edgert" : it->second.c_str();
}

// Weight zero points: absent, or all 0 (symmetric weights); unknown values pass (prepare checks).
bool symmetric_weights(const edgert_node* node, const edgert_tensor* in) {
  if (!optional_present(node, in, 5)) return true;
  const edgert_tensor& z = in[5];
  if (z.dtype != EDGERT_DTYPE_INT8) return false;
  if (!z.data) return true;
  const int8_t* values = static_cast<const int8_t*>(z.data);
  for (int64_t i = 0; i < numel(z); ++i)
    if (values[i] != 0) return false;
  return true;
}

int32_t supports_qconv(const edgert_node* node, const edgert_tensor* in) {
  if (node->num_inputs < 8) return 0;
  if (fused_add(*node) && (node->num_inputs != kFusedInputs || !is_present(in[kResidualInput]) ||
                           (in[kResidualInput].dtype != EDGERT_DTYPE_UNDEFINED &&
                            in[kResidualInput].dtype != EDGERT_DTYPE_UINT8)))
    return 0;
  const edgert_tensor &x = in[0], &w = in[3];
  if (x.dtype != EDGERT_DTYPE_UNDEFINED && x.dtype != EDGERT_DTYPE_UINT8) return 0;
  if (w.dtype != EDGERT_DTYPE_UNDEFINED && w.dtype != EDGERT_DTYPE_INT8) return 0;
  if ((x.rank >= 0 && x.rank != 4) || (w.rank >= 0 && w.rank != 4)) return 0;
  if (Attributes(node).get_int("group", 1) != 1) return 0;
  if (optional_present(node, in, 2) && in[2].dtype != EDGERT_DTYPE_UINT8) return 0;
  if (optional_present(node, in, 7) && in[7].dtype != EDGERT_DTYPE_UINT8) return 0;
  if (in[4].dtype != EDGERT_DTYPE_UNDEFINED && in[4].dtype != EDGERT_DTYPE_FLOAT32) return 0;
  if (optional_present(node, in, 8) && in[8].dtype != EDGERT_DTYPE_INT32) return 0;
  return symmetric_weights(node, in) ? 1 : 0;
}

QConvShape qconv_shape(const ConvGeometry& g, bool nhwc) {
  return {g.n, g.c, g.h, g.w, g.m, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.dilation_h,
          g.dilation_w, g.out_h, g.out_w, nhwc};
}

std::vector<TacticSpec> qconv_tactics(const edgert_node* node, const edgert_tensor* in) {
  std::vector<TacticSpec> tactics;
  try {
    const QConvShape shape = qconv_shape(conv_geometry(*node, in[0], in[3]), channels_last(*node));
    for (size_t t = 0; t < qconv_tilings().size(); ++t)
      for (int splits : qconv_splits(shape, qconv_tilings()[t])) {
        const int64_t id = static_cast<int64_t>(t) * kTilingStride + splits;
        tactics.push_back({id, tactic_name(id)});
      }
  } catch (const KernelError&) {
    tactics.push_back({1, tactic_name(1)});  // prepare says what is wrong with the node
  }
  return tactics;
}

// Device memory an op owns from prepare to its destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }
  void upload(const void* bytes, size_t size) {
    if (size > size_) {
      cudaFree(data_);
      data_ = nullptr;
      size_ = 0;
      check_cuda(cudaMalloc(&data_, size), "cudaMalloc (INT8 convolution multipliers)");
      size_ = size;
    }
    check_cuda(cudaMemcpy(data_, bytes, size, cudaMemcpyHostToDevice), "cudaMemcpy (INT8 convolution multipliers)");
  }
  const void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

class QLinearConvOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    if (node.num_inputs < 8) fail(EDGERT_ERR_INVALID_ARGUMENT, "needs at least 8 inputs, got %d", node.num_inputs);
    const edgert_tensor &x = in[0], &w = in[3];
    if (x.dtype != EDGERT_DTYPE_UINT8 || w.dtype != EDGERT_DTYPE_INT8)
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s and W %s; the GPU takes uint8 activations and int8 weights",
           edgert_dtype_name(x.dtype), edgert_dtype_name(w.dtype));
    const ConvGeometry g = conv_geometry(node, x, w);
    if (g.group != 1) fail(EDGERT_ERR_UNSUPPORTED, "group %lld: the GPU's INT8 convolution is dense (group 1)",
                           static_cast<long long>(g.group));
    shape_ = qconv_shape(g, channels_last(node));
    const int64_t scales = numel(in[4]);
    if (in[4].dtype != EDGERT_DTYPE_FLOAT32 || (scales != 1 && scales != g.m))
      fail(EDGERT_ERR_SHAPE, "w_scale is %s %s, expected float32 [1] or [%lld]", edgert_dtype_name(in[4].dtype),
           shape_string(shape_of(in[4])).c_str(), static_cast<long long>(g.m));
    if (!symmetric_weights(&node, in)) fail(EDGERT_ERR_UNSUPPORTED, "w_zero_point other than 0 (asymmetric weights)");
    // QLinearConv's multiplier per filter, x_scale * w_scale / y_scale in float as the CPU
    // reference computes it, uploaded once.
    const std::vector<double> w_scales = read_floats(in[4], "w_scale");
    const float x_scale = scalar_scale(in[1], "x_scale"), y_scale = scalar_scale(in[6], "y_scale");
    std::vector<float> multipliers(static_cast<size_t>(g.m));
    for (size_t f = 0; f < multipliers.size(); ++f)
      multipliers[f] = x_scale * static_cast<float>(w_scales[scales == 1 ? 0 : f]) / y_scale;
    multipliers_.upload(multipliers.data(), multipliers.size() * sizeof(float));
    has_bias_ = optional_present(&node, in, 8);  // absent: -1 / empty
    if (has_bias_ && (in[8].dtype != EDGERT_DTYPE_INT32 || numel(in[8]) != g.m))
      fail(EDGERT_ERR_SHAPE, "B is %s %s, expected int32 [%lld]", edgert_dtype_name(in[8].dtype),
           shape_string(shape_of(in[8])).c_str(), static_cast<long long>(g.m));
    const Shape y_shape = {g.n, g.m, g.out_h, g.out_w};
    set_output(out[0], EDGERT_DTYPE_UINT8, y_shape);
    add_ = QConvResidual();
    has_residual_ = fused_add(node);
    if (has_residual_) {
      if (node.num_inputs != kFusedInputs)
        fail(EDGERT_ERR_INVALID_ARGUMENT, "QLinearConvAdd needs %d inputs, got %d", kFusedInputs, node.num_inputs);
      const edgert_tensor& r = in[kResidualInput];
      if (r.dtype != EDGERT_DTYPE_UINT8 || shape_of(r) != y_shape)
        fail(EDGERT_ERR_SHAPE, "the residual is %s %s, expected uint8 %s", edgert_dtype_name(r.dtype),
             shape_string(shape_of(r)).c_str(), shape_string(y_shape).c_str());
      // QLinearAdd's multipliers, in float on the host as the CPU reference computes them.
      const float sum_scale = scalar_scale(in[12], "sum_scale");
      add_.conv_ratio = scalar_scale(in[6], "y_scale") / sum_scale;
      add_.residual_ratio = scalar_scale(in[10], "r_scale") / sum_scale;
      add_.residual_zero = uint8_zero_point(node, in, 11, "r_zero_point");
      add_.sum_zero = uint8_zero_point(node, in, 13, "sum_zero_point");
    }
    x_zero_ = uint8_zero_point(node, in, 2, "x_zero_point");
    y_zero_ = uint8_zero_point(node, in, 7, "y_zero_point");
    const int64_t id = tactic() <= 0 ? 1 : tactic();
    const size_t tiling = static_cast<size_t>(id / kTilingStride);
    splits_ = static_cast<int>(id % kTilingStride);
    if (tiling >= qconv_tilings().size() || splits_ < 1)
      fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld names no tiling and slices", static_cast<long long>(tactic()));
    tiling_ = qconv_tilings()[tiling];
    info.workspace_bytes = qconv_workspace_bytes(shape_, splits_);
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    QConvQuantization q{static_cast<const float*>(multipliers_.data()),
                        has_bias_ ? static_cast<const int32_t*>(in[8].data) : nullptr, x_zero_, y_zero_, add_};
    if (has_residual_) q.add.residual = static_cast<const uint8_t*>(in[kResidualInput].data);
    launch_qconv(static_cast<const uint8_t*>(in[0].data), static_cast<const int8_t*>(in[3].data),
                 static_cast<uint8_t*>(out[0].data), shape_, q, tiling_, splits_, workspace, stream);
  }

 private:
  QConvShape shape_{};
  int32_t x_zero_ = 0, y_zero_ = 0;
  bool has_bias_ = false, has_residual_ = false;
  DeviceBuffer multipliers_;
  QConvResidual add_;
  QConvTiling tiling_;
  int splits_ = 1;
};

}  // namespace

void register_qconv_kernels(KernelRegistry& r) {
  r.add<QLinearConvOp>("QLinearConv", "cuda-qlinear-conv", supports_qconv, qconv_tactics, kHostOperands);
  r.add_in_domain<QLinearConvOp>("edgert", "QLinearConvAdd", "cuda-qlinear-conv-add", supports_qconv, qconv_tactics,
                                 kHostOperands);
}

}  // namespace edgert::cuda
