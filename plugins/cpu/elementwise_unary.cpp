// Element-wise unary math and activations, plus the pass-through ops Identity and Dropout.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "activation.h"
#include "fast/unary_rows.h"
#include "kernel.h"

namespace edgert::cpu {
namespace {


// Attribute values an activation reads once per node (alpha, beta, ...). Four floats cover
// every op in this file.
struct Params {
  float p[4] = {0, 0, 0, 0};
};

// Applies F::apply<C>(x, params) (on compute_t<T>) to every element. F::kAllowed is the set of
// input dtypes ONNX allows; F::init reads attributes. The output has the input's dtype unless
// F::kBoolOutput, in which case it is bool (IsNaN, IsInf).
template <typename F>
class UnaryOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    dispatch(in[0].dtype, F::kAllowed, [](auto) {}, "input");
    F::init(Attributes(&node), params_);
    set_output(out[0], F::kBoolOutput ? EDGERT_DTYPE_BOOL : in[0].dtype, shape_of(in[0]));
    fast_ = F::kActivation != ActivationKind::None && tactic() == kActivationRowsTactic &&
            in[0].dtype == EDGERT_DTYPE_FLOAT32;
    activation_ = Activation{F::kActivation, params_.p[0], params_.p[1]};
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    if (fast_) return activation_rows(data_as<float>(in[0]), data_as<float>(out[0]), numel(in[0]), activation_);
    dispatch_only<F::kAllowed>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      using R = std::conditional_t<F::kBoolOutput, bool, T>;
      const T* x = data_as<T>(in[0]);
      R* y = data_as<R>(out[0]);
      int64_t n = numel(in[0]);
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(F::template apply<C>(static_cast<C>(x[i]), params_));
    });
  }

 private:
  Params params_;
  bool fast_ = false;
  Activation activation_;
};

// Defaults for the functor traits; each op overrides what differs. kActivation: the fused
// activation of activation.h this op is, which gives it the vectorized tactic.
struct FloatMath {
  static constexpr unsigned kAllowed = kFloats;
  static constexpr bool kBoolOutput = false;
  static constexpr ActivationKind kActivation = ActivationKind::None;
  static void init(const Attributes&, Params&) {}
};

// Transcendental functions: evaluated in double so float32 results are correctly rounded
// (or nearly), like numpy's float32 loops that the ONNX test outputs come from.
#define EDGERT_FLOAT_FN(Name, expr)                                \
  struct Name : FloatMath {                                        \
    template <typename C> static C apply(C c, const Params&) {     \
      double x = static_cast<double>(c);                           \
      return static_cast<C>(expr);                                 \
    }                                                              \
  };
EDGERT_FLOAT_FN(Acos, std::acos(x))
EDGERT_FLOAT_FN(Acosh, std::acosh(x))
EDGERT_FLOAT_FN(Asin, std::asin(x))
EDGERT_FLOAT_FN(Asinh, std::asinh(x))
EDGERT_FLOAT_FN(Atan, std::atan(x))
EDGERT_FLOAT_FN(Atanh, std::atanh(x))
EDGERT_FLOAT_FN(Cos, std::cos(x))
EDGERT_FLOAT_FN(Cosh, std::cosh(x))
EDGERT_FLOAT_FN(Sin, std::sin(x))
EDGERT_FLOAT_FN(Sinh, std::sinh(x))
EDGERT_FLOAT_FN(Tan, std::tan(x))
EDGERT_FLOAT_FN(Exp, std::exp(x))
EDGERT_FLOAT_FN(Log, std::log(x))
EDGERT_FLOAT_FN(Sqrt, std::sqrt(x))
EDGERT_FLOAT_FN(Ceil, std::ceil(x))
EDGERT_FLOAT_FN(Floor, std::floor(x))
EDGERT_FLOAT_FN(Round, std::nearbyint(x))  // default rounding mode: half to even, as ONNX asks
EDGERT_FLOAT_FN(Reciprocal, 1.0 / x)
EDGERT_FLOAT_FN(Softplus, x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)))
EDGERT_FLOAT_FN(Softsign, x / (1.0 + std::fabs(x)))
EDGERT_FLOAT_FN(Mish, x * std::tanh(x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x))))
#undef EDGERT_FLOAT_FN

