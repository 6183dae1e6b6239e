#include "fast/qlinear_conv_tactics.h"

#include <algorithm>

#include "fast/avx512_bw.h"
#include "prepared_state.h"
#include "thread_pool.h"

namespace edgert::cpu {

namespace {

// Stable ids: engines and timing caches store them. Never renumber; add new ones.
enum QLinearConvTactic : int64_t {
  kQConv1x1Avx512Vnni = 13,
  kQConvIm2colAvx512Vnni = 23,
  kQConvDepthwiseAvx512 = 33,
  kQConvShiftedAvx512Vnni = 43,
  kQConvDepthwiseVnniAvx512 = 53,
  kQConvGemv1x1Avx512Vnni = 73,
  kQConv1x1Avx2 = 14,
  kQConvIm2colAvx2 = 24,
  kQConv1x1Neon = 15,
  kQConvIm2colNeon = 25,
  kQConv1x1NeonDot = 16,
  kQConvIm2colNeonDot = 26,
  kQConvDepthwiseAvx2 = 34,
  kQConvDepthwiseNeon = 35,
};

// The qgemm families behind the 1x1 and im2col tactics, fastest first (the order they are
// listed in). Names end in the ISA the builder checks against a board's features.
struct GemmFamily {
  gemm::QgemmIsa isa;
  int64_t pointwise_id, im2col_id;
  const char *pointwise_name, *im2col_name;
};
constexpr GemmFamily kGemmFamilies[] = {
    {gemm::QgemmIsa::Avx512Vnni, kQConv1x1Avx512Vnni, kQConvIm2colAvx512Vnni, "u8s8-qconv-1x1-gemm-12x32-avx512vnni",
     "u8s8-qconv-im2col-gemm-12x32-avx512vnni"},
    {gemm::QgemmIsa::Avx2, kQConv1x1Avx2, kQConvIm2colAvx2, "u8s8-qconv-1x1-gemm-12x3-avx2",
     "u8s8-qconv-im2col-gemm-12x3-avx2"},
    {gemm::QgemmIsa::NeonDot, kQConv1x1NeonDot, kQConvIm2colNeonDot, "u8s8-qconv-1x1-gemm-12x8-dotprod",
     "u8s8-qconv-im2col-gemm-12x8-dotprod"},
    {gemm::QgemmIsa::Neon, kQConv1x1Neon, kQConvIm2colNeon, "u8s8-qconv-1x1-gemm-12x8-neon",
     "u8s8-qconv-im2col-gemm-12x8-neon"},
};

// The family of a 1x1 or im2col GEMM tactic; null for the other tactics.
const GemmFamily* gemm_family_of(int64_t tactic) {
  for (const GemmFamily& f : kGemmFamilies)
    if (tactic == f.pointwise_id || tactic == f.im2col_id) return &f;
  return nullptr;
}

// The float-sum depthwise planes (fast/qdepthwise.h) this build compiles; null for the others.
#if defined(__x86_64__)
constexpr qdepthwise::ChannelFn kDepthwiseAvx512 = qdepthwise::channel_avx512;
constexpr qdepthwise::ChannelFn kDepthwiseAvx2 = qdepthwise::channel_avx2;
#else
constexpr qdepthwise::ChannelFn kDepthwiseAvx512 = nullptr;
constexpr qdepthwise::ChannelFn kDepthwiseAvx2 = nullptr;
#endif
#if defined(__aarch64__)
constexpr qdepthwise::ChannelFn kDepthwiseNeon = qdepthwise::channel_neon;
#else
constexpr qdepthwise::ChannelFn kDepthwiseNeon = nullptr;
#endif
// The depthwise tactics of each instruction set, fastest first (the order they are listed in).
struct DepthwiseFamily {
  int64_t id;
  const char* name;
  qdepthwise::ChannelFn channel;
  bool (*cpu_runs)();  // whether this CPU has the instruction set
};
const DepthwiseFamily kDepthwiseFamilies[] = {
    {kQConvDepthwiseAvx512, "u8s8-qconv-dw-direct-16-avx512", kDepthwiseAvx512, avx512_bw_available},
    {kQConvDepthwiseAvx2, "u8s8-qconv-dw-direct-8-avx2", kDepthwiseAvx2,
     [] { return gemm::qgemm_isa_available(gemm::QgemmIsa::Avx2); }},  // AVX2 and FMA
    {kQConvDepthwiseNeon, "u8s8-qconv-dw-direct-4-neon", kDepthwiseNeon,
     [] { return gemm::qgemm_isa_available(gemm::QgemmIsa::Neon); }},
};

// The depthwise family of a tactic that this build and CPU run; null otherwise.
const DepthwiseFamily* depthwise_family_of(int64_t tactic) {
  for (const DepthwiseFamily& f : kDepthwiseFamilies)
    if (tactic == f.id) return f.channel && f.cpu_runs() ? &f : nullptr;
  return nullptr;
}

// Output pixels up to which the GEMV tactic is offered (a 1x1 image, or a few pixels).
constexpr int64_t kGemvMaxPixels = 4;

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Every w_zero_point known and 0, int8.
bool symmetric_weights(const edgert_tensor& zero_point) {
  if (zero_point.dtype != EDGERT_DTYPE_INT8 || !zero_point.data) return false;
  const int8_t* z = static_cast<const int8_t*>(zero_point.data);
  return std::all_of(z, z + numel(zero_point), [](int8_t v) { return v == 0; });
}

// The types and constants every tactic needs; `x_known`: x's dtype must be set (prepare).
bool takes_types(const edgert_node& node, const edgert_tensor* in, bool x_known) {
  if (node.num_inputs < 8) return false;
  const edgert_tensor &x = in[0], &w = in[3];
  if (x.dtype != EDGERT_DTYPE_UINT8 && (x_known || x.dtype != EDGERT_DTYPE_UNDEFINED)) return false;
  if (w.dtype != EDGERT_DTYPE_INT8 || !w.data || x.rank != 4 || w.rank != 4) return false;
  if (in[7].dtype != EDGERT_DTYPE_UINT8 && (x_known || in[7].dtype != EDGERT_DTYPE_UNDEFINED)) return false;
  const edgert_tensor* b = optional_input(node, in, 8);
  if (b && b->dtype != EDGERT_DTYPE_INT32 && b->dtype != EDGERT_DTYPE_UNDEFINED) return false;
  return symmetric_weights(in[5]);
}

bool is_depthwise(int64_t group, const edgert_tensor& x, const edgert_tensor& w) {
  return group > 1 && group == x.dims[1] && group == w.dims[0] && w.dims[1] == 1;
}

bool is_pointwise(const WindowGeometry& g) {
  for (int i = 0; i < g.rank; ++i)
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0) return false;
  return true;
}

// Dense convolutions the shifted GEMM takes: group 1, k x k past 1x1, stride 1 or 2 on both axes.
bool takes_shifted(const WindowGeometry& g, int64_t group, int64_t channels) {
  if (group != 1 || g.stride[0] != g.stride[1] || g.kernel[0] * g.kernel[1] == 1) return false;
  return qshifted::applies({channels, g.in[0], g.in[1], g.out[0], g.out[1], g.kernel[0], g.kernel[1], g.dilation[0],
                            g.dilation[1], g.pad_begin[0], g.pad_begin[1], g.stride[0]});
}

int32_t wrap_to_int32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

qdepthwise::Geometry depthwise_geometry_of(const WindowGeometry& g) {
  return {g.in[0], g.in[1], g.out[0], g.out[1], g.kernel[0], g.kernel[1], g.stride[0], g.stride[1],
          g.dilation[0], g.dilation[1], g.pad_begin[0], g.pad_begin[1]};
}

}  // namespace

