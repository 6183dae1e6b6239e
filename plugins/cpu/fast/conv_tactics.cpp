#include "fast/conv_tactics.h"

#include <algorithm>
#include <cstring>

#include "fast/conv_onednn.h"
#include "fast/depthwise.h"
#include "fast/pool_rows.h"
#include "thread_pool.h"

namespace edgert::cpu {

namespace {

// Stable ids: engines and timing caches store them. Never renumber; add new ones.
enum ConvTactic : int64_t {
  kConv1x1Portable = 10,
  kConv1x1Avx2 = 11,
  kConv1x1Neon = 12,
  kConv1x1Avx512 = 13,
  kConv1x1Avx512Tall = 14,
  kConv1x1Avx512InPlace = 15,  // the 8x32 tile reading the image's rows in place (no packed B)
  kConv1x1Avx512TallInPlace = 16,  // the 48x7 tile the same way
  kConv1x1Avx512Bf16 = 17,  // the 8x32 tile with bfloat16 products (allow_bf16 only)
  kConv1x1NeonFp16 = 18,    // the 8x16 tile with float16 products and sums (allow_fp16 only)
  kConvIm2colPortable = 20,
  kConvIm2colAvx2 = 21,
  kConvIm2colNeon = 22,
  kConvIm2colAvx512 = 23,
  kConvIm2colAvx512Tall = 24,
  kConvIm2colAvx512Bf16 = 25,
  kConvIm2colNeonFp16 = 26,
  kConvDepthwisePortable = 30,
  kConvDepthwiseAvx2 = 31,
  kConvDepthwiseAvx512 = 32,
  kConvWinogradPortable = 80,
  kConvWinogradAvx2 = 81,
  kConvWinogradNeon = 82,
  kConvWinogradAvx512 = 83,
  kConvWinograd43Portable = 84,
  kConvWinograd43Avx2 = 85,
  kConvWinograd43Neon = 86,
  kConvWinograd43Avx512 = 87,
  kConvWinogradAvx512Tall = 88,    // F(2x2, 3x3) with the 48x7 tile
  kConvWinograd43Avx512Tall = 89,  // F(4x4, 3x3) with the 48x7 tile
  kConvWinogradAvx512Tall8 = 90,   // F(2x2, 3x3) with the 48x8 tile
  kConvGemvPortable = 100,
  kConvGemvAvx2 = 101,
  kConvGemvAvx512 = 103,
  kConvDirectAvx512 = 113,
  kConvExpandDepthwisePortable = 120,  // FusedConv with a pre-convolution (inputs 5, 6), banded
  kConvExpandDepthwiseAvx2 = 121,
  kConvExpandDepthwiseNeon = 122,
  kConvExpandDepthwiseAvx512 = 123,
  kConvOneDnnAvx2 = 131,  // oneDNN's choice (fast/conv_onednn.h), named by the best ISA here
  kConvOneDnnAvx512 = 133,
};

struct ConvShape {
  WindowGeometry g;
  int64_t group = 1, channels = 0, out_channels = 0;
  bool ok = false;
};

ConvShape conv_shape(const edgert_node& node, const edgert_tensor& x, const edgert_tensor& w) {
  ConvShape s;
  if (x.rank != w.rank || (x.rank != 3 && x.rank != 4)) return s;
  s.group = Attributes(&node).get_int("group", 1);
  Shape out_shape;
  s.g = conv_shapes(node, x, w, s.group, out_shape);
  s.channels = x.dims[1];
  s.out_channels = w.dims[0];
  s.ok = true;
  return s;
}

bool is_depthwise(const ConvShape& s) { return s.group > 1 && s.group == s.channels && s.group == s.out_channels; }

bool is_winograd_3x3(const ConvShape& s) {
  const WindowGeometry& g = s.g;
  return s.group == 1 && g.rank == 2 && g.kernel[0] == 3 && g.kernel[1] == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
         g.dilation[0] == 1 && g.dilation[1] == 1;
}

bool is_pointwise(const WindowGeometry& g) {
  for (int i = 0; i < g.rank; ++i)
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0) return false;
  return true;
}

// A 1x1 convolution of a 1x1 image (squeeze-and-excitation layers): a matrix-vector product,
// which a GEMM tile 32 columns wide would compute with 1 useful column.
bool is_pointwise_vector(const ConvShape& s) {
  if (s.group != 1 || !is_pointwise(s.g)) return false;
  for (int i = 0; i < s.g.rank; ++i)
    if (s.g.out[i] != 1) return false;
  return true;
}

// The offset of a GEMM-based tactic id in its family (the last digit, mostly) names its
// micro-kernel. Every variant this CPU runs is listed, the widest first: the builder drops those
// the target board lacks (by the ISA at the end of the name) and times the rest.
gemm::Isa isa_of(int64_t tactic) {
  // F(4x4, 3x3) came after the decades were taken: its family starts at 84, and the tall-tile
  // Winograd tactics at 88.
  if (tactic == kConvWinogradAvx512Tall || tactic == kConvWinograd43Avx512Tall) return gemm::Isa::Avx512Tall;
  if (tactic == kConvWinogradAvx512Tall8) return gemm::Isa::Avx512Tall8;
  if (tactic == kConv1x1Avx512InPlace) return gemm::Isa::Avx512;
  if (tactic == kConv1x1Avx512TallInPlace) return gemm::Isa::Avx512Tall;
  if (tactic == kConv1x1Avx512Bf16 || tactic == kConvIm2colAvx512Bf16) return gemm::Isa::Avx512Bf16;
  if (tactic == kConv1x1NeonFp16 || tactic == kConvIm2colNeonFp16) return gemm::Isa::NeonFp16;
  const bool wino43 = tactic >= kConvWinograd43Portable && tactic <= kConvWinograd43Avx512;
  switch (wino43 ? tactic - kConvWinograd43Portable : tactic % 10) {
    case 1: return gemm::Isa::Avx2Fma;
    case 2: return gemm::Isa::Neon;
    case 3: return gemm::Isa::Avx512;
    case 4: return gemm::Isa::Avx512Tall;
    default: return gemm::Isa::Portable;
  }
}

void add_gemm_tactics(std::vector<TacticSpec>& out, int64_t first_id, const char* avx512_name, const char* avx2_name,
                      const char* neon_name, const char* portable_name) {
  if (gemm::isa_available(gemm::Isa::Avx512)) out.push_back({first_id + 3, avx512_name});
  if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({first_id + 1, avx2_name});
  if (gemm::isa_available(gemm::Isa::Neon)) out.push_back({first_id + 2, neon_name});
  out.push_back({first_id, portable_name});
}

}  // namespace

