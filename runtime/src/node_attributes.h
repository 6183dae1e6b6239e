// Attribute lookup on a loaded node, for the ops the runtime runs itself (control flow, sequences).
#pragma once

#include <cstring>
#include <vector>

#include "loaded_engine.h"

namespace edgert {

inline int64_t int_attribute(const LoadedNode& node, const char* name, int64_t fallback) {
  for (const edgert_attribute& a : node.attributes)
    if (std::strcmp(a.name, name) == 0 && a.type == EDGERT_ATTR_INT) return a.i;
  return fallback;
}

inline std::vector<int64_t> ints_attribute(const LoadedNode& node, const char* name) {
  for (const edgert_attribute& a : node.attributes)
    if (std::strcmp(a.name, name) == 0 && a.type == EDGERT_ATTR_INTS) return std::vector<int64_t>(a.ints, a.ints + a.count);
  return {};
}

}  // namespace edgert