struct Erf : FloatMath {
  static constexpr unsigned kAllowed = kNumeric;  // ONNX allows every numeric type
  template <typename C> static C apply(C x, const Params&) {
    return static_cast<C>(std::erf(static_cast<double>(x)));
  }
};

// Shared with the fused epilogues (activation.h).
struct Tanh : FloatMath {
  template <typename C> static C apply(C x, const Params&) { return tanh_of(x); }
};
// Both branches avoid exp overflow for large |x|.
struct Sigmoid : FloatMath {
  static constexpr ActivationKind kActivation = ActivationKind::Sigmoid;
  template <typename C> static C apply(C x, const Params&) { return sigmoid_of(x); }
};
struct Relu : FloatMath {
  static constexpr unsigned kAllowed = kFloats | kSigned;  // ints since opset 14
  template <typename C> static C apply(C x, const Params&) { return relu_of(x); }
};
struct Neg : FloatMath {
  static constexpr unsigned kAllowed = kFloats | kSigned;
  // Through the unsigned type so that -INT_MIN wraps (as numpy does) instead of being undefined.
  template <typename C> static C apply(C x, const Params&) {
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(0u - static_cast<std::make_unsigned_t<decltype(x + 0)>>(x));
    else return -x;
  }
};
struct Abs : FloatMath {
  static constexpr unsigned kAllowed = kNumeric;
  template <typename C> static C apply(C x, const Params&) {
    if constexpr (std::is_unsigned_v<C>) return x;
    else if constexpr (std::is_integral_v<C>) return x < C(0) ? Neg::apply<C>(x, {}) : x;
    else return std::fabs(x);
  }
};
struct Sign : FloatMath {
  static constexpr unsigned kAllowed = kNumeric;
  template <typename C> static C apply(C x, const Params&) {
    if constexpr (std::is_floating_point_v<C>)
      if (std::isnan(x)) return x;
    return x > C(0) ? C(1) : (x < C(0) ? static_cast<C>(-1) : C(0));
  }
};
struct Not : FloatMath {
  static constexpr unsigned kAllowed = kBool;
  template <typename C> static C apply(C x, const Params&) { return !x; }
};
// The cast back to C drops the bits that integer promotion adds to narrow types.
struct BitwiseNot : FloatMath {
  static constexpr unsigned kAllowed = kSigned | kUnsigned;
  template <typename C> static C apply(C x, const Params&) { return static_cast<C>(~x); }
};

struct IsNaN : FloatMath {
  static constexpr bool kBoolOutput = true;
  template <typename C> static bool apply(C x, const Params&) { return std::isnan(x); }
};
struct IsInf : FloatMath {
  static constexpr bool kBoolOutput = true;
  static void init(const Attributes& a, Params& p) {
    p.p[0] = static_cast<float>(a.get_int("detect_positive", 1));
    p.p[1] = static_cast<float>(a.get_int("detect_negative", 1));
  }
  template <typename C> static bool apply(C x, const Params& p) {
    return std::isinf(x) && (x > 0 ? p.p[0] != 0 : p.p[1] != 0);
  }
};

