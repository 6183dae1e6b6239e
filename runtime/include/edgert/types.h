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
  EDGERT_DTYPE_BFLOAT16 = 16
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
