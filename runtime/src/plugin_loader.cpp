#include "plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "error.h"

#ifndef EDGERT_PLUGIN_INSTALL_DIR
#define EDGERT_PLUGIN_INSTALL_DIR "/usr/lib/edgert/plugins"
#endif

namespace edgert {
namespace {

std::mutex g_mutex;
// Settings every plugin gets at load; set_by_host is false until configure_plugins is called,
// so plugins that nobody configures keep their own defaults untouched.
edgert_plugin_config g_config{sizeof(edgert_plugin_config), 0, 0};
bool g_config_set_by_host = false;

edgert_status apply_config(const LoadedPlugin& plugin, edgert_error* error) {
  if (!plugin.table->configure) return EDGERT_OK;
  edgert_error local{};
  edgert_status status = plugin.table->configure(&g_config, &local);
  if (status != EDGERT_OK)
    return set_error(error, status, "plugin '%s' (%s) refuses num_threads %d, pin_threads %d: %s", plugin.name.c_str(),
                     plugin.path.c_str(), g_config.num_threads, g_config.pin_threads, local.message);
  return EDGERT_OK;
}

std::map<std::string, std::unique_ptr<LoadedPlugin>>& loaded() {
  static auto* plugins = new std::map<std::string, std::unique_ptr<LoadedPlugin>>();
  return *plugins;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

void add_unique(std::vector<std::string>& list, const std::string& dir) {
  for (const std::string& d : list)
    if (d == dir) return;
  list.push_back(dir);
}

// A plugin runs with the privileges of whoever loads it: a directory or file others can write
// to would let any local user inject code into the daemon.
bool check_not_writable_by_others(const std::string& path, const char* what, edgert_error* error) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    set_error(error, EDGERT_ERR_PLUGIN, "cannot stat plugin %s '%s': %s", what, path.c_str(), strerror(errno));
    return false;
  }
  if (st.st_mode & S_IWOTH) {
    set_error(error, EDGERT_ERR_PLUGIN,
              "refusing to load plugins from %s '%s': it is world-writable (mode %03o); run "
              "'chmod o-w %s'",
              what, path.c_str(), st.st_mode & 0777, path.c_str());
    return false;
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    set_error(error, EDGERT_ERR_PLUGIN,
              "refusing to load plugins from %s '%s': owned by uid %u, neither root nor this user", what,
              path.c_str(), st.st_uid);
    return false;
  }
  return true;
}

const LoadedPlugin* open_plugin_file(const std::string& name, const std::string& dir, const std::string& file,
                                     edgert_error* error) {
  if (!check_not_writable_by_others(dir, "directory", error) ||
      !check_not_writable_by_others(file, "library", error))
    return nullptr;
  // RTLD_LOCAL: two plugins may use the same internal symbol names without clashing.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    set_error(error, EDGERT_ERR_PLUGIN, "cannot load plugin '%s' from '%s': %s", name.c_str(), file.c_str(),
              dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<edgert_plugin_entry_fn>(dlsym(handle, EDGERT_PLUGIN_ENTRY_SYMBOL));
  if (!entry) {
    set_error(error, EDGERT_ERR_PLUGIN, "'%s' is not an edgert plugin: it does not export %s", file.c_str(),
              EDGERT_PLUGIN_ENTRY_SYMBOL);
    dlclose(handle);
    return nullptr;
  }
  const edgert_plugin* table = entry();
  if (!table || table->abi_version != EDGERT_PLUGIN_ABI_VERSION) {
    set_error(error, EDGERT_ERR_VERSION, "plugin '%s' (%s) has ABI version %u; this runtime needs %u",
              name.c_str(), file.c_str(), table ? table->abi_version : 0u, EDGERT_PLUGIN_ABI_VERSION);
    dlclose(handle);
    return nullptr;
  }
  if (!table->name || name != table->name || table->num_kernels < 0 || (table->num_kernels && !table->kernels)) {
    set_error(error, EDGERT_ERR_PLUGIN, "plugin file '%s' does not describe a plugin named '%s'", file.c_str(),
              name.c_str());
    dlclose(handle);
    return nullptr;
  }
  if (const edgert_device* d = table->device) {
    // Everything but graphs is required of a device: the runtime calls it unconditionally.
    const bool complete = d->struct_size >= sizeof(edgert_device) && d->allocate && d->free && d->stream_create &&
                          d->stream_destroy && d->synchronize && d->copy && d->copies_made && d->describe &&
                          d->timer_create && d->timer_record && d->timer_elapsed && d->timer_free &&
                          (d->kernel_space == EDGERT_MEMORY_DEVICE || d->kernel_space == EDGERT_MEMORY_UNIFIED);
    if (!complete) {
      set_error(error, EDGERT_ERR_PLUGIN, "plugin '%s' (%s) has an incomplete device table", name.c_str(), file.c_str());
      dlclose(handle);
      return nullptr;
    }
  }
  // The handle stays open for the life of the process (see plugin_loader.h).
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->name = name;
  plugin->path = file;
  plugin->table = table;
  // A refusal fails this load; the plugin stays loaded (its code may already run threads) with
  // its own settings, and a later configure_plugins may succeed.
  if (g_config_set_by_host && apply_config(*plugin, error) != EDGERT_OK) {
    loaded()[name] = std::move(plugin);
    return nullptr;
  }
  const LoadedPlugin* result = plugin.get();
  loaded()[name] = std::move(plugin);
  return result;
}

}  // namespace