bool expand_depthwise_tactic(int64_t tactic, gemm::Isa* isa) {
  if (tactic < kConvExpandDepthwisePortable || tactic > kConvExpandDepthwiseAvx512) return false;
  *isa = isa_of(tactic);
  return true;
}

std::vector<TacticSpec> conv_tactics(const edgert_node* node, const edgert_tensor* inputs) {
  const edgert_tensor &x = inputs[0], &w = inputs[1];
  std::vector<TacticSpec> out;
  if (w.dtype != EDGERT_DTYPE_FLOAT32 || !w.data) return out;
  if (has_input(*node, inputs, 5)) {
    // A pre-convolution: the banded tactics, when the depthwise one is a shape they take.
    const edgert_tensor& w_pre = inputs[5];
    if (x.dtype != EDGERT_DTYPE_FLOAT32 || x.rank != 4 || w.rank != 4 || w_pre.dtype != EDGERT_DTYPE_FLOAT32 ||
        !w_pre.data || w_pre.rank != 4)
      return out;
    edgert_tensor expanded = x;
    expanded.dims[1] = w_pre.dims[0];
    const ConvShape s = conv_shape(*node, expanded, w);
    const WindowGeometry& g = s.g;
    if (!s.ok || !is_depthwise(s) ||
        !depthwise::uses_padded_plane({g.in[0], g.in[1], g.out[0], g.out[1], g.kernel[0], g.kernel[1], g.stride[0],
                                       g.stride[1], g.dilation[0], g.dilation[1], g.pad_begin[0], g.pad_begin[1]}))
      return out;
    add_gemm_tactics(out, kConvExpandDepthwisePortable, "f32-conv-1x1-dw-banded-avx512",
                     "f32-conv-1x1-dw-banded-avx2", "f32-conv-1x1-dw-banded-neon", "f32-conv-1x1-dw-banded-portable");
    return out;
  }
  if (x.dtype != EDGERT_DTYPE_FLOAT32 && x.dtype != EDGERT_DTYPE_UNDEFINED) return out;
  const ConvShape s = conv_shape(*node, x, w);
  if (!s.ok) return out;
  // A FusedConv with a channel scale (input 4): the 1x1 GEMMs apply it while packing B; no other
  // tactic takes one.
  const bool channel_scaled = optional_input(*node, inputs, 4) != nullptr;
  if (channel_scaled && (s.group != 1 || !is_pointwise(s.g))) return out;
  // oneDNN, last of the optimized tactics (the tuner keeps it only where it is faster): plain
  // 2-D convolutions without a pool or channel scale, with an activation it has as a post-op.
  const bool fused = std::strcmp(node->op_type, "FusedConv") == 0;
  const Activation activation = fused ? Activation::from_node(*node) : Activation{};
  const bool onednn = onednn_available() && s.g.rank == 2 && !channel_scaled && onednn_takes(activation.kind) &&
                      !(fused && Attributes(node).has("pool_kernel_shape"));
  const auto add_onednn = [&] {
    if (!onednn) return;
#if defined(__x86_64__)
    if (gemm::isa_available(gemm::Isa::Avx512)) return out.push_back({kConvOneDnnAvx512, "f32-conv-onednn-avx512"});
    if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({kConvOneDnnAvx2, "f32-conv-onednn-avx2"});
#endif
  };
  if (is_depthwise(s)) {
#if defined(__x86_64__)
    const WindowGeometry& g = s.g;
    const bool padded_plane = g.rank == 2 && depthwise::uses_padded_plane({g.in[0], g.in[1], g.out[0], g.out[1],
                                                                           g.kernel[0], g.kernel[1], g.stride[0],
                                                                           g.stride[1], g.dilation[0], g.dilation[1],
                                                                           g.pad_begin[0], g.pad_begin[1]});
    if (padded_plane && gemm::isa_available(gemm::Isa::Avx512))
      out.push_back({kConvDepthwiseAvx512, "f32-conv-dw-direct-avx512"});
    if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({kConvDepthwiseAvx2, "f32-conv-dw-direct-avx2"});
#endif
    add_onednn();
    out.push_back({kConvDepthwisePortable, "f32-conv-dw-direct-portable"});
    return out;
  }
  // bfloat16 products where the build allowed them (--bf16): listed first, so a build that
  // cannot time (another board) takes what was asked for; timing keeps them only where faster.
  if (Attributes(node).get_int("allow_bf16", 0) != 0 && gemm::isa_available(gemm::Isa::Avx512Bf16)) {
    if (is_pointwise(s.g)) out.push_back({kConv1x1Avx512Bf16, "bf16-conv-1x1-gemm-8x32-avx512bf16"});
    if (!channel_scaled) out.push_back({kConvIm2colAvx512Bf16, "bf16-conv-im2col-gemm-8x32-avx512bf16"});
  }
  // float16 products likewise (--fp16 on an Armv8.2 core with half-precision arithmetic).
  if (Attributes(node).get_int("allow_fp16", 0) != 0 && gemm::isa_available(gemm::Isa::NeonFp16)) {
    if (is_pointwise(s.g)) out.push_back({kConv1x1NeonFp16, "f16-conv-1x1-gemm-8x16-fp16"});
    if (!channel_scaled) out.push_back({kConvIm2colNeonFp16, "f16-conv-im2col-gemm-8x16-fp16"});
  }
#if defined(__x86_64__)
  const WindowGeometry& wg = s.g;
  if (!channel_scaled && wg.rank == 2 && gemm::isa_available(gemm::Isa::Avx512) &&
      direct_conv_applies(s.channels, s.group, wg.kernel[0], wg.kernel[1], wg.stride[0], wg.stride[1], wg.dilation[0],
                          wg.dilation[1]))
    out.push_back({kConvDirectAvx512, "f32-conv-direct-8x16-avx512"});
#endif
  if (is_pointwise_vector(s) && !channel_scaled) {
#if defined(__x86_64__)
    if (gemm::isa_available(gemm::Isa::Avx512)) out.push_back({kConvGemvAvx512, "f32-conv-1x1-gemv-16-avx512"});
    if (gemm::isa_available(gemm::Isa::Avx2Fma)) out.push_back({kConvGemvAvx2, "f32-conv-1x1-gemv-16-avx2"});
#endif
    out.push_back({kConvGemvPortable, "f32-conv-1x1-gemv-16-portable"});
  }
  // The 48x7 tile keeps all of a few columns that the 8x32 tile rounds up to 32 (49 of 64 on a
  // 7x7 image); beyond a few hundred columns the rounding costs little.
#if defined(__x86_64__)
  const bool tall = s.g.rank == 2 && s.g.out[0] * s.g.out[1] < 1024 && gemm::isa_available(gemm::Isa::Avx512Tall);
#else
  const bool tall = false;
#endif
  if (is_pointwise(s.g) && tall) out.push_back({kConv1x1Avx512Tall, "f32-conv-1x1-gemm-48x7-avx512"});
  if (is_pointwise(s.g) && tall && !channel_scaled)
    out.push_back({kConv1x1Avx512TallInPlace, "f32-conv-1x1-gemm-48x7-inplace-avx512"});
  if (is_pointwise(s.g))
    add_gemm_tactics(out, kConv1x1Portable, "f32-conv-1x1-gemm-8x32-avx512", "f32-conv-1x1-gemm-6x16-avx2",
                     "f32-conv-1x1-gemm-6x16-neon", "f32-conv-1x1-gemm-6x16-portable");
  if (is_pointwise(s.g) && !channel_scaled && gemm::isa_available(gemm::Isa::Avx512))
    out.push_back({kConv1x1Avx512InPlace, "f32-conv-1x1-gemm-8x32-inplace-avx512"});
  if (channel_scaled) return out;  // the 1x1 GEMMs above
  if (is_winograd_3x3(s)) {
    if (tall) {
      out.push_back({kConvWinograd43Avx512Tall, "f32-conv-wino43-gemm-48x7-avx512"});
      out.push_back({kConvWinogradAvx512Tall, "f32-conv-wino23-gemm-48x7-avx512"});
      out.push_back({kConvWinogradAvx512Tall8, "f32-conv-wino23-gemm-48x8-avx512"});
    }
    add_gemm_tactics(out, kConvWinograd43Portable, "f32-conv-wino43-gemm-8x32-avx512",
                     "f32-conv-wino43-gemm-6x16-avx2", "f32-conv-wino43-gemm-6x16-neon",
                     "f32-conv-wino43-gemm-6x16-portable");
    add_gemm_tactics(out, kConvWinogradPortable, "f32-conv-wino23-gemm-8x32-avx512", "f32-conv-wino23-gemm-6x16-avx2",
                     "f32-conv-wino23-gemm-6x16-neon", "f32-conv-wino23-gemm-6x16-portable");
  }
  if (tall) out.push_back({kConvIm2colAvx512Tall, "f32-conv-im2col-gemm-48x7-avx512"});
  add_gemm_tactics(out, kConvIm2colPortable, "f32-conv-im2col-gemm-8x32-avx512", "f32-conv-im2col-gemm-6x16-avx2",
                   "f32-conv-im2col-gemm-6x16-neon", "f32-conv-im2col-gemm-6x16-portable");
  add_onednn();
  return out;
}

