#include "error.h"

#include "edgert/dtype_info.h"

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

const char* status_name(edgert_status status) { return status_code_name(static_cast<int>(status)); }

const char* status_code_name(int code) {
  switch (code) {
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

const char* dtype_name(int dtype) { return edgert_dtype_name(dtype); }

size_t dtype_size(int dtype) { return edgert_dtype_size(dtype); }

bool dtype_is_valid(int dtype) { return dtype_size(dtype) != 0; }

}  // namespace edgert