std::vector<TacticSpec> qlinear_conv_tactics(const edgert_node* node, const edgert_tensor* inputs) {
  std::vector<TacticSpec> out;
  if (!takes_types(*node, inputs, false)) return out;
  const edgert_tensor &x = inputs[0], &w = inputs[3];
  const int64_t group = Attributes(node).get_int("group", 1);
  WindowGeometry g;
  try {
    Shape out_shape;
    g = conv_shapes(*node, x, w, group, out_shape);
  } catch (const KernelError&) {
    return out;  // prepare reports what is wrong with the node
  }
  if (g.rank != 2) return out;
  if (is_depthwise(group, x, w)) {
#if defined(__x86_64__)
    if (qdepthwise::vnni_available() && qdepthwise::vnni_applies(depthwise_geometry_of(g)))
      out.push_back({kQConvDepthwiseVnniAvx512, "u8s8-qconv-dw-vnni-16-avx512vbmi"});
#endif
    if (qdepthwise::applies(depthwise_geometry_of(g)))
      for (const DepthwiseFamily& f : kDepthwiseFamilies)
        if (depthwise_family_of(f.id)) out.push_back({f.id, f.name});
    return out;
  }
  if (w.dims[1] * g.kernel_size() > gemm::kQgemmMaxDepth) return out;
  const bool vnni = gemm::qgemm_isa_available(gemm::QgemmIsa::Avx512Vnni);
  const bool pointwise = is_pointwise(g);
  if (pointwise) {
#if defined(__x86_64__)
    if (vnni && group == 1 && g.out_size() <= kGemvMaxPixels && gemm::qgemv_available())
      out.push_back({kQConvGemv1x1Avx512Vnni, "u8s8-qconv-1x1-gemv-16-avx512vnni"});
#endif
  } else if (vnni && takes_shifted(g, group, x.dims[1])) {
    out.push_back({kQConvShiftedAvx512Vnni, "u8s8-qconv-shifted-gemm-12x32-avx512vnni"});
  }
  for (const GemmFamily& f : kGemmFamilies)
    if (gemm::qgemm_isa_available(f.isa))
      out.push_back(pointwise ? TacticSpec{f.pointwise_id, f.pointwise_name} : TacticSpec{f.im2col_id, f.im2col_name});
  return out;
}