bool FastConv::prepare(int64_t tactic, const WindowGeometry& g, int64_t group, const edgert_tensor& x,
                       const edgert_tensor& w, bool residual, edgert_prepare_info& info, bool channel_scaled,
                       const Activation& activation) {
  pooled_ = false;
  if (x.dtype != EDGERT_DTYPE_FLOAT32 || w.dtype != EDGERT_DTYPE_FLOAT32 || !w.data) return false;
  if (x.rank != 3 && x.rank != 4) return false;
  switch (tactic) {
    case kConv1x1Portable: case kConv1x1Avx2: case kConv1x1Neon: case kConv1x1Avx512: case kConv1x1Avx512Tall:
    case kConv1x1Avx512InPlace: case kConv1x1Avx512TallInPlace: case kConv1x1Avx512Bf16: case kConv1x1NeonFp16:
      algorithm_ = Algorithm::Gemm1x1;
      break;
    case kConvGemvPortable: case kConvGemvAvx2: case kConvGemvAvx512: algorithm_ = Algorithm::Gemv; break;
    case kConvDirectAvx512: algorithm_ = Algorithm::Direct; break;
    case kConvOneDnnAvx2: case kConvOneDnnAvx512: algorithm_ = Algorithm::OneDnn; break;
    case kConvIm2colPortable: case kConvIm2colAvx2: case kConvIm2colNeon: case kConvIm2colAvx512:
    case kConvIm2colAvx512Tall: case kConvIm2colAvx512Bf16: case kConvIm2colNeonFp16:
      algorithm_ = Algorithm::Im2colGemm;
      break;
    case kConvDepthwisePortable: case kConvDepthwiseAvx2: case kConvDepthwiseAvx512:
      algorithm_ = Algorithm::Depthwise;
      break;
    case kConvWinogradPortable: case kConvWinogradAvx2: case kConvWinogradNeon: case kConvWinogradAvx512:
    case kConvWinograd43Portable: case kConvWinograd43Avx2: case kConvWinograd43Neon: case kConvWinograd43Avx512:
    case kConvWinogradAvx512Tall: case kConvWinograd43Avx512Tall: case kConvWinogradAvx512Tall8:
      algorithm_ = Algorithm::Winograd;
      break;
    default: return false;
  }
  if (channel_scaled && algorithm_ != Algorithm::Gemm1x1) return false;
  // B read in place has no packing pass to apply a channel scale in.
  in_place_ = tactic == kConv1x1Avx512InPlace || tactic == kConv1x1Avx512TallInPlace;
  if (in_place_ && channel_scaled) return false;
  // An engine tuned on another CPU may name an ISA this one lacks: run the same algorithm on
  // the best ISA available here.
  isa_ = isa_of(tactic);
  if (!gemm::isa_available(isa_)) isa_ = gemm::best_isa();
  depthwise_channel_ = depthwise::channel_portable;
#if defined(__x86_64__)
  if ((tactic == kConvDepthwiseAvx2 || tactic == kConvDepthwiseAvx512) && gemm::isa_available(gemm::Isa::Avx2Fma))
    depthwise_channel_ = depthwise::channel_avx2;
  if (tactic == kConvDepthwiseAvx512 && gemm::isa_available(gemm::Isa::Avx512))
    depthwise_channel_ = depthwise::channel_avx512;
#endif
  depthwise_pairs_ = false;

  batch_ = x.dims[0];
  channels_ = x.dims[1];
  out_channels_ = w.dims[0];
  group_ = group;
  const bool two_d = g.rank == 2;
  in_h_ = two_d ? g.in[0] : 1;
  in_w_ = g.in[g.rank - 1];
  out_h_ = two_d ? g.out[0] : 1;
  out_w_ = g.out[g.rank - 1];
  kernel_h_ = two_d ? g.kernel[0] : 1;
  kernel_w_ = g.kernel[g.rank - 1];
  stride_h_ = two_d ? g.stride[0] : 1;
  stride_w_ = g.stride[g.rank - 1];
  dilation_h_ = two_d ? g.dilation[0] : 1;
  dilation_w_ = g.dilation[g.rank - 1];
  pad_top_ = two_d ? g.pad_begin[0] : 0;
  pad_left_ = g.pad_begin[g.rank - 1];

  const int64_t taps = kernel_h_ * kernel_w_;
  if (algorithm_ == Algorithm::OneDnn) {
    // One thread (see fast/conv_onednn.h), its own scratch; zeros stand in for an absent B.
    threads_ = ThreadPool::instance().num_threads();
    onednn_zero_bias_.assign(static_cast<size_t>(out_channels_), 0.0f);
    info.workspace_bytes = 0;
    if (onednn_available() && onednn_.prepare(g, batch_, channels_, out_channels_, group_,
                                              static_cast<const float*>(w.data), true, residual, activation)) {
      packed_from_ = w.data;
      packed_tactic_ = tactic;
      return true;
    }
    // An engine tuned where the plugin had oneDNN, run by one without it (or a shape it now
    // refuses): the plugin's own algorithm for the shape, on the best ISA here, not the reference.
    const bool depthwise = group_ > 1 && group_ == channels_ && group_ == out_channels_ && w.dims[1] == 1;
    algorithm_ = depthwise ? Algorithm::Depthwise : is_pointwise(g) ? Algorithm::Gemm1x1 : Algorithm::Im2colGemm;
#if defined(__x86_64__)
    if (isa_ == gemm::Isa::Avx2Fma || isa_ == gemm::Isa::Avx512) depthwise_channel_ = depthwise::channel_avx2;
    if (isa_ == gemm::Isa::Avx512) depthwise_channel_ = depthwise::channel_avx512;
#endif
    packed_from_ = nullptr;  // pack below
  }
  if (algorithm_ == Algorithm::Depthwise) {
    if (!(group_ == channels_ && group_ == out_channels_ && w.dims[1] == 1)) return false;
    if (packed_from_ != w.data || packed_tactic_ != tactic) {
      const float* src = static_cast<const float*>(w.data);
      depthwise_weights_.assign(src, src + out_channels_ * taps);
    }
    threads_ = ThreadPool::instance().num_threads();
    const depthwise::Geometry dg = depthwise_geometry();
#if defined(__x86_64__)
    depthwise_pairs_ = depthwise_channel_ == depthwise::channel_avx512 && depthwise::pairs_apply(dg);
#endif
    scratch_floats_ = (depthwise::scratch_floats(dg) + 15) / 16 * 16;
    info.workspace_bytes = static_cast<size_t>(threads_ * scratch_floats_) * sizeof(float);
  } else if (algorithm_ == Algorithm::Direct) {
#if defined(__x86_64__)
    // Elsewhere (another CPU than the one tuned on) the reference runs.
    if (!gemm::isa_available(gemm::Isa::Avx512) || g.rank != 2 ||
        !direct_conv_applies(channels_, group_, kernel_h_, kernel_w_, stride_h_, stride_w_, dilation_h_, dilation_w_))
      return false;
    if (packed_from_ != w.data || packed_tactic_ != tactic)
      direct_weights_ = pack_direct_conv_weights(static_cast<const float*>(w.data), out_channels_, channels_ * taps);
    direct_shape_ = {batch_, channels_, out_channels_, in_h_, in_w_, out_h_, out_w_, kernel_h_, stride_h_, pad_top_,
                     pad_left_};
    threads_ = ThreadPool::instance().num_threads();
    info.workspace_bytes = direct_conv_workspace_bytes(direct_shape_, threads_);
#else
    return false;
#endif
  } else if (algorithm_ == Algorithm::Gemv) {
    ConvShape shape;
    shape.g = g;
    shape.group = group_;
    if (!is_pointwise_vector(shape)) return false;
    if (packed_from_ != w.data || packed_tactic_ != tactic)  // W [M, C] read as W' [C, M]
      gemm::pack_panels(static_cast<const float*>(w.data), channels_, out_channels_, 1, channels_, gemv_panels_);
    gemv_ = gemm::gemv_panels_portable;
#if defined(__x86_64__)
    // An engine tuned on another CPU may name an ISA this one lacks: the best one here then.
    if (tactic != kConvGemvPortable && gemm::isa_available(gemm::Isa::Avx2Fma)) gemv_ = gemm::gemv_panels_avx2;
    if (tactic == kConvGemvAvx512 && gemm::isa_available(gemm::Isa::Avx512)) gemv_ = gemm::gemv_panels_avx512;
#endif
    threads_ = ThreadPool::instance().num_threads();
    const int64_t panels = (out_channels_ + gemm::kGemvPanel - 1) / gemm::kGemvPanel;
    info.workspace_bytes = static_cast<size_t>(panels * gemm::kGemvPanel) * sizeof(float);
  } else if (algorithm_ == Algorithm::Winograd) {
    ConvShape shape;
    shape.g = g;
    shape.group = group_;
    if (!is_winograd_3x3(shape)) return false;
    threads_ = ThreadPool::instance().num_threads();
    // The transformed weights depend on W only, the tile blocking on the shapes and threads:
    // redo both whenever anything changed.
    const std::vector<int64_t> key = {tactic, threads_, batch_, channels_, in_h_, in_w_, pad_top_, pad_left_, out_h_,
                                      out_w_};
    if (packed_from_ != w.data || winograd_key_ != key) {
      const bool f43 = (tactic >= kConvWinograd43Portable && tactic <= kConvWinograd43Avx512) ||
                       tactic == kConvWinograd43Avx512Tall;
      const int tile = f43 ? 4 : 2;
      winograd_.prepare(isa_, tile, static_cast<const float*>(w.data), batch_, channels_, out_channels_, in_h_, in_w_,
                        out_h_, out_w_, pad_top_, pad_left_, threads_);
      winograd_key_ = key;
    }
    info.workspace_bytes = winograd_.workspace_bytes();
  } else {
    if (algorithm_ == Algorithm::Gemm1x1 && !is_pointwise(g)) return false;
    // The in-place tile reads B's rows where they lie, so k blocks would keep no packed block in
    // cache; they only add a pass over C per block (384 -> 64 on 14x14: 3.8% faster at 2
    // threads as one block, 0.8% at 1).
    const bool one_block = residual || in_place_;
    if (packed_from_ != w.data || packed_tactic_ != tactic || packed_one_block_ != one_block) {
      const int64_t mg = out_channels_ / group_, k = (channels_ / group_) * taps;
      packed_one_block_ = one_block;
      packed_.assign(static_cast<size_t>(group_), gemm::PackedA{});
      for (int64_t gi = 0; gi < group_; ++gi)
        gemm::pack_a(isa_, static_cast<const float*>(w.data) + gi * mg * k, mg, k, k, 1, packed_[static_cast<size_t>(gi)],
                     one_block);
    }
    threads_ = ThreadPool::instance().num_threads();
    info.workspace_bytes = 0;
    for (const gemm::PackedA& a : packed_)
      info.workspace_bytes = std::max(info.workspace_bytes, gemm::workspace_bytes(threads_, a, out_h_ * out_w_));
  }
  packed_from_ = w.data;
  packed_tactic_ = tactic;
  return true;
}