// Activations with attributes. Those with exp are evaluated in double (expm1 avoids the
// cancellation of exp(x) - 1), which is more accurate than the float32 numpy reference: expect
// differences of about one float32 ulp of exp(x) against the ONNX test outputs.
struct Elu : FloatMath {
  static void init(const Attributes& a, Params& p) { p.p[0] = a.get_float("alpha", 1.0f); }
  template <typename C> static C apply(C x, const Params& p) {
    return x >= C(0) ? x : static_cast<C>(p.p[0] * std::expm1(static_cast<double>(x)));
  }
};
struct Selu : FloatMath {
  static void init(const Attributes& a, Params& p) {
    p.p[0] = a.get_float("alpha", 1.67326319217681884765625f);
    p.p[1] = a.get_float("gamma", 1.05070102214813232421875f);
  }
  template <typename C> static C apply(C x, const Params& p) {
    double v = static_cast<double>(x), alpha = p.p[0], gamma = p.p[1];
    return static_cast<C>(v > 0 ? gamma * v : gamma * alpha * std::expm1(v));
  }
};
struct Celu : FloatMath {
  static void init(const Attributes& a, Params& p) { p.p[0] = a.get_float("alpha", 1.0f); }
  template <typename C> static C apply(C x, const Params& p) {
    double v = static_cast<double>(x), alpha = p.p[0];
    return static_cast<C>(std::max(0.0, v) + std::min(0.0, alpha * std::expm1(v / alpha)));
  }
};
struct LeakyRelu : FloatMath {
  static void init(const Attributes& a, Params& p) { p.p[0] = a.get_float("alpha", 0.01f); }
  template <typename C> static C apply(C x, const Params& p) { return leaky_relu_of(x, p.p[0]); }
};
struct HardSigmoid : FloatMath {
  static constexpr ActivationKind kActivation = ActivationKind::HardSigmoid;
  static void init(const Attributes& a, Params& p) {
    p.p[0] = a.get_float("alpha", 0.2f);
    p.p[1] = a.get_float("beta", 0.5f);
  }
  template <typename C> static C apply(C x, const Params& p) { return hard_sigmoid_of(x, p.p[0], p.p[1]); }
};
// x * HardSigmoid(x) with alpha = 1/6, beta = 0.5: the function body ONNX defines.
struct HardSwish : FloatMath {
  static constexpr ActivationKind kActivation = ActivationKind::HardSwish;
  template <typename C> static C apply(C x, const Params&) { return hard_swish_of(x); }
};
struct ThresholdedRelu : FloatMath {
  static void init(const Attributes& a, Params& p) { p.p[0] = a.get_float("alpha", 1.0f); }
  template <typename C> static C apply(C x, const Params& p) { return x > static_cast<C>(p.p[0]) ? x : C(0); }
};
struct Shrink : FloatMath {
  static constexpr unsigned kAllowed = kNumeric;
  static void init(const Attributes& a, Params& p) {
    p.p[0] = a.get_float("lambd", 0.5f);
    p.p[1] = a.get_float("bias", 0.0f);
  }
  template <typename C> static C apply(C x, const Params& p) {
    double v = static_cast<double>(x), lambd = p.p[0], bias = p.p[1];
    return static_cast<C>(v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0));
  }
};
// x * sigmoid(alpha * x) (opset 24); sigmoid in double so float32 rounds once at the end.
struct Swish : FloatMath {
  static void init(const Attributes& a, Params& p) { p.p[0] = a.get_float("alpha", 1.0f); }
  template <typename C> static C apply(C x, const Params& p) {
    double v = static_cast<double>(x), alpha = p.p[0];
    return static_cast<C>(v / (1.0 + std::exp(-alpha * v)));
  }
};
struct Gelu : FloatMath {
  static constexpr ActivationKind kActivation = ActivationKind::Gelu;
  static void init(const Attributes& a, Params& p) {
    std::string approximate = a.get_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      fail(EDGERT_ERR_INVALID_ARGUMENT, "approximate must be 'none' or 'tanh', got '%s'", approximate.c_str());
    p.p[0] = approximate == "tanh" ? 1.0f : 0.0f;
  }
  template <typename C> static C apply(C c, const Params& p) { return gelu_of(c, p.p[0] != 0); }
};

