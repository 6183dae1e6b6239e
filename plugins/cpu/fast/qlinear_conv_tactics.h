// Optimized tactics of QLinearConv for u8 activations, s8 symmetric weights (every w_zero_point
// 0, w_scale per tensor or per output channel), u8 output, optional int32 B, NCHW 2-D:
//   u8s8-qconv-1x1-gemm-12x32-avx512vnni     1x1, stride 1, no pad: the NCHW qgemm packing the
//                                             image's rows (gemm/qgemm.h)
//   u8s8-qconv-1x1-gemm-12x3-avx2            the same with qgemm's AVX2 family (x86-64-v3)
//   u8s8-qconv-1x1-gemm-12x8-dotprod         ... its aarch64 sdot family (ARMv8.2 dotprod)
//   u8s8-qconv-1x1-gemm-12x8-neon            ... its ARMv8.0 NEON family
//   u8s8-qconv-1x1-gemv-16-avx512vnni        1x1, stride 1, no pad, group 1, at most 4 output
//                                             pixels (squeeze-and-excitation): gemm/qgemv.h
//   u8s8-qconv-im2col-gemm-12x32-avx512vnni  any other dense or grouped conv (groups looped):
//                                             im2col while packing, padding read as x_zero_point
//   u8s8-qconv-im2col-gemm-12x3-avx2,        the same with the AVX2, dot product and NEON
//   u8s8-qconv-im2col-gemm-12x8-dotprod,     families of qgemm
//   u8s8-qconv-im2col-gemm-12x8-neon
//   u8s8-qconv-dw-direct-16-avx512           depthwise (group == C == M), up to 7x7, stride 1/2
//   u8s8-qconv-dw-direct-8-avx2,             the same on vectors of 8 (AVX2, FMA) and of 4
//   u8s8-qconv-dw-direct-4-neon              (NEON)
//   u8s8-qconv-dw-vnni-16-avx512vbmi         depthwise, stride_w 1/2: integer sums (vpermb +
//                                             vpdpbusd) straight from the plane, no float scratch
//   u8s8-qconv-shifted-gemm-12x32-avx512vnni dense (group 1) k x k, stride 1 or 2, any pads and
//                                             dilation: taps read as shifts of the packed padded
//                                             image or its stride phases (fast/qconv_shifted.h)
// Every one is bit-exact with the reference (tactic 0, quantize.cpp): sums are exact integers and
// the requantisation rounds as it does. Weights are packed in prepare and owned here; execute
// allocates nothing (multipliers and folded biases live in the workspace).
#pragma once

#include <vector>

#include "fast/qconv_shifted.h"
#include "fast/qdepthwise.h"
#include "gemm/qgemm.h"
#include "gemm/qgemv.h"
#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {

// The tactics worth timing for a QLinearConv node on this CPU, best guess first (none unless the
// weights and their zero points are constants of the types above).
std::vector<TacticSpec> qlinear_conv_tactics(const edgert_node* node, const edgert_tensor* inputs);

class FastQLinearConv {
 public:
  // Prepares `tactic` for QLinearConv's inputs (W and w_zero_point with data). False when the
  // tactic does not apply to this node (the caller then runs the reference). Sizes
  // info.workspace_bytes. W is copied (packed): it is not referenced after prepare; a later
  // prepare with another W pointer packs again. The GEMM tactics' panels and the integer
  // depthwise's weights are recorded for export_prepared, and borrowed from the engine's stored
  // state when the current prepare has it (prepared_state.h): W's values are then not read.
  bool prepare(int64_t tactic, const edgert_node& node, const WindowGeometry& g, int64_t group,
               const edgert_tensor* inputs, edgert_prepare_info& info);
  // Y from QLinearConv's inputs (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
  // y_zero_point, B or null).
  void execute(const edgert_tensor* inputs, const int32_t* bias, uint8_t* y, void* workspace) const;
  size_t state_bytes() const;
  // After prepare: whether execute reads the weights only as packed (every tactic but the float
  // depthwise, whose copy of W is not stored), never W itself (Op::inputs_replaced).
  bool reads_only_packed_weights() const { return algorithm_ != Algorithm::Depthwise; }

 private:
  enum class Algorithm { Gemm1x1, Im2colGemm, Depthwise, ShiftedGemm, DepthwiseVnni, Gemv1x1 };
  qdepthwise::Geometry depthwise_geometry() const {
    return {in_h_, in_w_, out_h_, out_w_, kernel_h_, kernel_w_, stride_h_, stride_w_, dilation_h_, dilation_w_,
            pad_top_, pad_left_};
  }
  void execute_shifted(const uint8_t* x, int32_t x_zero, const int32_t* bias, const float* multiplier,
                       int32_t y_zero, uint8_t* y, int32_t* row_bias, uint8_t* image) const;

  Algorithm algorithm_ = Algorithm::Im2colGemm;
  gemm::QgemmIsa gemm_isa_ = gemm::QgemmIsa::Reference;  // the qgemm family of Gemm1x1 and Im2colGemm
  std::vector<gemm::PackedQRows> packed_;  // one per group
  std::vector<float> depthwise_weights_;   // [C][taps], exact as floats
  qdepthwise::Plan depthwise_plan_;
  qdepthwise::ChannelFn depthwise_channel_ = nullptr;  // the Depthwise tactic's instruction set
  qshifted::Plan shifted_plan_;
  gemm::PackedQColumns gemv_columns_;
  qdepthwise::VnniPlan vnni_plan_;
  std::vector<int32_t> vnni_weights_;     // [C][kernel_h][chunks]
  std::vector<int32_t> vnni_weight_sums_;  // [C]
  const int32_t* vnni_weights_stored_ = nullptr;  // borrowed from the engine's stored state
  const int32_t* vnni_sums_stored_ = nullptr;
  const void* packed_from_ = nullptr;
  int64_t packed_tactic_ = -1;
  int threads_ = 1;
  size_t per_thread_bytes_ = 0;
  int64_t batch_ = 0, channels_ = 0, out_channels_ = 0, group_ = 1;
  int64_t in_h_ = 1, in_w_ = 1, out_h_ = 1, out_w_ = 1;
  int64_t kernel_h_ = 1, kernel_w_ = 1, stride_h_ = 1, stride_w_ = 1, dilation_h_ = 1, dilation_w_ = 1;
  int64_t pad_top_ = 0, pad_left_ = 0;
};

}  // namespace edgert::cpu
