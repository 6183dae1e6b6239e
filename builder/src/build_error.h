// How builder code reports failure: thrown inside the builder, caught by the CLI (or the library
// entry points) and turned into a message and an exit status.
#pragma once

#include <cstdarg>
#include <stdexcept>
#include <string>

#include "edgert/types.h"

namespace edgert::builder {

class BuildError : public std::runtime_error {
 public:
  BuildError(edgert_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  edgert_status status() const { return status_; }

 private:
  edgert_status status_;
};

[[noreturn]] void build_fail(edgert_status status, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace edgert::builder