size_t FastConv::state_bytes() const {
  size_t bytes = gemv_panels_.state_bytes() + winograd_.state_bytes() + onednn_.state_bytes();
  for (const gemm::PackedA& a : packed_) bytes += gemm::state_bytes(a);
  for (const std::vector<float>* v : {&depthwise_weights_, &direct_weights_, &onednn_zero_bias_})
    bytes += v->capacity() * sizeof(float);
  return bytes;
}

bool FastConv::prepare_pool(const WindowGeometry& pool, edgert_prepare_info& info) {
  pooled_ = false;
#if defined(__x86_64__)
  if (algorithm_ != Algorithm::Direct || pool.rank != 2 || pool.kernel[0] != pool.kernel[1] ||
      pool.stride[0] != pool.stride[1] || pool.in[0] != out_h_ || pool.in[1] != out_w_ ||
      !max_pool_avx512_applies(pool.kernel[0], pool.kernel[1], pool.stride[0], pool.stride[1], pool.dilation[0],
                               pool.dilation[1]))
    return false;
  direct_pool_ = {pool.kernel[0], pool.stride[0], pool.pad_begin[0], pool.pad_begin[1], pool.out[0], pool.out[1], 1};
  direct_pool_.band_rows = direct_conv_pool_band_rows(direct_shape_, direct_pool_, threads_);
  info.workspace_bytes = direct_conv_pool_workspace_bytes(direct_shape_, direct_pool_, threads_);
  pooled_ = true;
  return true;
#else
  (void)pool, (void)info;
  return false;
#endif
}

