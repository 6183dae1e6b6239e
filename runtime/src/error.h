// Filling an edgert_error with a formatted message; the one way runtime code reports failure.
#pragma once

#include "edgert/types.h"

namespace edgert {

// Sets status and message (printf-style) and returns status, so callers can
// `return set_error(error, EDGERT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));`
edgert_status set_error(edgert_error* error, edgert_status status, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

// Prepends "context: " to the message already in `error`.
void prefix_error(edgert_error* error, const char* format, ...) __attribute__((format(printf, 2, 3)));

const char* status_name(edgert_status status);
// The same for any int a C caller passes as a status ("unknown status" for values no status has).
const char* status_code_name(int code);
const char* dtype_name(int dtype);
size_t dtype_size(int dtype);
bool dtype_is_valid(int dtype);

}  // namespace edgert