// Clip: bounds are attributes `min`/`max` before opset 11, optional scalar inputs from 11 on
// (integer types from 12). Bounds are read in execute because their data may be unknown at
// build time. min > max yields max everywhere, as the spec says.
class ClipOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    legacy_ = node.opset < 11;
    dispatch(in[0].dtype, legacy_ ? kFloats : kNumeric, [](auto) {}, "input");
    if (legacy_) {
      Attributes a(&node);
      lo_ = a.get_float("min", -std::numeric_limits<float>::infinity());
      hi_ = a.get_float("max", std::numeric_limits<float>::infinity());
    } else {
      for (int32_t i = 1; i < node.num_inputs && i < 3; ++i) {
        if (!is_present(in[i])) continue;
        if (in[i].dtype != in[0].dtype)
          fail(EDGERT_ERR_SHAPE, "%s has dtype %s, input has %s", i == 1 ? "min" : "max",
               dtype_name(in[i].dtype), dtype_name(in[0].dtype));
        if (numel(in[i]) != 1)
          fail(EDGERT_ERR_SHAPE, "%s must be a scalar, it has shape %s", i == 1 ? "min" : "max",
               shape_string(shape_of(in[i])).c_str());
      }
    }
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    dispatch_only<kNumeric>(in[0].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      C lo, hi;
      if (legacy_) {
        lo = static_cast<C>(lo_);
        hi = static_cast<C>(hi_);
      } else {
        bool has_lo = node.num_inputs > 1 && is_present(in[1]);
        bool has_hi = node.num_inputs > 2 && is_present(in[2]);
        // lowest()/max() of float are finite, which clamps +-inf inputs; use infinities there.
        if constexpr (std::numeric_limits<C>::has_infinity) {
          lo = has_lo ? static_cast<C>(*data_as<T>(in[1])) : -std::numeric_limits<C>::infinity();
          hi = has_hi ? static_cast<C>(*data_as<T>(in[2])) : std::numeric_limits<C>::infinity();
        } else {
          lo = has_lo ? static_cast<C>(*data_as<T>(in[1])) : std::numeric_limits<C>::lowest();
          hi = has_hi ? static_cast<C>(*data_as<T>(in[2])) : std::numeric_limits<C>::max();
        }
      }
      const T* x = data_as<T>(in[0]);
      T* y = data_as<T>(out[0]);
      int64_t n = numel(in[0]);
      // Written so NaN passes through unchanged, like numpy.clip.
      for (int64_t i = 0; i < n; ++i) {
        y[i] = static_cast<T>(clip_of(static_cast<C>(x[i]), lo, hi));
      }
    });
  }

 private:
  bool legacy_ = false;
  float lo_ = 0, hi_ = 0;
};

// Copies input 0 to output 0 byte for byte; any fixed-size dtype.
void copy_input(const edgert_tensor& in, edgert_tensor& out) {
  size_t bytes = static_cast<size_t>(numel(in)) * dtype_size(in.dtype);
  if (bytes && out.data != in.data) std::memcpy(out.data, in.data, bytes);
}

class IdentityOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    if (dtype_size(in[0].dtype) == 0) throw_unsupported_dtype(in[0].dtype, "input");
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    copy_input(in[0], out[0]);
  }
};

// Dropout at inference: output = input and mask = all ones. Training mode (opset 12+ input
// `training_mode`, or is_test=0 before opset 7) with a non-zero ratio needs a random mask;
// ONNX leaves the generator unspecified, so it is refused rather than guessed. Training mode
// with ratio 0 is the identity and is run.

// True when the node is known to train with a non-zero ratio. Values not known yet (build time)
// count as "not training"; prepare and execute check again once they are.
bool dropout_trains(const edgert_node& node, const edgert_tensor* in) {
  if (node.opset < 7) {
    Attributes a(&node);
    return a.get_int("is_test", 0) == 0 && a.get_float("ratio", 0.5f) != 0.0f;
  }
  if (node.opset < 12 || node.num_inputs < 3 || !is_present(in[2]) || !in[2].data) return false;
  if (!*data_as<bool>(in[2])) return false;
  if (node.num_inputs < 2 || !is_present(in[1])) return true;  // default ratio 0.5
  return in[1].data && read_scalar(in[1], "ratio") != 0.0;
}

