#include "tensor_compare.h"

#include <cmath>
#include <cstring>

#include "edgert/narrow_types.h"
#include "error.h"

namespace edgert::cli {
namespace {

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu, bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      exponent = 113;
      while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
double load(const HostTensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}

}  // namespace

double element_as_double(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case EDGERT_DTYPE_FLOAT32: return load<float>(t, i);
    case EDGERT_DTYPE_FLOAT64: return load<double>(t, i);
    case EDGERT_DTYPE_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, t.data.data() + i * 2, 2);
      return half_to_float(h);
    }
    case EDGERT_DTYPE_BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, t.data.data() + i * 2, 2);
      uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case EDGERT_DTYPE_INT8: return load<int8_t>(t, i);
    case EDGERT_DTYPE_INT16: return load<int16_t>(t, i);
    case EDGERT_DTYPE_INT32: return load<int32_t>(t, i);
    case EDGERT_DTYPE_INT64: return load<int64_t>(t, i);
    case EDGERT_DTYPE_UINT8: return load<uint8_t>(t, i);
    case EDGERT_DTYPE_BOOL: return load<uint8_t>(t, i) != 0;
    case EDGERT_DTYPE_UINT16: return load<uint16_t>(t, i);
    case EDGERT_DTYPE_UINT32: return load<uint32_t>(t, i);
    case EDGERT_DTYPE_UINT64: return load<uint64_t>(t, i);
    default:
      if (edgert_dtype_is_narrow_float(t.dtype)) return edgert_narrow_float_to_double(t.dtype, t.data[i]);
      if (edgert_dtype_is_narrow_int(t.dtype)) return static_cast<double>(edgert_narrow_int_value(t.dtype, t.data[i]));
      return 0;
  }
}

Comparison compare_tensors(const HostTensor& actual, const HostTensor& expected, double rtol, double atol) {
  Comparison c;
  if (actual.dtype != expected.dtype) {
    c.problem = std::string("dtype ") + dtype_name(actual.dtype) + ", expected " + dtype_name(expected.dtype);
    return c;
  }
  if (actual.shape != expected.shape) {
    c.problem = "shape " + shape_string(actual.shape) + ", expected " + shape_string(expected.shape);
    return c;
  }
  // Narrow floats are compared exactly: one step of a float8 is far beyond any tolerance.
  bool integral = actual.dtype != EDGERT_DTYPE_FLOAT32 && actual.dtype != EDGERT_DTYPE_FLOAT64 &&
                  actual.dtype != EDGERT_DTYPE_FLOAT16 && actual.dtype != EDGERT_DTYPE_BFLOAT16;
  double diff_sq = 0, ref_sq = 0, act_sq = 0, dot = 0;
  int64_t mismatches = 0, first_bad = -1;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = element_as_double(actual, i), b = element_as_double(expected, i);
    bool ok;
    if (std::isnan(a) || std::isnan(b)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (std::isinf(a) || std::isinf(b)) {
      ok = a == b;
    } else {
      double err = std::fabs(a - b);
      c.max_abs_error = std::max(c.max_abs_error, err);
      ok = integral ? a == b : err <= atol + rtol * std::fabs(b);
      diff_sq += err * err;
      ref_sq += b * b;
      act_sq += a * a;
      dot += a * b;
    }
    if (!ok && mismatches++ == 0) first_bad = i;
  }
  c.relative_l2_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  c.cosine_similarity = act_sq > 0 && ref_sq > 0 ? dot / std::sqrt(act_sq * ref_sq) : (act_sq == ref_sq ? 1 : 0);
  c.match = mismatches == 0;
  if (!c.match) {
    char buffer[256];
    std::snprintf(buffer, sizeof buffer, "%lld of %lld elements differ (first at %lld: %.9g vs expected %.9g), max abs error %.3g",
                  static_cast<long long>(mismatches), static_cast<long long>(actual.numel()),
                  static_cast<long long>(first_bad), element_as_double(actual, first_bad),
                  element_as_double(expected, first_bad), c.max_abs_error);
    c.problem = buffer;
  }
  return c;
}

}  // namespace edgert::cli
