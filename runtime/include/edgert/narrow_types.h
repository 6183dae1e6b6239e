/*
 * The element types narrower than a byte's worth of range that ONNX added from opset 19 on:
 * float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float8e8m0 (a power of two, for block scales),
 * float4e2m1, and the 4- and 2-bit integers.
 *
 * In memory edgert holds each of them in a byte of its own: the integers sign- or zero-extended
 * (an int4 -3 is the int8 -3), the floats as their code in the low bits. Tensors cross the API
 * and the plugin ABI that way. ONNX files pack the 4- and 2-bit types (first element in the
 * lowest bits); the importer unpacks them and the tensor writers pack them again. One element
 * per byte keeps every kernel that moves bytes (Reshape, Transpose, Gather, Concat, ...) right
 * for these types with no change, and these types are rare enough on the CPU that the packed
 * form's memory saving is not worth a second indexing scheme in every kernel.
 *
 * The conversions follow the ONNX reference (ml_dtypes): round to nearest even; with
 * `saturate`, values beyond the largest finite value (and infinities) become that value,
 * without it they become infinity where the format has one and NaN where it does not.
 */
#ifndef EDGERT_NARROW_TYPES_H
#define EDGERT_NARROW_TYPES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "edgert/types.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline int edgert_dtype_is_narrow_float(int dtype) {
  return dtype == EDGERT_DTYPE_FLOAT8E4M3FN || dtype == EDGERT_DTYPE_FLOAT8E4M3FNUZ ||
         dtype == EDGERT_DTYPE_FLOAT8E5M2 || dtype == EDGERT_DTYPE_FLOAT8E5M2FNUZ ||
         dtype == EDGERT_DTYPE_FLOAT8E8M0 || dtype == EDGERT_DTYPE_FLOAT4E2M1;
}

static inline int edgert_dtype_is_narrow_int(int dtype) {
  return dtype == EDGERT_DTYPE_INT4 || dtype == EDGERT_DTYPE_UINT4 || dtype == EDGERT_DTYPE_INT2 ||
         dtype == EDGERT_DTYPE_UINT2;
}

static inline int edgert_dtype_is_narrow(int dtype) {
  return edgert_dtype_is_narrow_float(dtype) || edgert_dtype_is_narrow_int(dtype);
}

/* Bits an element takes in an ONNX file: 4 or 2 for the packed types, 8 for the rest. */
static inline int edgert_dtype_packed_bits(int dtype) {
  switch (dtype) {
    case EDGERT_DTYPE_INT4: case EDGERT_DTYPE_UINT4: case EDGERT_DTYPE_FLOAT4E2M1: return 4;
    case EDGERT_DTYPE_INT2: case EDGERT_DTYPE_UINT2: return 2;
    default: return 8;
  }
}

/* The in-memory byte of element `index` of a packed ONNX buffer. */
static inline uint8_t edgert_unpack_element(int dtype, const uint8_t* packed, uint64_t index) {
  const int bits = edgert_dtype_packed_bits(dtype);
  if (bits == 8) return packed[index];
  const uint64_t per_byte = 8 / (uint64_t)bits;
  const unsigned mask = (1u << bits) - 1u;
  unsigned v = (packed[index / per_byte] >> ((index % per_byte) * (uint64_t)bits)) & mask;
  if (dtype == EDGERT_DTYPE_INT4 || dtype == EDGERT_DTYPE_INT2) { /* sign-extend */
    const unsigned sign = 1u << (bits - 1);
    return (uint8_t)(int8_t)((int)(v ^ sign) - (int)sign);
  }
  return (uint8_t)v;
}

/* Bytes `count` elements take packed. */
static inline uint64_t edgert_packed_bytes(int dtype, uint64_t count) {
  const uint64_t per_byte = 8 / (uint64_t)edgert_dtype_packed_bits(dtype);
  return (count + per_byte - 1) / per_byte;
}

/* Packs `count` in-memory elements into edgert_packed_bytes(dtype, count) bytes. */
static inline void edgert_pack_elements(int dtype, const uint8_t* elements, uint64_t count, uint8_t* packed) {
  const int bits = edgert_dtype_packed_bits(dtype);
  if (bits == 8) {
    memcpy(packed, elements, count);
    return;
  }
  const uint64_t per_byte = 8 / (uint64_t)bits;
  const unsigned mask = (1u << bits) - 1u;
  memset(packed, 0, edgert_packed_bytes(dtype, count));
  for (uint64_t i = 0; i < count; ++i)
    packed[i / per_byte] |= (uint8_t)((elements[i] & mask) << ((i % per_byte) * (uint64_t)bits));
}

/* A minifloat format: sign, exponent and mantissa bits, and how it spells NaN and infinity. */
typedef enum edgert_minifloat_kind {
  EDGERT_MINIFLOAT_IEEE, /* all-ones exponent: infinity (mantissa 0) or NaN (e5m2) */
  EDGERT_MINIFLOAT_FN,   /* no infinity; all-ones exponent and mantissa is NaN (e4m3fn) */
  EDGERT_MINIFLOAT_FNUZ, /* no infinity, no negative zero; 0x80 is NaN (the fnuz types) */
  EDGERT_MINIFLOAT_FINITE /* no infinity, no NaN (float4e2m1) */
} edgert_minifloat_kind;