int32_t dropout_supports(const edgert_node* node, const edgert_tensor* inputs) {
  return dropout_trains(*node, inputs) ? 0 : 1;
}

class DropoutOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    dispatch(in[0].dtype, kFloats, [](auto) {}, "input");
    check_inference(node, in);
    set_output(out[0], in[0].dtype, shape_of(in[0]));
    // The mask is bool from opset 10; before that it has the input's type.
    if (node.num_outputs > 1)
      set_output(out[1], node.opset >= 10 ? EDGERT_DTYPE_BOOL : in[0].dtype, shape_of(in[0]));
  }

  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    check_inference(node, in);  // training_mode/ratio may have had no data at prepare time
    copy_input(in[0], out[0]);
    if (node.num_outputs > 1 && out[1].data) {
      int64_t n = numel(out[1]);
      dispatch_only<kFloats | kBool>(out[1].dtype, [&](auto tag) {
        using M = typename decltype(tag)::type;
        M* mask = data_as<M>(out[1]);
        for (int64_t i = 0; i < n; ++i) mask[i] = static_cast<M>(1.0f);
      }, "mask");
    }
  }

 private:
  static void check_inference(const edgert_node& node, const edgert_tensor* in) {
    if (dropout_trains(node, in))
      fail(EDGERT_ERR_UNSUPPORTED,
           "training-mode Dropout with a non-zero ratio needs a random mask, which this kernel does not generate");
  }
};

// edgert.PointwiseChain (builder's pointwise fusion): a float32 tensor through a list of
// steps in one sweep; attributes `ops` and `params` as builder/src/passes/pointwise_fusion.cpp
// writes them. Each step rounds to float like the op it replaces. In place safe.
class PointwiseChainOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    if (in[0].dtype != EDGERT_DTYPE_FLOAT32)
      fail(EDGERT_ERR_UNSUPPORTED, "input is %s; PointwiseChain runs float32 only", dtype_name(in[0].dtype));
    Attributes attrs(&node);
    std::vector<std::string> ops = attrs.get_strings("ops");
    std::vector<float> params = attrs.get_floats("params");
    if (ops.empty() || params.size() != 2 * ops.size())
      fail(EDGERT_ERR_INVALID_ARGUMENT, "%zu ops need %zu params, got %zu", ops.size(), 2 * ops.size(), params.size());
    steps_.clear();
    for (size_t i = 0; i < ops.size(); ++i) {
      Step s;
      s.constant = params[2 * i];
      const std::string& op = ops[i];
      s.binary = op == "Add" ? 1 : op == "Sub" ? 2 : op == "Mul" ? 3 : op == "Div" ? 4 : op == "RSub" ? 5
                 : op == "RDiv" ? 6 : 0;
      if (!s.binary) s.activation = Activation::parse(op, &params[2 * i], 2);
      steps_.push_back(s);
    }
    set_output(out[0], in[0].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const float* x = data_as<float>(in[0]);
    float* y = data_as<float>(out[0]);
    const int64_t n = numel(in[0]);
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i];
      for (const Step& s : steps_) {
        switch (s.binary) {
          case 0: v = s.activation.apply(v); break;
          case 1: v = v + s.constant; break;
          case 2: v = v - s.constant; break;
          case 3: v = v * s.constant; break;
          case 4: v = v / s.constant; break;
          case 5: v = s.constant - v; break;
          default: v = s.constant / v; break;
        }
      }
      y[i] = v;
    }
  }

 private:
  struct Step {
    int binary = 0;  // 0: activation; 1..6: Add, Sub, Mul, Div, RSub, RDiv by `constant`
    float constant = 0;
    Activation activation;
  };
  std::vector<Step> steps_;
};

}  // namespace

