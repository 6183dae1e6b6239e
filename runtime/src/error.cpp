#include "error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

namespace edgert {

edgert_status set_error(edgert_error* error, edgert_status status, const char* format, ...) {
  if (error) {
    error->status = status;
    va_list args;
    va_start(args, format);
    std::vsnprintf(error->message, sizeof error->message, format, args);
    va_end(args);
  }
  return status;
}

void prefix_error(edgert_error* error, const char* format, ...) {
  if (!error) return;
  char prefix[EDGERT_MESSAGE_CAPACITY];
  va_list args;
  va_start(args, format);
  std::vsnprintf(prefix, sizeof prefix, format, args);
  va_end(args);
  std::string joined = std::string(prefix) + ": " + error->message;
  std::snprintf(error->message, sizeof error->message, "%s", joined.c_str());
}

const char* status_name(edgert_status status) {
  switch (status) {
    case EDGERT_OK: return "ok";
    case EDGERT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case EDGERT_ERR_UNSUPPORTED: return "unsupported";
    case EDGERT_ERR_OUT_OF_MEMORY: return "out of memory";
    case EDGERT_ERR_IO: return "i/o error";
    case EDGERT_ERR_FORMAT: return "malformed file";
    case EDGERT_ERR_CHECKSUM: return "checksum mismatch";
    case EDGERT_ERR_VERSION: return "version mismatch";
    case EDGERT_ERR_BOARD: return "board mismatch";
    case EDGERT_ERR_PLUGIN: return "plugin error";
    case EDGERT_ERR_SHAPE: return "shape or dtype mismatch";
    case EDGERT_ERR_NEEDS_DATA: return "needs input values";
    case EDGERT_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* dtype_name(int dtype) {
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
    default: return "undefined";
  }
}

size_t dtype_size(int dtype) {
  switch (dtype) {
    case EDGERT_DTYPE_FLOAT64: case EDGERT_DTYPE_INT64: case EDGERT_DTYPE_UINT64: return 8;
    case EDGERT_DTYPE_FLOAT32: case EDGERT_DTYPE_INT32: case EDGERT_DTYPE_UINT32: return 4;
    case EDGERT_DTYPE_FLOAT16: case EDGERT_DTYPE_BFLOAT16: case EDGERT_DTYPE_INT16:
    case EDGERT_DTYPE_UINT16: return 2;
    case EDGERT_DTYPE_INT8: case EDGERT_DTYPE_UINT8: case EDGERT_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

bool dtype_is_valid(int dtype) { return dtype_size(dtype) != 0; }

}  // namespace edgert