bool FastQLinearConv::prepare(int64_t tactic, const edgert_node& node, const WindowGeometry& g, int64_t group,
                              const edgert_tensor* in, edgert_prepare_info& info) {
  const edgert_tensor &x = in[0], &w = in[3];
  if (g.rank != 2 || !takes_types(node, in, true)) return false;
  // An engine tuned on another CPU may name a tactic this one cannot run: the reference runs.
  switch (tactic) {
    case kQConvDepthwiseAvx512:
    case kQConvDepthwiseAvx2:
    case kQConvDepthwiseNeon: {
      const DepthwiseFamily* family = depthwise_family_of(tactic);
      if (!family || !is_depthwise(group, x, w) || !qdepthwise::applies(depthwise_geometry_of(g))) return false;
      algorithm_ = Algorithm::Depthwise;
      depthwise_channel_ = family->channel;
      break;
    }
    case kQConvGemv1x1Avx512Vnni:
#if defined(__x86_64__)
      if (!is_pointwise(g) || group != 1 || g.out_size() > kGemvMaxPixels || !gemm::qgemv_available()) return false;
      algorithm_ = Algorithm::Gemv1x1;
      break;
#else
      return false;
#endif
    case kQConvDepthwiseVnniAvx512:
#if defined(__x86_64__)
      if (!is_depthwise(group, x, w) || !qdepthwise::vnni_available() ||
          !qdepthwise::vnni_applies(depthwise_geometry_of(g)))
        return false;
      algorithm_ = Algorithm::DepthwiseVnni;
      break;
#else
      return false;
#endif
    case kQConvShiftedAvx512Vnni:
      if (!takes_shifted(g, group, x.dims[1]) || !gemm::qgemm_isa_available(gemm::QgemmIsa::Avx512Vnni)) return false;
      algorithm_ = Algorithm::ShiftedGemm;
      break;
    default: {  // the 1x1 and im2col GEMM of each qgemm family
      const GemmFamily* family = gemm_family_of(tactic);
      if (!family) return false;
      const bool pointwise_tactic = tactic == family->pointwise_id;
      if ((pointwise_tactic && !is_pointwise(g)) || !gemm::qgemm_isa_available(family->isa)) return false;
      algorithm_ = pointwise_tactic ? Algorithm::Gemm1x1 : Algorithm::Im2colGemm;
      gemm_isa_ = family->isa;
      break;
    }
  }
  batch_ = x.dims[0];
  channels_ = x.dims[1];
  out_channels_ = w.dims[0];
  group_ = group;
  in_h_ = g.in[0], in_w_ = g.in[1], out_h_ = g.out[0], out_w_ = g.out[1];
  kernel_h_ = g.kernel[0], kernel_w_ = g.kernel[1], stride_h_ = g.stride[0], stride_w_ = g.stride[1];
  dilation_h_ = g.dilation[0], dilation_w_ = g.dilation[1], pad_top_ = g.pad_begin[0], pad_left_ = g.pad_begin[1];
  const int64_t taps = kernel_h_ * kernel_w_;
  if (algorithm_ == Algorithm::DepthwiseVnni) vnni_plan_ = qdepthwise::make_vnni_plan(depthwise_geometry());
  if (algorithm_ == Algorithm::ShiftedGemm)
    shifted_plan_ = qshifted::make_plan({channels_, in_h_, in_w_, out_h_, out_w_, kernel_h_, kernel_w_, dilation_h_,
                                         dilation_w_, pad_top_, pad_left_, stride_h_});
  const int8_t* weights = static_cast<const int8_t*>(w.data);
  if (packed_from_ != w.data || packed_tactic_ != tactic) {
    packed_.clear();
    depthwise_weights_.clear();
    vnni_weights_.clear();
    vnni_weight_sums_.clear();
    vnni_weights_stored_ = vnni_sums_stored_ = nullptr;
    gemv_columns_ = gemm::PackedQColumns{};
    if (algorithm_ == Algorithm::Depthwise) {
      depthwise_weights_.assign(weights, weights + out_channels_ * taps);
    } else if (algorithm_ == Algorithm::DepthwiseVnni) {
      const int64_t per_channel = qdepthwise::vnni_weights_per_channel(vnni_plan_);
      const size_t weight_bytes = static_cast<size_t>(out_channels_ * per_channel) * sizeof(int32_t);
      const size_t sum_bytes = static_cast<size_t>(out_channels_) * sizeof(int32_t);
      const prepared::Key key{prepared::kQDepthwiseTaps, out_channels_, kernel_h_, vnni_plan_.chunks, kernel_w_};
      const prepared::Key sums_key{prepared::kQDepthwiseSums, out_channels_, taps, 0, 0};
      vnni_weights_stored_ = static_cast<const int32_t*>(prepared::take_bytes(key, weight_bytes));
      vnni_sums_stored_ =
          vnni_weights_stored_ ? static_cast<const int32_t*>(prepared::take_bytes(sums_key, sum_bytes)) : nullptr;
      if (!vnni_sums_stored_) {
        vnni_weights_stored_ = nullptr;
        vnni_weights_.assign(static_cast<size_t>(out_channels_ * per_channel), 0);
        vnni_weight_sums_.assign(static_cast<size_t>(out_channels_), 0);
        for (int64_t c = 0; c < out_channels_; ++c)
          vnni_weight_sums_[static_cast<size_t>(c)] =
              qdepthwise::pack_vnni_weights(vnni_plan_, weights + c * taps, vnni_weights_.data() + c * per_channel);
        prepared::record_bytes(key, vnni_weights_.data(), weight_bytes);
        prepared::record_bytes(sums_key, vnni_weight_sums_.data(), sum_bytes);
      }
    } else if (algorithm_ == Algorithm::Gemv1x1) {
      if (!gemm::pack_qcolumns(weights, out_channels_, channels_, gemv_columns_)) return false;
    } else if (algorithm_ == Algorithm::ShiftedGemm) {
      packed_.assign(1, gemm::PackedQRows{});
      if (!qshifted::pack_weights(weights, out_channels_, shifted_plan_, packed_[0])) return false;
    } else {
      const int64_t mg = out_channels_ / group_, k = (channels_ / group_) * taps;
      packed_.assign(static_cast<size_t>(group_), gemm::PackedQRows{});
      for (int64_t gi = 0; gi < group_; ++gi)
        if (!gemm::pack_qrows(weights + gi * mg * k, mg, k, packed_[static_cast<size_t>(gi)])) return false;
    }
    packed_from_ = w.data;
    packed_tactic_ = tactic;
  }
  threads_ = ThreadPool::instance().num_threads();
  if (algorithm_ == Algorithm::Depthwise) depthwise_plan_ = qdepthwise::make_plan(depthwise_geometry());
  per_thread_bytes_ = algorithm_ == Algorithm::DepthwiseVnni ? round_up_64(vnni_plan_.scratch_bytes())
                      : algorithm_ == Algorithm::Gemv1x1 ? round_up_64(static_cast<size_t>(4 * gemv_columns_.groups()))
                      : algorithm_ == Algorithm::Depthwise
                          ? static_cast<size_t>(qdepthwise::scratch_floats(depthwise_geometry())) * sizeof(float)
                      : algorithm_ == Algorithm::ShiftedGemm
                          ? round_up_64(shifted_plan_.image_bytes())  // one image for all threads
                          : gemm::qgemm_workspace_bytes((channels_ / group_) * taps, threads_);
  // The multipliers and folded biases, then the threads' scratch (qgemm's is one block).
  info.workspace_bytes = round_up_64(static_cast<size_t>(out_channels_) * (sizeof(float) + sizeof(int32_t))) +
                         (algorithm_ == Algorithm::Depthwise || algorithm_ == Algorithm::Gemv1x1 ||
                                  algorithm_ == Algorithm::DepthwiseVnni
                              ? static_cast<size_t>(threads_)
                              : 1) *
                             per_thread_bytes_;
  return true;
}

