/*
 * Types shared by the public C API (edgert.h) and the plugin ABI (plugin.h).
 *
 * Plain C only: these structs cross dlopen boundaries, so no C++ types, no
 * exceptions and no ownership transfer that the comments below do not spell out.
 */
#ifndef EDGERT_TYPES_H
#define EDGERT_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Marks the functions libedgert exports; everything else in it is hidden. */
#define EDGERT_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by every call of the runtime and of plugins. */
typedef enum edgert_status {
  EDGERT_OK = 0,
  EDGERT_ERR_INVALID_ARGUMENT = 1, /* a caller passed something malformed */
  EDGERT_ERR_UNSUPPORTED = 2,      /* an op, dtype or attribute no kernel handles */
  EDGERT_ERR_OUT_OF_MEMORY = 3,
  EDGERT_ERR_IO = 4,               /* open/read/mmap/write failed */
  EDGERT_ERR_FORMAT = 5,           /* an engine or model file is malformed */
  EDGERT_ERR_CHECKSUM = 6,         /* the engine's checksum does not match its bytes */
  EDGERT_ERR_VERSION = 7,          /* format or ABI version this build cannot read */
  EDGERT_ERR_BOARD = 8,            /* engine built for a board this machine is not */
  EDGERT_ERR_PLUGIN = 9,           /* plugin library or kernel missing or unusable */
  EDGERT_ERR_SHAPE = 10,           /* a tensor's shape or dtype is not what is expected */
  EDGERT_ERR_NEEDS_DATA = 11,      /* prepare needs values of an input that are not known yet */
  EDGERT_ERR_INTERNAL = 12
} edgert_status;

/* Element types. The numbering is ONNX's TensorProto.DataType so importers need no table. */
typedef enum edgert_dtype {
  EDGERT_DTYPE_UNDEFINED = 0,
  EDGERT_DTYPE_FLOAT32 = 1,
  EDGERT_DTYPE_UINT8 = 2,
  EDGERT_DTYPE_INT8 = 3,
  EDGERT_DTYPE_UINT16 = 4,
  EDGERT_DTYPE_INT16 = 5,
  EDGERT_DTYPE_INT32 = 6,
  EDGERT_DTYPE_INT64 = 7,
  EDGERT_DTYPE_STRING = 8, /* not supported by any kernel; listed so importers can name it */
  EDGERT_DTYPE_BOOL = 9,   /* one byte per element, 0 or 1 */
  EDGERT_DTYPE_FLOAT16 = 10,
  EDGERT_DTYPE_FLOAT64 = 11,
  EDGERT_DTYPE_UINT32 = 12,
  EDGERT_DTYPE_UINT64 = 13,
  EDGERT_DTYPE_BFLOAT16 = 16,
  /* The narrow types (edgert/narrow_types.h): one element per byte in memory, the integers
     sign- or zero-extended, the floats as their code in the low bits. */
  EDGERT_DTYPE_FLOAT8E4M3FN = 17,
  EDGERT_DTYPE_FLOAT8E4M3FNUZ = 18,
  EDGERT_DTYPE_FLOAT8E5M2 = 19,
  EDGERT_DTYPE_FLOAT8E5M2FNUZ = 20,
  EDGERT_DTYPE_UINT4 = 21,
  EDGERT_DTYPE_INT4 = 22,
  EDGERT_DTYPE_FLOAT4E2M1 = 23,
  EDGERT_DTYPE_FLOAT8E8M0 = 24,
  EDGERT_DTYPE_UINT2 = 25,
  EDGERT_DTYPE_INT2 = 26,
  /* Not an element type: the value is an ONNX sequence of tensors. Such an edgert_tensor has
     rank 0 and its data points to an edgert_sequence. Engine inputs and outputs of sequence
     type take and give values of this kind; an optional input or output without a value is a
     tensor of dtype EDGERT_DTYPE_UNDEFINED. */
  EDGERT_DTYPE_SEQUENCE = 1000
} edgert_dtype;

/* ONNX tensors in the wild stay far below this; the bound keeps edgert_tensor flat. */
#define EDGERT_MAX_RANK 8

/*
 * A tensor as it crosses the API: dense, row-major, no strides.
 * `data` is borrowed: whoever hands the struct over keeps ownership and keeps the
 * memory alive for the duration of the call (or as the receiving function says).
 * A missing optional input is a tensor with dtype EDGERT_DTYPE_UNDEFINED.
 */
typedef struct edgert_tensor {
  edgert_dtype dtype;
  int32_t rank;
  int64_t dims[EDGERT_MAX_RANK];
  void* data;
} edgert_tensor;

/* The value of an edgert_tensor of dtype EDGERT_DTYPE_SEQUENCE: `count` tensors of dtype
 * `element_dtype` (known even when the sequence is empty), shapes free. Borrowed as the tensor's
 * data is: an engine input's for the run, an output's until the next run. */
typedef struct edgert_sequence {
  edgert_dtype element_dtype;
  size_t count;
  const edgert_tensor* items;
} edgert_sequence;

/* Room for a message that says what went wrong and where; always NUL-terminated. */
#define EDGERT_MESSAGE_CAPACITY 1024
typedef struct edgert_error {
  edgert_status status;
  char message[EDGERT_MESSAGE_CAPACITY];
} edgert_error;

#ifdef __cplusplus
}
#endif

#endif /* EDGERT_TYPES_H */