void FastConv::execute(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
                       void* workspace, const float* channel_scale) const {
  const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_;
  if (algorithm_ == Algorithm::OneDnn) return onednn_.execute(x, bias ? bias : onednn_zero_bias_.data(), z, y);
  if (algorithm_ == Algorithm::Depthwise) {
    const depthwise::Geometry dg = depthwise_geometry();
    const depthwise::ChannelFn channel = depthwise_channel_;
    const int64_t taps = kernel_h_ * kernel_w_, planes = batch_ * channels_;
    // A few tasks per thread (a thread that loses its core holds up less), each thread with its
    // own padded-plane scratch; at most the threads the workspace was sized for.
    const auto plane_ref = [&](int64_t plane) {
      const int64_t c = plane % channels_;
      return depthwise::PlaneRef{x + plane * in_plane, depthwise_weights_.data() + c * taps, bias ? bias[c] : 0.0f,
                                 z ? z + plane * out_plane : nullptr, y + plane * out_plane};
    };
    // Units of work: planes, or pairs of planes (the last one alone when their count is odd).
    const int64_t per_unit = depthwise_pairs_ ? 2 : 1, units = (planes + per_unit - 1) / per_unit;
    // A thread owns one run of channels (the pool's owned ranges, in kRangesPerThread parts): the
    // expansion before a depthwise splits its output channels the same way (tall tiles in halves
    // of rows), so each thread filters the planes it just wrote, in its own cache
    // (efficientnet_b0, mobilenet_v3_small and mobilenet_v2 0.4-1.8% faster at 2 threads than
    // runs dealt out in turn); a thread left behind has the end of its run taken by the other.
    const int64_t tasks = std::min<int64_t>(units, ThreadPool::kRangesPerThread * threads_);
    ThreadPool::instance().parallel_for(
        tasks,
        [&](int64_t task, int thread) {
          float* scratch = static_cast<float*>(workspace) + thread * scratch_floats_;
          for (int64_t unit = task * units / tasks; unit < (task + 1) * units / tasks; ++unit) {
            const int64_t plane = unit * per_unit;
            const depthwise::PlaneRef a = plane_ref(plane);
#if defined(__x86_64__)
            if (per_unit == 2 && plane + 1 < planes) {
              depthwise::channel_pair_avx512(dg, a, plane_ref(plane + 1), activation, scratch);
              continue;
            }
#endif
            channel(dg, a.x, a.w, a.bias, a.z, a.y, activation, scratch);
          }
        },
        threads_);
    return;
  }
  if (algorithm_ == Algorithm::Winograd) return winograd_.execute(x, bias, z, y, activation, workspace);
#if defined(__x86_64__)
  if (algorithm_ == Algorithm::Direct && pooled_)
    return direct_conv_pool_avx512(direct_shape_, direct_pool_, x, direct_weights_.data(), bias, y, activation,
                                   static_cast<float*>(workspace), threads_);
  if (algorithm_ == Algorithm::Direct)
    return direct_conv_avx512(direct_shape_, x, direct_weights_.data(), bias, z, y, activation,
                              static_cast<float*>(workspace), threads_);
#endif
  if (algorithm_ == Algorithm::Gemv) return execute_gemv(x, bias, z, y, activation, static_cast<float*>(workspace));
  const int64_t cg = channels_ / group_, mg = out_channels_ / group_;
  for (int64_t n = 0; n < batch_; ++n) {
    for (int64_t gi = 0; gi < group_; ++gi) {
      gemm::BSource b;
      b.data = x + (n * channels_ + gi * cg) * in_plane;
      if (algorithm_ == Algorithm::Gemm1x1) {
        b.kind = gemm::BSource::Kind::Strided;
        b.row_stride = in_plane;
        b.col_stride = 1;
        b.row_scale = channel_scale ? channel_scale + n * channels_ + gi * cg : nullptr;
        b.in_place = in_place_;
      } else {
        b.kind = gemm::BSource::Kind::Im2col;
        b.in_h = in_h_;
        b.in_w = in_w_;
        b.out_w = out_w_;
        b.kernel_h = kernel_h_;
        b.kernel_w = kernel_w_;
        b.stride_h = stride_h_;
        b.stride_w = stride_w_;
        b.dilation_h = dilation_h_;
        b.dilation_w = dilation_w_;
        b.pad_top = pad_top_;
        b.pad_left = pad_left_;
      }
      const int64_t y_offset = (n * out_channels_ + gi * mg) * out_plane;
      gemm::Output out{y + y_offset, out_plane, 1};
      gemm::Epilogue ep;
      ep.bias_row = bias ? bias + gi * mg : nullptr;
      if (z) {
        ep.addend = z + y_offset;
        ep.addend_row_stride = out_plane;
        ep.addend_col_stride = 1;
      }
      ep.activation = activation;
      gemm::sgemm(packed_[static_cast<size_t>(gi)], b, out_plane, out, ep, workspace, threads_);
    }
  }
}

void FastConv::execute_gemv(const float* x, const float* bias, const float* z, float* y, const Activation& activation,
                            float* sums) const {
  const int64_t panels = (out_channels_ + gemm::kGemvPanel - 1) / gemm::kGemvPanel;
  const int64_t chunks = std::min<int64_t>(panels, 4 * threads_);
  ThreadPool& pool = ThreadPool::instance();
  for (int64_t n = 0; n < batch_; ++n) {
    const float* xn = x + n * channels_;
    pool.parallel_for(
        chunks,
        [&](int64_t t, int) {
          gemv_(xn, 1, gemv_panels_.values(), channels_, t * panels / chunks, (t + 1) * panels / chunks, sums);
        },
        threads_);
    // Sum, + bias, + residual, then the activation: the order of the other tactics.
    float* yn = y + n * out_channels_;
    const float* zn = z ? z + n * out_channels_ : nullptr;
    for (int64_t m = 0; m < out_channels_; ++m) {
      float v = sums[m];
      if (bias) v = v + bias[m];
      if (zn) v = v + zn[m];
      yn[m] = v;
    }
    gemm::apply_activation(yn, out_channels_, activation);
  }
}

}  // namespace edgert::cpu
