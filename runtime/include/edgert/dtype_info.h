/*
 * Sizes and names of element types, for the runtime and for plugin authors alike: one table,
 * header-only so a plugin needs nothing from libedgert to use it.
 */
#ifndef EDGERT_DTYPE_INFO_H
#define EDGERT_DTYPE_INFO_H

#include "edgert/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element; 0 for UNDEFINED, STRING and values outside the enum. */
static inline size_t edgert_dtype_size(int dtype) {
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT64: case EDGERT_DTYPE_INT64: case EDGERT_DTYPE_UINT64: return 8;
    case EDGERT_DTYPE_FLOAT32: case EDGERT_DTYPE_INT32: case EDGERT_DTYPE_UINT32: return 4;
    case EDGERT_DTYPE_FLOAT16: case EDGERT_DTYPE_BFLOAT16: case EDGERT_DTYPE_INT16:
    case EDGERT_DTYPE_UINT16: return 2;
    case EDGERT_DTYPE_INT8: case EDGERT_DTYPE_UINT8: case EDGERT_DTYPE_BOOL: return 1;
    /* In memory every narrow type takes a byte per element (edgert/narrow_types.h). */
    case EDGERT_DTYPE_FLOAT8E4M3FN: case EDGERT_DTYPE_FLOAT8E4M3FNUZ: case EDGERT_DTYPE_FLOAT8E5M2:
    case EDGERT_DTYPE_FLOAT8E5M2FNUZ: case EDGERT_DTYPE_FLOAT8E8M0: case EDGERT_DTYPE_FLOAT4E2M1:
    case EDGERT_DTYPE_INT4: case EDGERT_DTYPE_UINT4: case EDGERT_DTYPE_INT2: case EDGERT_DTYPE_UINT2: return 1;
    default: return 0;
  }
}

/* Lower-case name as users write it ("float32"); "undefined" for anything unknown. */
static inline const char* edgert_dtype_name(int dtype) {
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT32: return "float32";
    case EDGERT_DTYPE_FLOAT64: return "float64";
    case EDGERT_DTYPE_FLOAT16: return "float16";
    case EDGERT_DTYPE_BFLOAT16: return "bfloat16";
    case EDGERT_DTYPE_INT8: return "int8";
    case EDGERT_DTYPE_INT16: return "int16";
    case EDGERT_DTYPE_INT32: return "int32";
    case EDGERT_DTYPE_INT64: return "int64";
    case EDGERT_DTYPE_UINT8: return "uint8";
    case EDGERT_DTYPE_UINT16: return "uint16";
    case EDGERT_DTYPE_UINT32: return "uint32";
    case EDGERT_DTYPE_UINT64: return "uint64";
    case EDGERT_DTYPE_BOOL: return "bool";
    case EDGERT_DTYPE_STRING: return "string";
    case EDGERT_DTYPE_SEQUENCE: return "sequence";
    case EDGERT_DTYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case EDGERT_DTYPE_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case EDGERT_DTYPE_FLOAT8E5M2: return "float8e5m2";
    case EDGERT_DTYPE_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case EDGERT_DTYPE_FLOAT8E8M0: return "float8e8m0";
    case EDGERT_DTYPE_FLOAT4E2M1: return "float4e2m1";
    case EDGERT_DTYPE_INT4: return "int4";
    case EDGERT_DTYPE_UINT4: return "uint4";
    case EDGERT_DTYPE_INT2: return "int2";
    case EDGERT_DTYPE_UINT2: return "uint2";
    default: return "undefined";
  }
}

#ifdef __cplusplus
}
#endif

#endif /* EDGERT_DTYPE_INFO_H */
