// Cast and CastLike between every numeric dtype and bool (strings are not supported).
//
// Conversion rules (ONNX 1.12 semantics, matching ONNX Runtime of that release):
//  - float -> integer: C-style truncation toward zero. ONNX leaves out-of-range values
//    undefined; here the truncated value wraps modulo 2^bits (what numpy and ONNX Runtime give
//    on x86 for e.g. -1.0 -> uint8 = 255), values beyond the int64/uint64 range saturate and
//    NaN becomes 0, so the kernel never hits C++ undefined behaviour.
//  - anything -> bool: x != 0 (NaN is true); bool -> anything: 0 or 1.
//  - integer -> integer: two's-complement wrap, like static_cast / numpy astype.
//  - -> float16: round to nearest even, in one rounding step even from double.
//  - -> bfloat16: round to nearest even, in one rounding step even from double (NaN stays NaN),
//    from opset 19 on, as the ONNX reference and test data of those releases do. Nodes of older
//    opsets truncate float32/float64 to the top half of the float32 bits instead, which is what
//    ONNX 1.12's test data and ONNX Runtime of that era do (integers round in both cases).
//
// BitCast (opset 26) reinterprets the bytes of each element as another type of the same size.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernel.h"

namespace edgert::cpu {
namespace {

// Rounds a double to float with round-to-odd: the float's last mantissa bit records whether
// anything was lost, so a second rounding to a narrower float (half, bfloat16) is as correct
// as rounding the double directly.
float to_float_round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d))
    f = std::nextafter(f, 0.0f);  // make it the truncation of d ...
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;  // ... and mark it inexact
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// How float32/float64 become bfloat16: rounded to nearest even from opset 19 (where Cast's
// conversion rules were rewritten with the float8 types, and what the current node tests and
// every runtime do), truncated before it, as the node tests of those opsets were generated (ONNX
// 1.12's test_cast_FLOAT_to_BFLOAT16 holds truncated values; rounding misses 5 of its 12).
enum class Bf16Rounding { NearestEven, Truncate };

Bf16Rounding bf16_rounding_of(const edgert_node& node) {
  return node.opset >= 19 ? Bf16Rounding::NearestEven : Bf16Rounding::Truncate;
}

template <typename D, typename S>
D convert(S x, Bf16Rounding bf16_rounding) {
  using CS = compute_t<S>;
  CS v = static_cast<CS>(x);
  if constexpr (std::is_same_v<D, bool>) {
    return v != CS(0);  // NaN compares unequal, so it becomes true
  } else if constexpr (std::is_same_v<D, float16>) {
    if constexpr (std::is_same_v<CS, float>) return float16(v);
    else return float16(to_float_round_to_odd(static_cast<double>(v)));
  } else if constexpr (std::is_same_v<D, bfloat16>) {
    if constexpr (std::is_floating_point_v<CS>) {
      if (bf16_rounding == Bf16Rounding::Truncate) {
        float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        bfloat16 out;
        out.bits = static_cast<uint16_t>(bits >> 16);
        if (std::isnan(f)) out.bits |= 0x40u;  // a NaN whose payload sat in the low half stays NaN
        return out;
      }
    }
    // From double (or a wide integer), round-to-odd first so that the second rounding (to
    // bfloat16) is as correct as one.
    if constexpr (std::is_same_v<CS, float>) return bfloat16(v);
    else return bfloat16(to_float_round_to_odd(static_cast<double>(v)));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<CS>) {
    if (std::isnan(v)) return D(0);
    // long double holds every 64-bit integer bound exactly.
    const long double two63 = 9223372036854775808.0L;
    long double t = std::trunc(static_cast<long double>(v));
    if (t >= -two63 && t < two63) return static_cast<D>(static_cast<int64_t>(t));
    if constexpr (std::is_unsigned_v<D>)
      if (t >= 0 && t < 2 * two63) return static_cast<D>(static_cast<uint64_t>(t));
    return t < 0 ? std::numeric_limits<D>::lowest() : std::numeric_limits<D>::max();
  } else {
    return static_cast<D>(v);
  }
}

template <typename D, typename S>
void cast_loop(const S* x, D* y, int64_t n, Bf16Rounding bf16_rounding) {
  for (int64_t i = 0; i < n; ++i) y[i] = convert<D, S>(x[i], bf16_rounding);
}

