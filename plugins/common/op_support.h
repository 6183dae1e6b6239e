// What every plugin's kernels share on the C++ side of the C ABI: the error a kernel throws
// inside its plugin (the plugin's adapter turns it into a status plus message at the boundary),
// shapes, and read-only views of a node's attributes. Header-only types, plain C++; plugins
// compile op_support.cpp into themselves.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "edgert/plugin.h"

namespace edgert::plugin {

class KernelError : public std::runtime_error {
 public:
  KernelError(edgert_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  edgert_status status() const { return status_; }

 private:
  edgert_status status_;
};

// printf-style; the adapter prefixes the node's name and op type.
[[noreturn]] void fail(edgert_status status, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

// For the C ABI's functions that return a status (a device table's): fills `error` (when not
// NULL) with `status` and the printf-style message, and returns `status`.
edgert_status set_error(edgert_error* error, edgert_status status, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

using Shape = std::vector<int64_t>;

int64_t numel(const edgert_tensor& t);
int64_t numel(const Shape& shape);
Shape shape_of(const edgert_tensor& t);
void set_shape(edgert_tensor& t, const Shape& shape);
void set_output(edgert_tensor& t, edgert_dtype dtype, const Shape& shape);
bool is_present(const edgert_tensor& t);
std::string shape_string(const Shape& shape);

// Resolves a possibly negative axis against `rank`, failing with a message naming `what`.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what = "axis");

// Values of a small integer tensor (shape, axes, pads, ...) as int64, whatever its int dtype.
// Fails with EDGERT_ERR_NEEDS_DATA when the data is not known (builder-time shape inference).
std::vector<int64_t> read_ints(const edgert_tensor& t, const char* what);

// Read-only view of a node's attributes.
class Attributes {
 public:
  explicit Attributes(const edgert_node* node) : node_(node) {}
  const edgert_attribute* find(const char* name) const;
  bool has(const char* name) const { return find(name) != nullptr; }
  int64_t get_int(const char* name, int64_t fallback) const;
  float get_float(const char* name, float fallback) const;
  std::string get_string(const char* name, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const char* name, const std::vector<int64_t>& fallback = {}) const;
  std::vector<float> get_floats(const char* name, const std::vector<float>& fallback = {}) const;
  std::vector<std::string> get_strings(const char* name) const;
  const edgert_tensor* get_tensor(const char* name) const;

 private:
  const edgert_node* node_;
};

}  // namespace edgert::plugin
