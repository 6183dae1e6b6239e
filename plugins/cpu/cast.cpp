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
//  - to or from the narrow types (float8, float8e8m0, float4, 4- and 2-bit integers; one byte
//    per element in memory, edgert/narrow_types.h): through double, which holds every value of
//    every type exactly, so a conversion rounds once. Float to a narrow integer truncates and
//    wraps as for the wide integers; float8 saturates to its largest finite value unless
//    `saturate` is 0 (then infinity, or NaN where the format has none); float4 always
//    saturates; float8e8m0 rounds by `round_mode` (up, down or nearest).
//
// BitCast (opset 26) reinterprets the bytes of each element as another type of the same size.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "edgert/narrow_types.h"
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

// How a node rounds: bfloat16 by opset, the narrow floats by its attributes.
struct CastRules {
  Bf16Rounding bf16 = Bf16Rounding::NearestEven;
  bool saturate = true;
  edgert_e8m0_rounding e8m0 = EDGERT_E8M0_ROUND_UP;
};

CastRules cast_rules_of(const edgert_node& node) {
  Attributes a(&node);
  CastRules rules;
  rules.bf16 = bf16_rounding_of(node);
  rules.saturate = a.get_int("saturate", 1) != 0;
  const std::string mode = a.get_string("round_mode", "up");
  if (mode == "up") rules.e8m0 = EDGERT_E8M0_ROUND_UP;
  else if (mode == "down") rules.e8m0 = EDGERT_E8M0_ROUND_DOWN;
  else if (mode == "nearest") rules.e8m0 = EDGERT_E8M0_ROUND_NEAREST;
  else fail(EDGERT_ERR_INVALID_ARGUMENT, "round_mode is '%s', expected 'up', 'down' or 'nearest'", mode.c_str());
  return rules;
}

double narrow_value(edgert_dtype dtype, uint8_t code) {
  if (edgert_dtype_is_narrow_int(dtype)) return static_cast<double>(edgert_narrow_int_value(dtype, code));
  return edgert_narrow_float_to_double(dtype, code);
}

uint8_t narrow_code(edgert_dtype dtype, double v, const CastRules& rules) {
  if (edgert_dtype_is_narrow_int(dtype))
    return edgert_narrow_int_from_int64(dtype, convert<int64_t, double>(v, rules.bf16), 0);
  if (dtype == EDGERT_DTYPE_FLOAT8E8M0) return edgert_e8m0_from_float(static_cast<float>(v), rules.saturate, rules.e8m0);
  edgert_minifloat format{};
  edgert_minifloat_of(dtype, &format);
  return edgert_minifloat_from_double(&format, v, rules.saturate);
}

// Casts where either side is a narrow type.
void cast_narrow(const edgert_tensor& in, edgert_tensor& out, int64_t n, const CastRules& rules) {
  const bool narrow_in = edgert_dtype_is_narrow(in.dtype), narrow_out = edgert_dtype_is_narrow(out.dtype);
  if (narrow_in && narrow_out) {
    const uint8_t* x = data_as<uint8_t>(in);
    uint8_t* y = data_as<uint8_t>(out);
    for (int64_t i = 0; i < n; ++i) y[i] = narrow_code(out.dtype, narrow_value(in.dtype, x[i]), rules);
  } else if (narrow_out) {
    dispatch(in.dtype, kAll, [&](auto src) {
      using S = typename decltype(src)::type;
      const S* x = data_as<S>(in);
      uint8_t* y = data_as<uint8_t>(out);
      for (int64_t i = 0; i < n; ++i)
        y[i] = narrow_code(out.dtype, static_cast<double>(static_cast<compute_t<S>>(x[i])), rules);
    }, "input");
  } else {
    dispatch(out.dtype, kAll, [&](auto dst) {
      using D = typename decltype(dst)::type;
      const uint8_t* x = data_as<uint8_t>(in);
      D* y = data_as<D>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = convert<D, double>(narrow_value(in.dtype, x[i]), rules.bf16);
    }, "target type");
  }
}

void cast_tensor(const edgert_tensor& in, edgert_tensor& out, const CastRules& rules) {
  int64_t n = numel(in);
  if (n == 0) return;
  if (in.dtype == out.dtype) {
    std::memcpy(out.data, in.data, static_cast<size_t>(n) * dtype_size(in.dtype));
    return;
  }
  if (edgert_dtype_is_narrow(in.dtype) || edgert_dtype_is_narrow(out.dtype)) return cast_narrow(in, out, n, rules);
  const Bf16Rounding bf16_rounding = rules.bf16;
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
    cast_rules_of(node);  // checks round_mode now rather than at the first run
    set_output(out[0], to, shape_of(in[0]));
  }
  void execute(const edgert_node& node, const edgert_tensor* in, edgert_tensor* out, void*) override {
    cast_tensor(in[0], out[0], cast_rules_of(node));
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
    cast_tensor(in[0], out[0], cast_rules_of(node));
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
    // Narrow types sit a byte per element in memory; their bits are what BitCast is about.
    if (edgert_dtype_is_narrow(to) || edgert_dtype_is_narrow(in[0].dtype))
      fail(EDGERT_ERR_UNSUPPORTED, "BitCast between %s and %s is not supported (4- and 2-bit and float8 types)",
           dtype_name(in[0].dtype), dtype_name(to));
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
