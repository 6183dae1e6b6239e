// Finding, checking and dlopen-ing plugins. Process-wide: a plugin is loaded once and its handle
// is never closed, because kernels of engines (and threads running them) may still execute its
// code; unloading a live plugin would turn into a crash far from the cause.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "edgert/plugin.h"

namespace edgert {

struct LoadedPlugin {
  std::string name;
  std::string path;
  const edgert_plugin* table = nullptr;
  const edgert_kernel* find_kernel(const char* kernel_name) const;
};

// Directories searched, in order: the explicit path list (colon-separated) if given, otherwise
// $EDGERT_PLUGIN_PATH, otherwise <dir of libedgert or the executable>/../lib/edgert/plugins and
// the install directory.
std::vector<std::string> plugin_search_path(const char* explicit_path);

// The file name a plugin called `name` has: libedgert_plugin_<name>.so
std::string plugin_file_name(const std::string& name);

// Loads (or returns the already loaded) plugin `name`. Refuses world-writable directories or
// files and plugins with another ABI version; the error names every path searched.
const LoadedPlugin* load_plugin(const std::string& name, const std::vector<std::string>& search_path,
                                edgert_error* error);

// Process-wide kernel settings (edgert_plugin_config): stored, handed to the configure() of
// every plugin loaded so far, and to each plugin loaded later right after it is opened.
// num_threads 0 means each plugin's default. The caller must not run kernels meanwhile: the
// ABI lets a plugin rebuild its thread pool here. Fails naming the first plugin that refuses.
edgert_status configure_plugins(int32_t num_threads, int32_t pin_threads, edgert_error* error);

// Every plugin found on the search path (for the builder, which picks kernels among them).
std::vector<const LoadedPlugin*> load_all_plugins(const std::vector<std::string>& search_path,
                                                  edgert_error* error);

}  // namespace edgert