typedef struct edgert_minifloat {
  int exponent_bits, mantissa_bits, bias;
  edgert_minifloat_kind kind;
  double max; /* largest finite value */
} edgert_minifloat;

static inline int edgert_minifloat_of(int dtype, edgert_minifloat* f) {
  int e, m, bias;
  edgert_minifloat_kind kind;
  double max;
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT8E4M3FN: e = 4; m = 3; bias = 7; kind = EDGERT_MINIFLOAT_FN; max = 448.0; break;
    case EDGERT_DTYPE_FLOAT8E4M3FNUZ: e = 4; m = 3; bias = 8; kind = EDGERT_MINIFLOAT_FNUZ; max = 240.0; break;
    case EDGERT_DTYPE_FLOAT8E5M2: e = 5; m = 2; bias = 15; kind = EDGERT_MINIFLOAT_IEEE; max = 57344.0; break;
    case EDGERT_DTYPE_FLOAT8E5M2FNUZ: e = 5; m = 2; bias = 16; kind = EDGERT_MINIFLOAT_FNUZ; max = 57344.0; break;
    case EDGERT_DTYPE_FLOAT4E2M1: e = 2; m = 1; bias = 1; kind = EDGERT_MINIFLOAT_FINITE; max = 6.0; break;
    default: return 0;
  }
  f->exponent_bits = e;
  f->mantissa_bits = m;
  f->bias = bias;
  f->kind = kind;
  f->max = max;
  return 1;
}

static inline double edgert_minifloat_to_double(const edgert_minifloat* f, uint8_t code) {
  const int width = 1 + f->exponent_bits + f->mantissa_bits;
  const unsigned sign = (code >> (width - 1)) & 1u;
  const unsigned exponent = (code >> f->mantissa_bits) & ((1u << f->exponent_bits) - 1u);
  const unsigned mantissa = code & ((1u << f->mantissa_bits) - 1u);
  const unsigned all_ones = (1u << f->exponent_bits) - 1u;
  if (f->kind == EDGERT_MINIFLOAT_FNUZ && code == 0x80) return NAN;
  if (f->kind == EDGERT_MINIFLOAT_FN && exponent == all_ones && mantissa == (1u << f->mantissa_bits) - 1u) return NAN;
  if (f->kind == EDGERT_MINIFLOAT_IEEE && exponent == all_ones) return mantissa ? NAN : (sign ? -INFINITY : INFINITY);
  double v = exponent == 0 ? ldexp((double)mantissa, 1 - f->bias - f->mantissa_bits)
                           : ldexp((double)(mantissa | (1u << f->mantissa_bits)), (int)exponent - f->bias - f->mantissa_bits);
  return sign ? -v : v;
}

/* The code of the largest finite value, or of infinity (`infinity` != 0, IEEE kind only). */
static inline uint8_t edgert_minifloat_extreme(const edgert_minifloat* f, int negative, int infinity) {
  const int width = 1 + f->exponent_bits + f->mantissa_bits;
  const unsigned sign = negative ? 1u << (width - 1) : 0u;
  const unsigned all_ones = (1u << f->exponent_bits) - 1u;
  if (infinity) return (uint8_t)(sign | (all_ones << f->mantissa_bits));
  unsigned exponent = f->kind == EDGERT_MINIFLOAT_IEEE ? all_ones - 1u : all_ones;
  unsigned mantissa = (1u << f->mantissa_bits) - 1u;
  if (f->kind == EDGERT_MINIFLOAT_FN) mantissa -= 1u; /* all ones there is NaN */
  return (uint8_t)(sign | (exponent << f->mantissa_bits) | mantissa);
}