void register_elementwise_unary_kernels(KernelRegistry& r) {
  r.add<UnaryOp<Abs>>("Abs", "ref-abs");
  r.add<UnaryOp<Acos>>("Acos", "ref-acos");
  r.add<UnaryOp<Acosh>>("Acosh", "ref-acosh");
  r.add<UnaryOp<Asin>>("Asin", "ref-asin");
  r.add<UnaryOp<Asinh>>("Asinh", "ref-asinh");
  r.add<UnaryOp<Atan>>("Atan", "ref-atan");
  r.add<UnaryOp<Atanh>>("Atanh", "ref-atanh");
  r.add<UnaryOp<Ceil>>("Ceil", "ref-ceil");
  r.add<UnaryOp<Cos>>("Cos", "ref-cos");
  r.add<UnaryOp<Cosh>>("Cosh", "ref-cosh");
  r.add<UnaryOp<Erf>>("Erf", "ref-erf");
  r.add<UnaryOp<Exp>>("Exp", "ref-exp");
  r.add<UnaryOp<Floor>>("Floor", "ref-floor");
  r.add<UnaryOp<Log>>("Log", "ref-log");
  r.add<UnaryOp<Neg>>("Neg", "ref-neg");
  r.add<UnaryOp<Not>>("Not", "ref-not");
  r.add<UnaryOp<BitwiseNot>>("BitwiseNot", "ref-bitwise-not");
  r.add<UnaryOp<Reciprocal>>("Reciprocal", "ref-reciprocal");
  r.add<UnaryOp<Relu>>("Relu", "ref-relu");
  r.add<UnaryOp<Round>>("Round", "ref-round");
  r.add<UnaryOp<Sigmoid>>("Sigmoid", "ref-sigmoid", nullptr, activation_tactics);
  r.add<UnaryOp<Sign>>("Sign", "ref-sign");
  r.add<UnaryOp<Sin>>("Sin", "ref-sin");
  r.add<UnaryOp<Sinh>>("Sinh", "ref-sinh");
  r.add<UnaryOp<Softplus>>("Softplus", "ref-softplus");
  r.add<UnaryOp<Softsign>>("Softsign", "ref-softsign");
  r.add<UnaryOp<Sqrt>>("Sqrt", "ref-sqrt");
  r.add<UnaryOp<Tan>>("Tan", "ref-tan");
  r.add<UnaryOp<Tanh>>("Tanh", "ref-tanh");
  r.add<UnaryOp<IsNaN>>("IsNaN", "ref-is-nan");
  r.add<UnaryOp<IsInf>>("IsInf", "ref-is-inf");
  r.add<UnaryOp<Elu>>("Elu", "ref-elu");
  r.add<UnaryOp<Selu>>("Selu", "ref-selu");
  r.add<UnaryOp<Celu>>("Celu", "ref-celu");
  r.add<UnaryOp<LeakyRelu>>("LeakyRelu", "ref-leaky-relu");
  r.add<UnaryOp<HardSigmoid>>("HardSigmoid", "ref-hard-sigmoid", nullptr, activation_tactics);
  r.add<UnaryOp<HardSwish>>("HardSwish", "ref-hard-swish", nullptr, activation_tactics);
  r.add<UnaryOp<ThresholdedRelu>>("ThresholdedRelu", "ref-thresholded-relu");
  r.add<UnaryOp<Shrink>>("Shrink", "ref-shrink");
  r.add<UnaryOp<Mish>>("Mish", "ref-mish");
  r.add<UnaryOp<Gelu>>("Gelu", "ref-gelu", nullptr, activation_tactics);
  r.add<UnaryOp<Swish>>("Swish", "ref-swish");
  r.add<ClipOp>("Clip", "ref-clip");
  r.add<IdentityOp>("Identity", "ref-identity");
  r.add<DropoutOp>("Dropout", "ref-dropout", dropout_supports);
  r.add_in_domain<PointwiseChainOp>("edgert", "PointwiseChain", "ref-pointwise-chain");
}

}  // namespace edgert::cpu