size_t FastQLinearConv::state_bytes() const {
  size_t bytes = depthwise_weights_.capacity() * sizeof(float) +
                 (vnni_weights_.capacity() + vnni_weight_sums_.capacity()) * sizeof(int32_t);
  for (const gemm::PackedQRows& p : packed_) bytes += p.state_bytes();
  bytes += gemv_columns_.state_bytes();
  return bytes;
}

void FastQLinearConv::execute(const edgert_tensor* in, const int32_t* bias, uint8_t* y, void* workspace) const {
  const uint8_t* x = data_as<uint8_t>(in[0]);
  const float x_scale = scale_at(in[1], 0), y_scale = scale_at(in[6], 0);
  const int32_t x_zero = zero_point_at(&in[2], 0), y_zero = zero_point_at(&in[7], 0);
  float* multiplier = static_cast<float*>(workspace);
  int32_t* row_bias = reinterpret_cast<int32_t*>(multiplier + out_channels_);
  uint8_t* scratch = static_cast<uint8_t*>(workspace) +
                     round_up_64(static_cast<size_t>(out_channels_) * (sizeof(float) + sizeof(int32_t)));
  // The reference's float expression, in its order: (x_scale * w_scale[m]) / y_scale.
  // float32 scales read in place; other float types through scale_at.
  const int64_t w_scales = numel(in[4]);
  if (in[4].dtype == EDGERT_DTYPE_FLOAT32) {
    const float* w_scale = data_as<float>(in[4]);
    // Per channel as a plain loop the compiler vectorizes (a division per channel is a visible
    // part of a 7x7 depthwise layer); the same IEEE operations as one at a time.
    if (w_scales == 1)
      std::fill(multiplier, multiplier + out_channels_, x_scale * w_scale[0] / y_scale);
    else
      for (int64_t m = 0; m < out_channels_; ++m) multiplier[m] = x_scale * w_scale[m] / y_scale;
  } else {
    for (int64_t m = 0; m < out_channels_; ++m) multiplier[m] = x_scale * scale_at(in[4], m) / y_scale;
  }
  const int64_t in_plane = in_h_ * in_w_, out_plane = out_h_ * out_w_;
  if (algorithm_ == Algorithm::DepthwiseVnni) {
#if defined(__x86_64__)
    const int32_t* sums = vnni_sums_stored_ ? vnni_sums_stored_ : vnni_weight_sums_.data();
    const int32_t* packed_w = vnni_weights_stored_ ? vnni_weights_stored_ : vnni_weights_.data();
    for (int64_t c = 0; c < channels_; ++c)
      row_bias[c] = wrap_to_int32(static_cast<int64_t>(bias ? bias[c] : 0) - static_cast<int64_t>(x_zero) * sums[c]);
    const int64_t per_channel = qdepthwise::vnni_weights_per_channel(vnni_plan_);
    ThreadPool::instance().parallel_ranges(
        batch_ * channels_,
        [&](int64_t p0, int64_t p1, int thread) {
          uint8_t* own = scratch + static_cast<size_t>(thread) * per_thread_bytes_;
          qdepthwise::vnni_fill_scratch(vnni_plan_, x_zero, own);
          // The channel counted along (a division per plane shows on planes of 7x7).
          for (int64_t plane = p0, c = p0 % channels_; plane < p1; ++plane, c = c + 1 == channels_ ? 0 : c + 1) {
            qdepthwise::channel_vnni_avx512(vnni_plan_, x + plane * in_plane, x_zero,
                                            packed_w + c * per_channel, row_bias[c], multiplier[c],
                                            y_zero, y + plane * out_plane, own);
          }
        },
        threads_);
#endif
    return;
  }
  if (algorithm_ == Algorithm::Depthwise) {
    const qdepthwise::Geometry dg = depthwise_geometry();
    const int64_t taps = kernel_h_ * kernel_w_, planes = batch_ * channels_;
    ThreadPool::instance().parallel_ranges(
        planes,
        [&](int64_t p0, int64_t p1, int thread) {
          float* own = reinterpret_cast<float*>(scratch + static_cast<size_t>(thread) * per_thread_bytes_);
          qdepthwise::clear_scratch(dg, own);
          // The channel counted along (a division per plane shows on planes of 7x7).
          for (int64_t plane = p0, c = p0 % channels_; plane < p1; ++plane, c = c + 1 == channels_ ? 0 : c + 1) {
            depthwise_channel_(depthwise_plan_, x + plane * in_plane, x_zero, depthwise_weights_.data() + c * taps,
                               bias ? bias[c] : 0, multiplier[c], y_zero, y + plane * out_plane, own);
          }
        },
        threads_);
    return;
  }
  if (algorithm_ == Algorithm::Gemv1x1) {
#if defined(__x86_64__)
    const gemm::PackedQColumns& w = gemv_columns_;
    for (int64_t r = 0; r < out_channels_; ++r)
      row_bias[r] = wrap_to_int32(static_cast<int64_t>(bias ? bias[r] : 0) -
                                  static_cast<int64_t>(x_zero) * w.row_sums[static_cast<size_t>(r)]);
    // Threads only where there is work for them: an SE convolution is a few microseconds.
    const int threads = w.m * w.k * batch_ * out_plane >= (int64_t{1} << 20) ? threads_ : 1;
    for (int64_t n = 0; n < batch_; ++n)
      for (int64_t p = 0; p < out_plane; ++p)
        ThreadPool::instance().parallel_ranges(
            w.panels(),
            [&](int64_t b, int64_t e, int thread) {
              gemm::qgemv_avx512vnni(w, b, e, x + n * channels_ * in_plane + p, in_plane, x_zero, row_bias,
                                     multiplier, y_zero, y + n * out_channels_ * out_plane + p, out_plane,
                                     scratch + static_cast<size_t>(thread) * per_thread_bytes_);
            },
            threads);
#endif
    return;
  }
  if (algorithm_ == Algorithm::ShiftedGemm) {
    for (int64_t n = 0; n < batch_; ++n)
      execute_shifted(x + n * channels_ * in_plane, x_zero, bias, multiplier, y_zero, y + n * out_channels_ * out_plane,
                      row_bias, scratch);
    return;
  }
  const int64_t cg = channels_ / group_, mg = out_channels_ / group_;
  for (int64_t n = 0; n < batch_; ++n) {
    for (int64_t gi = 0; gi < group_; ++gi) {
      gemm::QPixels b;
      b.data = x + (n * channels_ + gi * cg) * in_plane;
      b.zero_point = x_zero;
      if (algorithm_ == Algorithm::Gemm1x1) {
        b.kind = gemm::QPixels::Kind::Rows;
        b.row_stride = in_plane;
      } else {
        b.kind = gemm::QPixels::Kind::Im2col;
        b.in_h = in_h_, b.in_w = in_w_, b.out_w = out_w_, b.kernel_h = kernel_h_, b.kernel_w = kernel_w_;
        b.stride_h = stride_h_, b.stride_w = stride_w_, b.dilation_h = dilation_h_, b.dilation_w = dilation_w_;
        b.pad_top = pad_top_, b.pad_left = pad_left_;
      }
      gemm::QRequant out;
      out.data = y + (n * out_channels_ + gi * mg) * out_plane;
      out.row_stride = out_plane;
      out.bias = bias ? bias + gi * mg : nullptr;
      out.multiplier = multiplier + gi * mg;
      out.zero_point = y_zero;
      gemm::qgemm(gemm_isa_, packed_[static_cast<size_t>(gi)], b, out_plane, out, row_bias + gi * mg, scratch,
                  threads_);
    }
  }
}