void cast_tensor(const edgert_tensor& in, edgert_tensor& out, Bf16Rounding bf16_rounding) {
  int64_t n = numel(in);
  if (n == 0) return;
  if (in.dtype == out.dtype) {
    std::memcpy(out.data, in.data, static_cast<size_t>(n) * dtype_size(in.dtype));
    return;
  }
  dispatch(in.dtype, kAll, [&](auto src) {
    using S = typename decltype(src)::type;
    dispatch(out.dtype, kAll, [&](auto dst) {
      using D = typename decltype(dst)::type;
      cast_loop<D, S>(data_as<S>(in), data_as<D>(out), n, bf16_rounding);
    }, "target type");
  }, "input");
}

bool castable(edgert_dtype dtype) {
  return dtype != EDGERT_DTYPE_STRING && dtype != EDGERT_DTYPE_UNDEFINED && dtype_size(dtype) != 0;
}

class CastOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes a(&node);
    if (!a.has("to")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'to' is required");
    auto to = static_cast<edgert_dtype>(a.get_int("to", 0));
    if (!castable(in[0].dtype)) throw_unsupported_dtype(in[0].dtype, "input");
    if (!castable(to)) throw_unsupported_dtype(to, "target type 'to'");
    set_output(out[0], to, shape_of(in[0]));
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    cast_tensor(in[0], out[0], bf16_rounding_of(node));
  }
};

class CastLikeOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    if (!castable(in[0].dtype)) throw_unsupported_dtype(in[0].dtype, "input");
    if (!castable(in[1].dtype)) throw_unsupported_dtype(in[1].dtype, "target_type");
    set_output(out[0], in[1].dtype, shape_of(in[0]));
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    cast_tensor(in[0], out[0], bf16_rounding_of(node));
  }
};

class BitCastOp : public Op {
 public:
  void prepare(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out,
               edgert_prepare_info&) override {
    Attributes a(&node);
    if (!a.has("to")) fail(EDGERT_ERR_INVALID_ARGUMENT, "attribute 'to' is required");
    auto to = static_cast<edgert_dtype>(a.get_int("to", 0));
    if (!castable(in[0].dtype)) throw_unsupported_dtype(in[0].dtype, "input");
    if (!castable(to)) throw_unsupported_dtype(to, "target type 'to'");
    if (dtype_size(to) != dtype_size(in[0].dtype))
      fail(EDGERT_ERR_INVALID_ARGUMENT, "'to' is %s (%zu bytes) but the input is %s (%zu bytes); BitCast needs equal sizes",
           dtype_name(to), dtype_size(to), dtype_name(in[0].dtype), dtype_size(in[0].dtype));
    set_output(out[0], to, shape_of(in[0]));
  }
  // Tensors are stored little endian, as BitCast requires, on every target this plugin builds for.
  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    size_t bytes = static_cast<size_t>(numel(in[0])) * dtype_size(in[0].dtype);
    if (bytes && out[0].data != in[0].data) std::memcpy(out[0].data, in[0].data, bytes);
  }
};

// Strings are refused up front so the builder can report the node as unsupported.
int32_t cast_supports(const edgert_node* node, const edgert_tensor* inputs) {
  // UNDEFINED: the builder has not inferred the input's dtype; prepare checks it at run time.
  if (inputs[0].dtype != EDGERT_DTYPE_UNDEFINED && !castable(inputs[0].dtype)) return 0;
  int64_t to = Attributes(node).get_int("to", 0);
  return castable(static_cast<edgert_dtype>(to)) ? 1 : 0;
}

int32_t cast_like_supports(const edgert_node* node, const edgert_tensor* inputs) {
  auto ok = [](edgert_dtype d) { return d == EDGERT_DTYPE_UNDEFINED || castable(d); };
  return node->num_inputs >= 2 && ok(inputs[0].dtype) && ok(inputs[1].dtype) ? 1 : 0;
}

}  // namespace

void register_cast_kernels(KernelRegistry& r) {
  r.add<CastOp>("Cast", "ref-cast", cast_supports);
  r.add<CastLikeOp>("CastLike", "ref-cast-like", cast_like_supports);
  r.add<BitCastOp>("BitCast", "ref-bitcast", cast_supports);
}

}  // namespace edgert::cpu
