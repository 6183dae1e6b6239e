// Element types as C++ types, and dispatch from a runtime edgert_dtype to a typed lambda.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgert/float16.h"
#include "edgert/types.h"

namespace edgert::cpu {

// IEEE binary16. Arithmetic goes through float: reference kernels favour exactness of
// rounding at the end over speed.
struct float16 {
  uint16_t bits = 0;
  float16() = default;
  float16(float value) : bits(from_float(value)) {}  // NOLINT: implicit like a builtin float
  operator float() const { return to_float(bits); }   // NOLINT

  static float to_float(uint16_t h) { return edgert_half_to_float(h); }
  // Round to nearest even, as numpy and ONNX Runtime do.
  static uint16_t from_float(float value) { return edgert_float_to_half(value); }
};

// bfloat16: the top half of a float32, rounded to nearest even.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float value) : bits(from_float(value)) {}  // NOLINT
  operator float() const {                             // NOLINT
    uint32_t x = static_cast<uint32_t>(bits) << 16;
    float out;
    std::memcpy(&out, &x, sizeof out);
    return out;
  }
  static uint16_t from_float(float value) {
    uint32_t x;
    std::memcpy(&x, &value, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
  }
};

template <typename T>
inline constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// The type arithmetic on T is done in: float for the 16-bit floats, T itself otherwise.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>, float, T>;

size_t dtype_size(edgert_dtype dtype);
const char* dtype_name(edgert_dtype dtype);

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
constexpr edgert_dtype dtype_of();
template <> constexpr edgert_dtype dtype_of<float>() { return EDGERT_DTYPE_FLOAT32; }
template <> constexpr edgert_dtype dtype_of<double>() { return EDGERT_DTYPE_FLOAT64; }
template <> constexpr edgert_dtype dtype_of<float16>() { return EDGERT_DTYPE_FLOAT16; }
template <> constexpr edgert_dtype dtype_of<bfloat16>() { return EDGERT_DTYPE_BFLOAT16; }
template <> constexpr edgert_dtype dtype_of<int8_t>() { return EDGERT_DTYPE_INT8; }
template <> constexpr edgert_dtype dtype_of<int16_t>() { return EDGERT_DTYPE_INT16; }
template <> constexpr edgert_dtype dtype_of<int32_t>() { return EDGERT_DTYPE_INT32; }
template <> constexpr edgert_dtype dtype_of<int64_t>() { return EDGERT_DTYPE_INT64; }
template <> constexpr edgert_dtype dtype_of<uint8_t>() { return EDGERT_DTYPE_UINT8; }
template <> constexpr edgert_dtype dtype_of<uint16_t>() { return EDGERT_DTYPE_UINT16; }
template <> constexpr edgert_dtype dtype_of<uint32_t>() { return EDGERT_DTYPE_UINT32; }
template <> constexpr edgert_dtype dtype_of<uint64_t>() { return EDGERT_DTYPE_UINT64; }
template <> constexpr edgert_dtype dtype_of<bool>() { return EDGERT_DTYPE_BOOL; }

// Sets of dtypes a kernel accepts; dispatch calls fn(TypeTag<T>{}) for the matching T and
// throws "unsupported dtype" (via the caller-supplied handler) otherwise.
enum DtypeSet : unsigned {
  kFloats = 1u << 0,    // float32, float64, float16, bfloat16
  kSigned = 1u << 1,    // int8..int64
  kUnsigned = 1u << 2,  // uint8..uint64
  kBool = 1u << 3,
  kNumeric = kFloats | kSigned | kUnsigned,
  kAll = kNumeric | kBool,
};

[[noreturn]] void throw_unsupported_dtype(edgert_dtype dtype, const char* what);

template <typename Fn>
decltype(auto) dispatch(edgert_dtype dtype, unsigned allowed, Fn&& fn, const char* what = "tensor") {
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT32: if (allowed & kFloats) return fn(TypeTag<float>{}); break;
    case EDGERT_DTYPE_FLOAT64: if (allowed & kFloats) return fn(TypeTag<double>{}); break;
    case EDGERT_DTYPE_FLOAT16: if (allowed & kFloats) return fn(TypeTag<float16>{}); break;
    case EDGERT_DTYPE_BFLOAT16: if (allowed & kFloats) return fn(TypeTag<bfloat16>{}); break;
    case EDGERT_DTYPE_INT8: if (allowed & kSigned) return fn(TypeTag<int8_t>{}); break;
    case EDGERT_DTYPE_INT16: if (allowed & kSigned) return fn(TypeTag<int16_t>{}); break;
    case EDGERT_DTYPE_INT32: if (allowed & kSigned) return fn(TypeTag<int32_t>{}); break;
    case EDGERT_DTYPE_INT64: if (allowed & kSigned) return fn(TypeTag<int64_t>{}); break;
    case EDGERT_DTYPE_UINT8: if (allowed & kUnsigned) return fn(TypeTag<uint8_t>{}); break;
    case EDGERT_DTYPE_UINT16: if (allowed & kUnsigned) return fn(TypeTag<uint16_t>{}); break;
    case EDGERT_DTYPE_UINT32: if (allowed & kUnsigned) return fn(TypeTag<uint32_t>{}); break;
    case EDGERT_DTYPE_UINT64: if (allowed & kUnsigned) return fn(TypeTag<uint64_t>{}); break;
    case EDGERT_DTYPE_BOOL: if (allowed & kBool) return fn(TypeTag<bool>{}); break;
    default: break;
  }
  throw_unsupported_dtype(dtype, what);
}

template <typename T>
constexpr unsigned dtype_set_of() {
  if constexpr (std::is_same_v<T, bool>) return kBool;
  else if constexpr (is_float_like_v<T>) return kFloats;
  else if constexpr (std::is_signed_v<T>) return kSigned;
  else return kUnsigned;
}

// Like dispatch(), but compiles fn only for the dtypes in kAllowed: dispatch() instantiates its
// lambda for all 13 dtypes whatever `allowed` says (the check is at run time), which costs
// compile time and code size in kernels that are only valid for a few types.
template <unsigned kAllowed, typename Fn>
void dispatch_only(edgert_dtype dtype, Fn&& fn, const char* what = "tensor") {
  dispatch(dtype, kAllowed, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr ((dtype_set_of<T>() & kAllowed) != 0) fn(tag);
  }, what);
}

}  // namespace edgert::cpu