void FastQLinearConv::execute_shifted(const uint8_t* x, int32_t x_zero, const int32_t* bias,
                                      const float* multiplier, int32_t y_zero, uint8_t* y, int32_t* row_bias,
                                      uint8_t* image) const {
#if defined(__x86_64__)
  const gemm::PackedQRows& w = packed_[0];
  const qshifted::Plan& plan = shifted_plan_;
  ThreadPool& pool = ThreadPool::instance();
  pool.parallel_ranges(
      plan.channel_groups,
      [&](int64_t g0, int64_t g1, int) { qshifted::pack_image_avx512(plan, x, x_zero, g0, g1, image); }, threads_);
  for (int64_t r = 0; r < out_channels_; ++r)
    row_bias[r] = wrap_to_int32(static_cast<int64_t>(bias ? bias[r] : 0) -
                                static_cast<int64_t>(x_zero) * w.sums()[r]);
  gemm::QRequant out;
  out.data = y;
  out.row_stride = out_h_ * out_w_;
  out.multiplier = multiplier;
  out.zero_point = y_zero;
  // As qgemm: pixel panels, the rows split too when there are fewer than two panels a thread.
  const int64_t pixel_panels = (plan.pixels + gemm::kQgemmPanelPixels - 1) / gemm::kQgemmPanelPixels;
  const int64_t row_panels = w.panels(), threads = std::max(1, std::min(pool.num_threads(), threads_));
  const int64_t row_parts =
      std::min(row_panels, std::max<int64_t>(1, (2 * threads + pixel_panels - 1) / pixel_panels));
  pool.parallel_for(
      pixel_panels * row_parts,
      [&](int64_t task, int) {
        const int64_t panel = task / row_parts, part = task % row_parts;
        const int64_t q0 = panel * gemm::kQgemmPanelPixels;
        qshifted::panel_12x32_avx512vnni(plan, w, part * row_panels / row_parts, (part + 1) * row_panels / row_parts,
                                         image, q0, std::min(gemm::kQgemmPanelPixels, plan.pixels - q0), row_bias,
                                         out);
      },
      threads_);
#else
  (void)x, (void)x_zero, (void)bias, (void)multiplier, (void)y_zero, (void)y, (void)row_bias, (void)image;
#endif
}

}  // namespace edgert::cpu
