// Convolutions on the GPU: Conv and edgert.FusedConv (bias, activation, residual: the builder's
// activation fusion). Grouped and dense convolutions go to cuDNN's convolution forward, one
// tactic per cuDNN algorithm, timed by the builder; bias + ReLU (+ residual) ride in cuDNN's
// fused bias-activation call, other epilogues in one kernel of our own after it. Dense
// convolutions also have our own split-reduction implicit GEMM (conv_gemm.h), one tactic per
// number of slices, which keeps the GPU busy where batch 1 leaves cuDNN's tiles few. Depthwise
// convolutions (group == C_in == C_out) run our own kernel (depthwise.cu), which fuses every
// epilogue: cuDNN's depthwise paths are slow at batch 1.
//
// Layout: with the node attribute layout = "NHWC" the activations are channels-last and the
// weights [M, KH, KW, C/group] (cuDNN's KRSC; the builder's layout pass writes them so), except
// depthwise weights, which stay [C, 1, KH, KW].
#include <algorithm>
#include <array>

#include "activation.cuh"
#include "conv_gemm.h"
#include "conv_geometry.h"
#include "cuda_op.h"
#include "depthwise.h"
#include "epilogue.h"
#include "handles.h"
#include "lt_gemm.h"

namespace edgert::cuda {
namespace {

// Tactic ids: 0 is the depthwise kernel; cuDNN algorithm a is tactic a + 1; a channels-last 1x1
// convolution is also the product [N*H*W, C] x [M, C]^T, and kGemmTactic + i runs it as
// cuBLASLt's heuristic algorithm i (bias, ReLU and the residual in its epilogue);
// kSplitTactic + s is our implicit GEMM with s reduction slices.
constexpr int64_t kDepthwiseTactic = 0;
constexpr int64_t kGemmTactic = 100;
constexpr int kGemmTacticsListed = 4;
constexpr int64_t kSplitTactic = 200;
constexpr int64_t kSplitTacticEnd = 300;

const char* split_tactic_name(int splits) {
  switch (splits) {
    case 1: return "conv-implicit-gemm-edgert";
    case 2: return "conv-implicit-gemm-split2-edgert";
    case 4: return "conv-implicit-gemm-split4-edgert";
    case 8: return "conv-implicit-gemm-split8-edgert";
    case 16: return "conv-implicit-gemm-split16-edgert";
    case 32: return "conv-implicit-gemm-split32-edgert";
    default: return "conv-implicit-gemm-split64-edgert";
  }
}
int64_t tactic_of(cudnnConvolutionFwdAlgo_t algo) { return static_cast<int64_t>(algo) + 1; }


// What FusedConv adds that this plugin does not run: a fused max pool, a channel scale or a
// pre-convolution (the CPU-only fusions). The builder does not make them for GPU nodes.
bool has_cpu_only_fusion(const edgert_node* node) {
  Attributes attrs(node);
  return attrs.has("pool_kernel_shape") || node->num_inputs > 4;
}

bool is_fused(const edgert_node* node) { return node->domain && std::string(node->domain) == "edgert"; }


// A channels-last 1x1 convolution, stride 1, no padding, one group: one product.
bool pointwise_product(const edgert_node& node, const edgert_tensor* in) {
  if (!channels_last(node) || in[0].rank != 4 || in[1].rank != 4) return false;
  Attributes attrs(&node);
  auto all = [&](const char* name, int64_t value) {
    for (int64_t v : attrs.get_ints(name, {})) if (v != value) return false;
    return true;
  };
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  return attrs.get_int("group", 1) == 1 && in[1].dims[1] == 1 && in[1].dims[2] == 1 && all("strides", 1) &&
         all("pads", 0) && (auto_pad == "NOTSET" || auto_pad == "VALID");
}

ConvGemmShape conv_gemm_shape(const ConvGeometry& g, bool nhwc) {
  return {g.n, g.c, g.h, g.w, g.m, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.dilation_h, g.dilation_w,
          g.out_h, g.out_w, nhwc};
}

int32_t supports_conv(const edgert_node* node, const edgert_tensor* in) {
  if (has_cpu_only_fusion(node)) return 0;
  const edgert_tensor &x = in[0], &w = in[1];
  if (x.dtype != EDGERT_DTYPE_UNDEFINED && !is_float(x.dtype)) return 0;
  if (w.dtype != EDGERT_DTYPE_UNDEFINED && !is_float(w.dtype)) return 0;
  if ((x.rank >= 0 && x.rank != 4) || (w.rank >= 0 && w.rank != 4)) return 0;
  if (is_fused(node)) {
    try {
      Activation::from_node(*node);
    } catch (const KernelError&) {
      return 0;
    }
  }
  return 1;
}

std::vector<TacticSpec> conv_tactics(const edgert_node* node, const edgert_tensor* in) {
  Attributes attrs(node);
  const int64_t group = attrs.get_int("group", 1);
  const bool depthwise = group > 1 && in[0].rank == 4 && in[1].rank == 4 && in[0].dims[1] == group &&
                         in[1].dims[0] == group;
  if (depthwise) return {{kDepthwiseTactic, "conv-depthwise-direct-cuda"}};
  std::vector<TacticSpec> tactics;
  if (pointwise_product(*node, in))
    for (int i = 0; i < kGemmTacticsListed; ++i) tactics.push_back({kGemmTactic + i, kLtConvTacticNames[i]});
  // Implicit-precomputed GEMM first: cuDNN's usual best at batch 1, and the only algorithm its
  // fused bias-activation call takes without an activation.
  std::vector<TacticSpec> cudnn = {{tactic_of(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM), "conv-implicit-precomp-gemm-cudnn"},
          {tactic_of(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM), "conv-implicit-gemm-cudnn"},
          {tactic_of(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED), "conv-winograd-nonfused-cudnn"},
          {tactic_of(CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING), "conv-fft-tiling-cudnn"},
          {tactic_of(CUDNN_CONVOLUTION_FWD_ALGO_GEMM), "conv-gemm-cudnn"}};
  tactics.insert(tactics.end(), cudnn.begin(), cudnn.end());
  bool known = in[0].rank == 4 && in[1].rank == 4;
  for (int i = 0; known && i < 2; ++i)
    for (int32_t d = 0; d < 4; ++d) known = known && in[i].dims[d] >= 0;
  if (group == 1 && known) {
    try {
      const ConvGemmShape shape = conv_gemm_shape(conv_geometry(*node, in[0], in[1]), channels_last(*node));
      for (int splits : conv_gemm_splits(shape)) tactics.push_back({kSplitTactic + splits, split_tactic_name(splits)});
    } catch (const KernelError&) {
      // A geometry prepare will refuse: no tactics of ours for it.
    }
  }
  return tactics;
}

cudnnDataType_t cudnn_type(edgert_dtype dtype) {
  return dtype == EDGERT_DTYPE_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

// RAII for the four descriptors of one convolution.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;
  Descriptors() {
    check_cudnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&bias), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check_cudnn(cudnnCreateActivationDescriptor(&activation), "cudnnCreateActivationDescriptor");
  }
  ~Descriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyActivationDescriptor(activation);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

class ConvOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info& info) override {
    const edgert_tensor &x = in[0], &w = in[1];
    if (!is_float(x.dtype) || w.dtype != x.dtype)
      fail(EDGERT_ERR_UNSUPPORTED, "X is %s and W %s; the GPU convolution takes float32 or float16, both alike",
           edgert_dtype_name(x.dtype), edgert_dtype_name(w.dtype));
    g_ = conv_geometry(node, in[0], in[1]);
    gemm_.reset();
    splits_ = 0;
    dtype_ = x.dtype;
    nhwc_ = channels_last(node);
    has_bias_ = node.num_inputs > 2 && is_present(in[2]);
    has_residual_ = is_fused(&node) && node.num_inputs > 3 && is_present(in[3]);
    if (has_bias_ && (in[2].dtype != dtype_ || numel(in[2]) != g_.m))
      fail(EDGERT_ERR_SHAPE, "B is %s %s, expected %s [%lld]", edgert_dtype_name(in[2].dtype),
           shape_string(shape_of(in[2])).c_str(), edgert_dtype_name(dtype_), static_cast<long long>(g_.m));
    activation_ = is_fused(&node) ? Activation::from_node(node) : Activation{};
    const Shape y_shape = {g_.n, g_.m, g_.out_h, g_.out_w};
    if (has_residual_ && (in[3].dtype != dtype_ || shape_of(in[3]) != y_shape))
      fail(EDGERT_ERR_SHAPE, "the residual is %s %s, expected the output's %s", edgert_dtype_name(in[3].dtype),
           shape_string(shape_of(in[3])).c_str(), shape_string(y_shape).c_str());
    set_output(out[0], dtype_, y_shape);
    if (g_.depthwise()) {
      if (tactic() != kDepthwiseTactic) fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld is not the depthwise kernel", static_cast<long long>(tactic()));
      return;
    }
    if (tactic() >= kSplitTactic && tactic() < kSplitTacticEnd) {
      if (g_.group != 1)
        fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld runs dense convolutions only (group 1)", static_cast<long long>(tactic()));
      split_shape_ = conv_gemm_shape(g_, nhwc_);
      splits_ = static_cast<int>(tactic() - kSplitTactic);
      info.workspace_bytes = conv_gemm_workspace_bytes(split_shape_, splits_);
      return;
    }
    if (tactic() >= kGemmTactic) {
      if (!pointwise_product(node, in))
        fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld runs channels-last 1x1 convolutions only", static_cast<long long>(tactic()));
      GemmShape s;
      s.m = g_.n * g_.h * g_.w;
      s.k = g_.c;
      s.n = g_.m;
      s.trans_b = true;  // weights [M, 1, 1, C]: B' = W^T
      s.out = y_shape;
      const cublasLtEpilogue_t epilogue =
          activation_.kind == ActivationKind::Relu ? (has_bias_ ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                                   : (has_bias_ ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
      gemm_ = std::make_unique<LtPlan>();
      gemm_->build(s, dtype_, epilogue, allows_tf32(node));
      gemm_index_ = static_cast<int>(tactic() - kGemmTactic);
      if (gemm_index_ >= gemm_->algorithms())
        fail(EDGERT_ERR_UNSUPPORTED, "cuBLASLt proposes %d algorithms for this convolution; no algorithm %d",
             gemm_->algorithms(), gemm_index_);
      info.workspace_bytes = kLtWorkspaceBytes;
      return;
    }
    if (tactic() < 0 || tactic() > CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
      fail(EDGERT_ERR_UNSUPPORTED, "tactic %lld names no cuDNN algorithm", static_cast<long long>(tactic()));
    // Tactic 0 (untuned, as in shape inference) is the first listed: implicit-precomputed GEMM.
    algo_ = tactic() == 0 ? CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
                          : static_cast<cudnnConvolutionFwdAlgo_t>(tactic() - 1);
    describe(node);
    size_t bytes = 0;
    check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(cudnn_handle(), d_.x, d_.w, d_.conv, d_.y, algo_, &bytes),
                "cuDNN has no such algorithm for this convolution");
    info.workspace_bytes = bytes;
    // cuDNN fuses bias + ReLU (+ residual) into the convolution; without an activation only for
    // the implicit-precomputed GEMM algorithm (cudnnConvolutionBiasActivationForward's rule).
    fused_epilogue_ = has_bias_ && (activation_.kind == ActivationKind::Relu ||
                                    (activation_.kind == ActivationKind::None &&
                                     algo_ == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM));
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void* workspace,
               cudaStream_t stream) override {
    const void* bias = has_bias_ ? in[2].data : nullptr;
    const void* residual = has_residual_ ? in[3].data : nullptr;
    if (g_.depthwise()) {
      DepthwiseShape s{g_.n, g_.c, g_.h, g_.w, g_.kh, g_.kw, g_.stride_h, g_.stride_w, g_.pad_top, g_.pad_left,
                       g_.dilation_h, g_.dilation_w, g_.out_h, g_.out_w, nhwc_};
      launch_depthwise(in[0].data, in[1].data, bias, residual, out[0].data, dtype_, s, activation_, stream);
      return;
    }
    if (splits_ > 0) {
      launch_conv_gemm(in[0].data, in[1].data, bias, residual, out[0].data, dtype_, split_shape_, splits_, activation_,
                       workspace, stream);
      return;
    }
    if (gemm_) {
      // Y = X W^T + residual (beta 1; in place when the plan put Y over it), bias and ReLU in
      // the epilogue, any other activation after.
      gemm_->run(gemm_index_, 1.0f, in[0].data, in[1].data, residual ? 1.0f : 0.0f, residual, out[0].data, bias,
                 workspace, stream);
      if (activation_.kind != ActivationKind::None && activation_.kind != ActivationKind::Relu)
        launch_bias_activation(out[0].data, nullptr, nullptr, dtype_, g_.n * g_.out_h * g_.out_w, g_.m, 1, true,
                               activation_, stream);
      return;
    }
    cudnnHandle_t handle = cudnn_handle();
    check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
    const float one = 1.0f, zero = 0.0f;
    if (fused_epilogue_) {
      // y = act(conv(x) + alpha2 * z + bias), z = the residual (or y itself, weighted 0).
      const float alpha2 = residual ? 1.0f : 0.0f;
      check_cudnn(cudnnConvolutionBiasActivationForward(
                      handle, &one, d_.x, in[0].data, d_.w, in[1].data, d_.conv, algo_, workspace, workspace_bytes_,
                      &alpha2, d_.y, residual ? residual : out[0].data, d_.bias, bias, d_.activation, d_.y, out[0].data),
                  "cudnnConvolutionBiasActivationForward");
      return;
    }
    // The memory plan may put the output over the residual (in place): the convolution then
    // adds into it (beta 1) and the epilogue adds no residual again.
    const bool residual_in_y = residual && residual == out[0].data;
    check_cudnn(cudnnConvolutionForward(handle, &one, d_.x, in[0].data, d_.w, in[1].data, d_.conv, algo_, workspace,
                                        workspace_bytes_, residual_in_y ? &one : &zero, d_.y, out[0].data),
                "cudnnConvolutionForward");
    if (residual_in_y) residual = nullptr;
    if (bias || residual || activation_.kind != ActivationKind::None)
      launch_bias_activation(out[0].data, bias, residual, dtype_, g_.n, g_.m, g_.out_h * g_.out_w, nhwc_, activation_,
                             stream);
  }

 private:
  void describe(const edgert_node& node) {
    const cudnnDataType_t type = cudnn_type(dtype_);
    const cudnnTensorFormat_t format = nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    check_cudnn(cudnnSetTensor4dDescriptor(d_.x, format, type, i(g_.n), i(g_.c), i(g_.h), i(g_.w)), "X descriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(d_.y, format, type, i(g_.n), i(g_.m), i(g_.out_h), i(g_.out_w)),
                "Y descriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(d_.bias, CUDNN_TENSOR_NCHW, type, 1, i(g_.m), 1, 1), "bias descriptor");
    check_cudnn(cudnnSetFilter4dDescriptor(d_.w, type, format, i(g_.m), i(g_.c / g_.group), i(g_.kh), i(g_.kw)),
                "W descriptor");
    if (g_.pad_top != g_.pad_bottom || g_.pad_left != g_.pad_right)
      fail(EDGERT_ERR_UNSUPPORTED, "asymmetric pads (%lld, %lld, %lld, %lld): cuDNN pads both sides alike",
           static_cast<long long>(g_.pad_top), static_cast<long long>(g_.pad_left),
           static_cast<long long>(g_.pad_bottom), static_cast<long long>(g_.pad_right));
    // Accumulate in float for both types (cuDNN's pseudo-half configuration for float16).
    check_cudnn(cudnnSetConvolution2dDescriptor(d_.conv, i(g_.pad_top), i(g_.pad_left), i(g_.stride_h),
                                                i(g_.stride_w), i(g_.dilation_h), i(g_.dilation_w),
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "convolution descriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(d_.conv, i(g_.group)), "cudnnSetConvolutionGroupCount");
    // float16 on tensor cores; float32 stays float32 (no TF32) unless the build allowed it.
    const cudnnMathType_t math = dtype_ == EDGERT_DTYPE_FLOAT16 ? CUDNN_TENSOR_OP_MATH
                                 : allows_tf32(node)            ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                                : CUDNN_FMA_MATH;
    check_cudnn(cudnnSetConvolutionMathType(d_.conv, math), "cudnnSetConvolutionMathType");
    const cudnnActivationMode_t mode =
        activation_.kind == ActivationKind::Relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
    check_cudnn(cudnnSetActivationDescriptor(d_.activation, mode, CUDNN_PROPAGATE_NAN, 0.0), "activation descriptor");
    workspace_bytes_ = 0;
    check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(cudnn_handle(), d_.x, d_.w, d_.conv, d_.y, algo_,
                                                        &workspace_bytes_),
                "cuDNN has no such algorithm for this convolution");
  }

  ConvGeometry g_;
  edgert_dtype dtype_ = EDGERT_DTYPE_FLOAT32;
  bool nhwc_ = false, has_bias_ = false, has_residual_ = false, fused_epilogue_ = false;
  Activation activation_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t workspace_bytes_ = 0;
  Descriptors d_;
  std::unique_ptr<LtPlan> gemm_;  // the 1x1 convolution as a product, when the tactic says so
  int gemm_index_ = 0;
  int splits_ = 0;  // > 0: our implicit GEMM with this many reduction slices
  ConvGemmShape split_shape_{};
};

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add<ConvOp>("Conv", "cuda-conv", supports_conv, conv_tactics);
  r.add_in_domain<ConvOp>("edgert", "FusedConv", "cuda-fused-conv", supports_conv, conv_tactics);
}

}  // namespace edgert::cuda
