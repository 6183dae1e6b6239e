// CausalConvWithState (opset 27): a depthwise 1-D convolution that sees only the current and
// past positions, carrying its left context from one call to the next.
//
// input [batch, channels, length] is preceded along the time axis by past_state [batch,
// channels, k - 1] (zeros when absent); each channel is convolved with its own kernel weight
// [channels, 1, k] over that padded sequence without further padding, so the output keeps the
// input's shape. present_state is the last k - 1 positions of the padded sequence: the state to
// hand to the next call, which holds past values when the input is shorter than k - 1.
//
// The convolution sums in double and is rounded to the input dtype before the optional SiLU
// (activation "silu" or its alias "swish"), which then runs on the rounded value and is rounded
// again: the ONNX function body does the same (Conv in T, then Sigmoid and Mul).
#include <cmath>
#include <string>

#include "kernel.h"
#include "nn_common.h"

namespace edgert::cpu {
namespace {

enum Input { kInput, kWeight, kBias, kPastState };
enum Output { kOutput, kPresentState };

long long ll(int64_t v) { return static_cast<long long>(v); }

class CausalConvWithStateOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes attrs(&node);
    const edgert_tensor& x = in[kInput];
    dtype_ = x.dtype;
    dispatch(dtype_, kFloats, [](auto) {}, "input");
    if (x.rank != 3)
      fail(EDGERT_ERR_SHAPE, "input must be 3-D [batch, channels, length], it is %s", shape_string(shape_of(x)).c_str());
    batch_ = x.dims[0];
    channels_ = x.dims[1];
    length_ = x.dims[2];

    const edgert_tensor& w = in[kWeight];
    if (w.rank != 3 || w.dims[0] != channels_ || w.dims[1] != 1)
      fail(EDGERT_ERR_SHAPE, "weight must be [channels = %lld, 1, k] (a depthwise Conv weight), it is %s",
           ll(channels_), shape_string(shape_of(w)).c_str());
    kernel_ = w.dims[2];
    if (kernel_ < 1) fail(EDGERT_ERR_SHAPE, "weight %s has kernel size %lld, expected >= 1", shape_string(shape_of(w)).c_str(), ll(kernel_));
    require_dtype(w, "weight");

    has_bias_ = has_input(node, in, kBias);
    if (has_bias_) {
      require_dtype(in[kBias], "bias");
      if (shape_of(in[kBias]) != Shape{channels_})
        fail(EDGERT_ERR_SHAPE, "bias must be [channels = %lld], it is %s", ll(channels_),
             shape_string(shape_of(in[kBias])).c_str());
    }
    has_past_ = has_input(node, in, kPastState);
    const Shape state_shape{batch_, channels_, kernel_ - 1};
    if (has_past_) {
      require_dtype(in[kPastState], "past_state");
      if (shape_of(in[kPastState]) != state_shape)
        fail(EDGERT_ERR_SHAPE, "past_state must be [batch, channels, k - 1] = %s, it is %s",
             shape_string(state_shape).c_str(), shape_string(shape_of(in[kPastState])).c_str());
    }

    std::string activation = attrs.get_string("activation", "none");
    if (activation == "silu" || activation == "swish") silu_ = true;
    else if (activation == "none") silu_ = false;
    else fail(EDGERT_ERR_INVALID_ARGUMENT, "activation '%s' is not one of 'none', 'silu', 'swish'", activation.c_str());

    if (node.num_outputs > 2) fail(EDGERT_ERR_UNSUPPORTED, "expects at most 2 outputs, node has %d", node.num_outputs);
    set_output(out[kOutput], dtype_, shape_of(x));
    if (node.num_outputs > kPresentState) set_output(out[kPresentState], dtype_, state_shape);
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch(dtype_, kFloats, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* x = data_as<T>(in[kInput]);
      const T* w = data_as<T>(in[kWeight]);
      const T* bias = has_bias_ ? data_as<T>(in[kBias]) : nullptr;
      const T* past = has_past_ ? data_as<T>(in[kPastState]) : nullptr;
      T* y = data_as<T>(out[kOutput]);
      T* present = node.num_outputs > kPresentState ? data_as<T>(out[kPresentState]) : nullptr;
      const int64_t state = kernel_ - 1;
      for (int64_t b = 0; b < batch_; ++b)
        for (int64_t c = 0; c < channels_; ++c) {
          const int64_t row = b * channels_ + c;
          // Position t of the padded sequence: the state's k - 1 values, then the input.
          auto padded = [&](int64_t t) -> double {
            if (t >= state) return static_cast<C>(x[row * length_ + t - state]);
            return past ? static_cast<double>(static_cast<C>(past[row * state + t])) : 0.0;
          };
          const T* kernel = w + c * kernel_;
          for (int64_t l = 0; l < length_; ++l) {
            double sum = bias ? static_cast<double>(static_cast<C>(bias[c])) : 0.0;
            for (int64_t j = 0; j < kernel_; ++j) sum += static_cast<double>(static_cast<C>(kernel[j])) * padded(l + j);
            T conv = static_cast<T>(static_cast<C>(sum));
            if (silu_) {
              const double v = static_cast<C>(conv);
              conv = static_cast<T>(static_cast<C>(v / (1.0 + std::exp(-v))));
            }
            y[row * length_ + l] = conv;
          }
          if (present)
            for (int64_t i = 0; i < state; ++i) present[row * state + i] = static_cast<T>(static_cast<C>(padded(length_ + i)));
        }
    });
  }

 private:
  void require_dtype(const edgert_tensor& t, const char* what) const {
    if (t.dtype != dtype_)
      fail(EDGERT_ERR_INVALID_ARGUMENT, "%s has dtype %s, expected the input's dtype %s", what, dtype_name(t.dtype),
           dtype_name(dtype_));
  }

  edgert_dtype dtype_ = EDGERT_DTYPE_UNDEFINED;
  int64_t batch_ = 0, channels_ = 0, length_ = 0, kernel_ = 1;
  bool has_bias_ = false, has_past_ = false, silu_ = false;
};

}  // namespace

void register_causal_conv_with_state_kernels(KernelRegistry& r) {
  r.add<CausalConvWithStateOp>("CausalConvWithState", "ref-causal-conv-with-state");
}

}  // namespace edgert::cpu