static inline uint8_t edgert_minifloat_from_double(const edgert_minifloat* f, double v, int saturate) {
  const int width = 1 + f->exponent_bits + f->mantissa_bits;
  const int negative = signbit(v) != 0;
  if (isnan(v)) {
    switch (f->kind) {
      case EDGERT_MINIFLOAT_FN: return (uint8_t)((negative ? 0x80u : 0u) | 0x7fu);
      case EDGERT_MINIFLOAT_FNUZ: return 0x80;
      case EDGERT_MINIFLOAT_IEEE: return (uint8_t)((negative ? 0x80u : 0u) | 0x7eu);
      default: return (uint8_t)(1u << (width - 1)); /* ml_dtypes gives float4's NaN as -0 */
    }
  }
  const double a = fabs(v);
  double r = 0.0;
  if (!isinf(a) && a != 0.0) {
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): the leading bit's exponent is e - 1 */
    int lead = e - 1;
    if (lead < 1 - f->bias) lead = 1 - f->bias; /* subnormal: the quantum stops shrinking */
    const double quantum = ldexp(1.0, lead - f->mantissa_bits);
    r = nearbyint(a / quantum) * quantum; /* the default rounding mode: nearest even */
  }
  if (isinf(a) || r > f->max) {
    if (saturate || f->kind == EDGERT_MINIFLOAT_FINITE) return edgert_minifloat_extreme(f, negative, 0);
    switch (f->kind) {
      case EDGERT_MINIFLOAT_IEEE: return edgert_minifloat_extreme(f, negative, 1);
      case EDGERT_MINIFLOAT_FN: return (uint8_t)((negative ? 0x80u : 0u) | 0x7fu);
      default: return 0x80;
    }
  }
  const unsigned sign = negative ? 1u << (width - 1) : 0u;
  if (r == 0.0) return f->kind == EDGERT_MINIFLOAT_FNUZ ? 0 : (uint8_t)sign; /* fnuz: no -0 */
  int e;
  frexp(r, &e);
  const int lead = e - 1;
  if (lead < 1 - f->bias) /* subnormal */
    return (uint8_t)(sign | (unsigned)ldexp(r, f->bias - 1 + f->mantissa_bits));
  const unsigned exponent = (unsigned)(lead + f->bias);
  const unsigned mantissa = (unsigned)ldexp(r, f->mantissa_bits - lead) - (1u << f->mantissa_bits);
  return (uint8_t)(sign | (exponent << f->mantissa_bits) | mantissa);
}

/* float8e8m0: 2^(code - 127); 0xFF is NaN. */
static inline double edgert_e8m0_to_double(uint8_t code) {
  return code == 0xff ? NAN : ldexp(1.0, (int)code - 127);
}

/* How a value between two powers of two becomes float8e8m0 (Cast's round_mode). */
typedef enum edgert_e8m0_rounding {
  EDGERT_E8M0_ROUND_UP = 0,
  EDGERT_E8M0_ROUND_DOWN = 1,
  EDGERT_E8M0_ROUND_NEAREST = 2
} edgert_e8m0_rounding;

/* From float32's exponent field, as the ONNX reference does (the sign is dropped). */
static inline uint8_t edgert_e8m0_from_float(float value, int saturate, edgert_e8m0_rounding rounding) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  unsigned exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xffu) return 0xff;
  int round_up = 0;
  if (rounding == EDGERT_E8M0_ROUND_UP) {
    round_up = (bits & 0x7fffffu) != 0;
  } else if (rounding == EDGERT_E8M0_ROUND_NEAREST) {
    /* The reference's rule: the guard bit, and any of the round bit, the sticky bits or a
       non-zero exponent. */
    const int guard = (bits & 0x400000u) != 0, round = (bits & 0x200000u) != 0, sticky = (bits & 0x1fffffu) != 0;
    round_up = guard && (round || sticky || exponent > 0);
  }
  if (round_up && saturate && exponent == 0xfeu) round_up = 0;
  return (uint8_t)((exponent + (unsigned)round_up) & 0xffu);
}

/* A narrow float's value; NaN for a code outside the format. */
static inline double edgert_narrow_float_to_double(int dtype, uint8_t code) {
  if (dtype == EDGERT_DTYPE_FLOAT8E8M0) return edgert_e8m0_to_double(code);
  edgert_minifloat f;
  if (!edgert_minifloat_of(dtype, &f)) return NAN;
  return edgert_minifloat_to_double(&f, code);
}

/* A value as a narrow integer (already rounded or truncated to an integer): wrapped modulo 2^bits
   like numpy's astype, or clamped to the type's range with `saturate`. */
static inline uint8_t edgert_narrow_int_from_int64(int dtype, int64_t v, int saturate) {
  const int bits = edgert_dtype_packed_bits(dtype);
  const int is_signed = dtype == EDGERT_DTYPE_INT4 || dtype == EDGERT_DTYPE_INT2;
  const int64_t lo = is_signed ? -(INT64_C(1) << (bits - 1)) : 0;
  const int64_t hi = is_signed ? (INT64_C(1) << (bits - 1)) - 1 : (INT64_C(1) << bits) - 1;
  if (saturate) v = v < lo ? lo : (v > hi ? hi : v);
  const unsigned mask = (1u << bits) - 1u;
  unsigned u = (unsigned)((uint64_t)v & mask);
  if (is_signed) {
    const unsigned sign = 1u << (bits - 1);
    return (uint8_t)(int8_t)((int)(u ^ sign) - (int)sign);
  }
  return (uint8_t)u;
}

/* A narrow integer's value from its in-memory byte. */
static inline int64_t edgert_narrow_int_value(int dtype, uint8_t byte) {
  return dtype == EDGERT_DTYPE_INT4 || dtype == EDGERT_DTYPE_INT2 ? (int64_t)(int8_t)byte : (int64_t)byte;
}

#ifdef __cplusplus
}
#endif

#endif /* EDGERT_NARROW_TYPES_H */
