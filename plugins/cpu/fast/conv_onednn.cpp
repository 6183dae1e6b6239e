#include "fast/conv_onednn.h"

#include <cstring>
#include <unordered_map>
#include <vector>

#if defined(EDGERT_WITH_ONEDNN)
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace edgert::cpu {

#if defined(EDGERT_WITH_ONEDNN)

bool onednn_available() { return true; }

// Not Clip: oneDNN's passes NaN through, where the graph's (and every other tactic's) gives the
// clip bounds. Not Relu either, though both now keep NaN (CpuTactics.FusedReluOfNaNIsNaNInEveryTactic):
// oneDNN's Relu has not been checked against that test.
bool onednn_takes(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::None: case ActivationKind::Sigmoid: case ActivationKind::Tanh:
    case ActivationKind::HardSwish: case ActivationKind::SiLU:
      return true;
    default: return false;
  }
}

struct OneDnnConv::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};  // in order, on the calling thread: one for all runs
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward primitive;
  dnnl::memory weights;  // reordered into pd.weights_desc()
  dnnl::memory::desc src, dst, bias;
  bool has_bias = false, residual = false;
  size_t dst_bytes = 0;
};

OneDnnConv::OneDnnConv() = default;
OneDnnConv::~OneDnnConv() = default;

bool OneDnnConv::prepare(const WindowGeometry& g, int64_t batch, int64_t channels, int64_t out_channels,
                         int64_t group, const float* w, bool has_bias, bool residual,
                         const Activation& activation) {
  using dnnl::memory;
  if (g.rank != 2 || !onednn_takes(activation.kind)) return false;
  // On the calling thread only: with OpenMP workers of its own beside the plugin's thread pool
  // (three threads spinning on two cores), mobilenet_v2 at 2 threads went from 2.7 to 4.3 ms,
  // its nodes without oneDNN too. At 2+ threads the tactic competes single-threaded. Set before
  // the primitive is made: it keeps the thread count it was made with (made at 2, every run
  // started a team of 2, whose worker then spun between runs: a third of a 1-thread resnet18
  // process's samples).
  omp_set_num_threads(1);
  try {
    auto s = std::make_unique<State>();
    const memory::dims src_dims = {batch, channels, g.in[0], g.in[1]};
    const memory::dims dst_dims = {batch, out_channels, g.out[0], g.out[1]};
    // Grouped weights are 5-D in oneDNN: [group, out / group, in / group, kh, kw].
    const memory::dims w_dims = group == 1
                                    ? memory::dims{out_channels, channels, g.kernel[0], g.kernel[1]}
                                    : memory::dims{group, out_channels / group, channels / group, g.kernel[0], g.kernel[1]};
    s->src = memory::desc(src_dims, memory::data_type::f32, memory::format_tag::nchw);
    s->dst = memory::desc(dst_dims, memory::data_type::f32, memory::format_tag::nchw);
    s->bias = memory::desc({out_channels}, memory::data_type::f32, memory::format_tag::x);
    const memory::desc w_any(w_dims, memory::data_type::f32, memory::format_tag::any);
    const memory::desc w_plain(w_dims, memory::data_type::f32,
                               group == 1 ? memory::format_tag::oihw : memory::format_tag::goihw);
    // oneDNN counts dilation from 0 (ONNX's 1 is its 0).
    const memory::dims strides = {g.stride[0], g.stride[1]}, dilates = {g.dilation[0] - 1, g.dilation[1] - 1};
    const memory::dims pad_l = {g.pad_begin[0], g.pad_begin[1]}, pad_r = {g.pad_end[0], g.pad_end[1]};
    dnnl::post_ops ops;
    if (residual) ops.append_sum(1.0f);
    switch (activation.kind) {
      case ActivationKind::Sigmoid: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f); break;
      case ActivationKind::Tanh: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f); break;
      case ActivationKind::HardSwish: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f); break;
      case ActivationKind::SiLU: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f); break;
      default: break;
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                  dnnl::algorithm::convolution_direct, s->src, w_any,
                                                                  s->bias, s->dst, strides, dilates, pad_l, pad_r)
                               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                  dnnl::algorithm::convolution_direct, s->src, w_any,
                                                                  s->dst, strides, dilates, pad_l, pad_r);
    s->pd = dnnl::convolution_forward::primitive_desc(desc, attr, s->engine);
    // The primitive must read and write our plain NCHW tensors as they are.
    if (s->pd.src_desc() != s->src || s->pd.dst_desc() != s->dst) return false;
    s->primitive = dnnl::convolution_forward(s->pd);
    memory plain(w_plain, s->engine, const_cast<float*>(w));
    s->weights = memory(s->pd.weights_desc(), s->engine);
    dnnl::reorder(plain, s->weights).execute(s->stream, plain, s->weights);
    s->stream.wait();
    s->has_bias = has_bias;
    s->residual = residual;
    s->dst_bytes = s->dst.get_size();
    state_ = std::move(s);
    // One run on zeros: oneDNN generates some kernels (its GEMM's) at their first execution,
    // which would otherwise land in the tuner's warm-up (10-40 ms) or an engine's first run.
    std::vector<float> src(state_->src.get_size() / sizeof(float)), dst(state_->dst_bytes / sizeof(float));
    std::vector<float> bias(static_cast<size_t>(out_channels));
    execute(src.data(), bias.data(), dst.data(), dst.data());
    return true;
  } catch (const dnnl::error&) {
    return false;  // no implementation for this shape and these post-ops
  }
}

void OneDnnConv::execute(const float* x, const float* bias, const float* z, float* y) const {
  State& s = *state_;
  // The sum post-op adds what Y holds: Z, copied there unless it is Y already.
  if (s.residual && z != y) std::memcpy(y, z, s.dst_bytes);
  omp_set_num_threads(1);  // see prepare
  dnnl::memory src(s.src, s.engine, const_cast<float*>(x));
  dnnl::memory dst(s.dst, s.engine, y);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, dst}};
  if (s.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(s.bias, s.engine, const_cast<float*>(bias)));
  s.primitive.execute(s.stream, args);
  s.stream.wait();
}

size_t OneDnnConv::state_bytes() const { return state_ ? state_->weights.get_desc().get_size() : 0; }

#else  // built without oneDNN: no tactic is listed

bool onednn_available() { return false; }
bool onednn_takes(ActivationKind) { return false; }
struct OneDnnConv::State {};
OneDnnConv::OneDnnConv() = default;
OneDnnConv::~OneDnnConv() = default;
bool OneDnnConv::prepare(const WindowGeometry&, int64_t, int64_t, int64_t, int64_t, const float*, bool, bool,
                         const Activation&) {
  return false;
}
void OneDnnConv::execute(const float*, const float*, const float*, float*) const {}
size_t OneDnnConv::state_bytes() const { return 0; }

#endif

}  // namespace edgert::cpu