const edgert_kernel* LoadedPlugin::find_kernel(const char* kernel_name) const {
  for (int32_t i = 0; i < table->num_kernels; ++i)
    if (std::strcmp(table->kernels[i].name, kernel_name) == 0) return &table->kernels[i];
  return nullptr;
}

std::string plugin_file_name(const std::string& name) { return "libedgert_plugin_" + name + ".so"; }

std::vector<std::string> plugin_search_path(const char* explicit_path) {
  std::vector<std::string> dirs;
  const char* list = explicit_path && *explicit_path ? explicit_path : std::getenv("EDGERT_PLUGIN_PATH");
  if (list && *list) {
    std::string s(list);
    size_t start = 0;
    while (start <= s.size()) {
      size_t colon = s.find(':', start);
      std::string dir = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!dir.empty()) add_unique(dirs, dir);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    return dirs;
  }
  // Next to the code that loads: the build tree and an install share this relative layout.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_search_path), &info) && info.dli_fname) {
    char resolved[PATH_MAX];
    if (realpath(info.dli_fname, resolved)) {
      std::string dir = dir_of(resolved);
      std::string leaf = dir.substr(dir.rfind('/') + 1);
      add_unique(dirs, (leaf == "bin" ? dir_of(dir) + "/lib" : dir) + "/edgert/plugins");
    }
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    add_unique(dirs, dir_of(dir_of(exe)) + "/lib/edgert/plugins");
  }
  add_unique(dirs, EDGERT_PLUGIN_INSTALL_DIR);
  return dirs;
}

const LoadedPlugin* load_plugin(const std::string& name, const std::vector<std::string>& search_path,
                                edgert_error* error) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = loaded().find(name);
  if (it != loaded().end()) return it->second.get();
  std::string searched;
  for (const std::string& dir : search_path) {
    std::string file = dir + "/" + plugin_file_name(name);
    if (access(file.c_str(), F_OK) == 0) return open_plugin_file(name, dir, file, error);
    searched += (searched.empty() ? "" : ", ") + dir;
  }
  set_error(error, EDGERT_ERR_PLUGIN,
            "plugin '%s' not found: no %s in %s (set EDGERT_PLUGIN_PATH or install the plugin)",
            name.c_str(), plugin_file_name(name).c_str(), searched.empty() ? "(empty search path)" : searched.c_str());
  return nullptr;
}

edgert_status configure_plugins(int32_t num_threads, int32_t pin_threads, edgert_error* error) {
  if (num_threads < 0)
    return set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "num_threads must be 0 (the plugin's default) or more, got %d",
                     num_threads);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_config.num_threads = num_threads;
  g_config.pin_threads = pin_threads ? 1 : 0;
  g_config_set_by_host = true;
  for (const auto& [name, plugin] : loaded())
    if (edgert_status status = apply_config(*plugin, error); status != EDGERT_OK) return status;
  return EDGERT_OK;
}

std::vector<const LoadedPlugin*> load_all_plugins(const std::vector<std::string>& search_path,
                                                  edgert_error* error) {
  std::vector<std::string> names;
  const std::string prefix = "libedgert_plugin_", suffix = ".so";
  for (const std::string& dir : search_path) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* entry = readdir(d)) {
      std::string file = entry->d_name;
      if (file.size() > prefix.size() + suffix.size() && file.compare(0, prefix.size(), prefix) == 0 &&
          file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
        std::string name = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
        bool seen = false;
        for (const std::string& n : names) seen = seen || n == name;
        if (!seen) names.push_back(name);
      }
    }
    closedir(d);
  }
  std::vector<const LoadedPlugin*> plugins;
  for (const std::string& name : names) {
    edgert_error local{};
    const LoadedPlugin* p = load_plugin(name, search_path, &local);
    if (p) plugins.push_back(p);
    else if (error) *error = local;  // reported only if no plugin loads at all
  }
  return plugins;
}

}  // namespace edgert
