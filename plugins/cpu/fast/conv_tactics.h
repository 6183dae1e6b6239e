// Optimized float32 tactics of Conv and edgert.FusedConv (1-D and 2-D, any group):
//   f32-conv-1x1-gemm-6x16-*     1x1, stride 1, no pad: packed GEMM straight on NCHW
//   f32-conv-1x1-gemm-8x32-inplace-avx512  the same with the image's rows read in place, unpacked
//   f32-conv-1x1-gemm-48x7-inplace-avx512  the tall tile (below) the same way
//   f32-conv-1x1-gemv-16-*       the same on a 1x1 image (squeeze-and-excitation): packed GEMV
//   f32-conv-im2col-gemm-6x16-*  any other dense or grouped conv: GEMM, im2col done while packing
//   f32-conv-*-gemm-48x7-avx512  these and the Winograd tactics on images of fewer than 1024
//                                pixels, with the tall tile (output channels in the lanes: no
//                                columns rounded up to 32); wino23 also with 48x8 (16 tiles)
//   f32-conv-dw-direct-*         depthwise (group == C == M): direct rows, vectorized
//   f32-conv-direct-8x16-avx512  few input channels (stems), 3x3/5x5/7x7: direct, over the input
//                                split into its column phases (fast/conv_direct.h)
//   f32-conv-wino23-gemm-*       dense 3x3 stride 1: Winograd F(2x2, 3x3) over the packed GEMM
//   f32-conv-onednn-*            oneDNN's implementation (fast/conv_onednn.h), when built with it
//   bf16-conv-{1x1,im2col}-gemm-8x32-avx512bf16  the GEMMs with bfloat16 products and float32
//                                sums, listed only for a node the build allowed bfloat16 (--bf16)
//   f16-conv-{1x1,im2col}-gemm-8x16-fp16  the same with float16 (--fp16, Armv8.2 cores)
//   f32-conv-1x1-dw-banded-*     a FusedConv's pre-convolution (1x1) and its depthwise one, in
//                                bands of rows (fast/conv_expand_depthwise.h)
// The kernel's epilogue (bias, residual Z, activation) is fused in every tactic. Weights are
// packed in prepare and owned by the FastConv; nothing is allocated in execute.
#pragma once

#include <vector>

#include "activation.h"
#include "fast/conv_direct.h"
#include "fast/conv_onednn.h"
#include "fast/conv_winograd.h"
#include "fast/depthwise.h"
#include "gemm/gemv.h"
#include "gemm/sgemm.h"
#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {

// The tactics worth timing for a Conv/FusedConv node, best guess first (float32 with constant
// weights only; otherwise none, and the reference runs).
std::vector<TacticSpec> conv_tactics(const edgert_node* node, const edgert_tensor* inputs);
// Whether `tactic` is one of the banded 1x1 + depthwise tactics of a FusedConv with a
// pre-convolution (f32-conv-1x1-dw-banded-*, fast/conv_expand_depthwise.h), and its ISA.
bool expand_depthwise_tactic(int64_t tactic, gemm::Isa* isa);

class FastConv {
 public:
  // Prepares `tactic` for X and W (W's data must be set); `residual`: execute will get a Z
  // (which may alias Y). Returns false when the tactic does not apply to this node (the caller
  // then runs the reference). Sizes info.workspace_bytes.
  // `channel_scaled`: execute will get a channel scale (FusedConv's input S); only the 1x1 GEMM
  // tactics take one (it is applied while packing B), the others then return false.
  // `activation`: the one execute will get (the oneDNN tactic builds it into its primitive).
  bool prepare(int64_t tactic, const WindowGeometry& g, int64_t group, const edgert_tensor& x,
               const edgert_tensor& w, bool residual, edgert_prepare_info& info, bool channel_scaled = false,
               const Activation& activation = Activation{});
  // After prepare: makes execute also max-pool the result (a FusedConv's trailing pool, its
  // geometry over the convolution's output) without writing the convolution's output whole, and
  // sizes info.workspace_bytes for that. False when this tactic cannot (the caller then pools
  // the whole output itself); only the stem's direct convolution can, band by band.
  bool prepare_pool(const WindowGeometry& pool, edgert_prepare_info& info);
  // Weights packed or transformed in prepare that this object holds (Op::state_bytes).
  size_t state_bytes() const;
  // After prepare: whether execute reads the weights only as packed or transformed (the GEMM,
  // GEMV and Winograd algorithms), never W itself (Op::inputs_replaced).
  bool reads_only_packed_weights() const {
    return algorithm_ == Algorithm::Gemm1x1 || algorithm_ == Algorithm::Im2colGemm ||
           algorithm_ == Algorithm::Winograd || algorithm_ == Algorithm::Gemv;
  }
  // y = act(conv(x, W) + bias + z); bias and z may be null; z may alias y. After prepare_pool,
  // y = maxpool(act(conv(x, W) + bias)) (no z). With channel_scale ([N, C], prepared with
  // channel_scaled), x[n, c] is multiplied by channel_scale[n C + c] first.
  void execute(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
               void* workspace, const float* channel_scale = nullptr) const;

 private:
  enum class Algorithm { Gemm1x1, Gemv, Im2colGemm, Depthwise, Winograd, Direct, OneDnn };
  depthwise::Geometry depthwise_geometry() const {
    return {in_h_, in_w_, out_h_, out_w_, kernel_h_, kernel_w_, stride_h_, stride_w_, dilation_h_, dilation_w_,
            pad_top_, pad_left_};
  }
  void execute_gemv(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
                    float* sums) const;

  Algorithm algorithm_ = Algorithm::Im2colGemm;
  gemm::Isa isa_ = gemm::Isa::Portable;
  depthwise::ChannelFn depthwise_channel_ = nullptr;
  bool depthwise_pairs_ = false;  // two channels at a time (depthwise::channel_pair_avx512)
  bool in_place_ = false;         // the 1x1 GEMM reads B where it lies (gemm::BSource::in_place)
  std::vector<gemm::PackedA> packed_;  // one per group
  std::vector<float> depthwise_weights_;
  gemm::PackedPanels gemv_panels_;
  std::vector<float> direct_weights_;
  DirectConvShape direct_shape_;
  DirectConvPool direct_pool_;
  bool pooled_ = false;
  gemm::GemvPanelsFn gemv_ = nullptr;
  const void* packed_from_ = nullptr;
  int64_t packed_tactic_ = -1;
  bool packed_one_block_ = false;
  int threads_ = 1;
  int64_t scratch_floats_ = 0;  // depthwise: per task
  WinogradConv winograd_;
  OneDnnConv onednn_;
  std::vector<float> onednn_zero_bias_;
  std::vector<int64_t> winograd_key_;
  int64_t batch_ = 0, channels_ = 0, out_channels_ = 0, group_ = 1;
  int64_t in_h_ = 1, in_w_ = 1, out_h_ = 1, out_w_ = 1;
  int64_t kernel_h_ = 1, kernel_w_ = 1, stride_h_ = 1, stride_w_ = 1, dilation_h_ = 1, dilation_w_ = 1;
  int64_t pad_top_ = 0, pad_left_ = 0;
};

}  // namespace edgert::cpu
