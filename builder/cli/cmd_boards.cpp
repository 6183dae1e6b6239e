// edgert boards [--json]: the board profiles there are, which of them this machine can run
// engines of (and why not), and what this machine is: detected facts and what `--board native`
// builds for.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "board_catalog.h"
#include "commands.h"
#include "host_machine.h"
#include "plugin_loader.h"

namespace edgert::cli {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string joined(const std::vector<std::string>& items, const char* separator = " ") {
  std::string s;
  for (const std::string& item : items) s += (s.empty() ? "" : separator) + item;
  return s;
}

ordered_json null_if_empty(const std::string& s) { return s.empty() ? ordered_json() : ordered_json(s); }

// A GPU in the profile that this machine lacks does not stop its engines (CPU kernels run), but
// an engine with a GPU plugin would be refused: worth a word.
std::string gpu_note(const config::BoardProfile& p, const HostMachine& host) {
  const std::string& gpu = p.hardware.gpu;
  if (gpu.empty() || gpu == "none" || gpu == host.hardware.gpu) return "";
  return "its GPU (" + gpu + ") is not here: CPU kernels only; an engine with a GPU plugin is refused";
}

ordered_json describe(const BoardHardware& hw) {
  return {{"architecture", hw.architecture}, {"cpu_features", hw.cpu_features}, {"gpu", hw.gpu}};
}

}  // namespace

void add_boards_command(CLI::App& app) {
  struct Options {
    bool json = false;
    std::string plugin_path;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("boards", "List the board profiles and say what this machine is (--board native)");
  cmd->add_flag("--json", o->json, "One JSON object: machine, profiles, errors");
  cmd->add_option("--plugin-path", o->plugin_path, "Colon-separated plugin directories (for the plugins listed)");
  cmd->callback([o] {
    const HostMachine& host = this_host_machine();
    config::BoardCatalog catalog = config::load_board_catalog();
    config::NativeBoard native = config::pick_native_board(catalog.profiles, host);
    const int kernel_threads = default_kernel_threads();
    edgert_error error{};
    std::vector<const LoadedPlugin*> plugins =
        load_all_plugins(plugin_search_path(o->plugin_path.empty() ? nullptr : o->plugin_path.c_str()), &error);

    ordered_json machine = describe(host.hardware);
    machine["cpu_count"] = host.cpu_count;
    machine["kernel_threads"] = kernel_threads;
    machine["ram_mb"] = host.ram_mb;
    machine["gpu_model"] = null_if_empty(host.gpu_model);
    machine["gpu_source"] = null_if_empty(host.gpu_source);
    machine["native"] = {{"name", native.profile.name},
                         {"detected", native.detected},
                         {"fingerprint", native.profile.fingerprint()},
                         {"reason", native.reason}};
    machine["edgert_version"] = EDGERT_VERSION;
    machine["plugins"] = ordered_json::array();
    for (const LoadedPlugin* p : plugins)
      machine["plugins"].push_back({{"name", p->name},
                                    {"version", p->table->version ? p->table->version : ""},
                                    {"runs_here", !p->table->score || p->table->score() > 0},
                                    {"path", p->path}});
    ordered_json profiles = ordered_json::array();
    for (const config::BoardProfile& p : catalog.profiles) {
      std::string why_not;
      const bool runs = config::board_runs_on(p, host, &why_not);
      ordered_json entry = {{"name", p.name}, {"description", p.description}, {"path", p.source_path}};
      const ordered_json hardware = describe(p.hardware);
      for (auto& [key, value] : hardware.items()) entry[key] = value;
      entry["cpu_cores"] = p.cpu_cores;
      entry["ram_mb"] = p.ram_mb;
      entry["edgertd_budget_mb"] = p.edgertd_budget_mb;
      entry["fingerprint"] = p.fingerprint();
      entry["runs_here"] = runs;
      entry["why_not"] = null_if_empty(why_not);
      entry["note"] = null_if_empty(runs ? gpu_note(p, host) : "");
      entry["native"] = !native.detected && p.name == native.profile.name;
      profiles.push_back(entry);
    }
    if (o->json) {
      ordered_json j = {{"machine", machine}, {"profiles", profiles}, {"errors", catalog.errors},
                        {"profile_dirs", catalog.dirs}};
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }

    std::printf("This machine: %s, %d CPUs (%d kernel threads by default), %lld MiB RAM, GPU: %s\n",
                host.hardware.architecture.c_str(), host.cpu_count, kernel_threads,
                static_cast<long long>(host.ram_mb),
                host.gpu_model.empty() ? "none" : (host.gpu_model + " [" + host.hardware.gpu + ", from " + host.gpu_source + "]").c_str());
    std::printf("  CPU features: %s\n", host.hardware.cpu_features.empty() ? "(none of the known ones)"
                                                                          : joined(host.hardware.cpu_features).c_str());
    std::printf("  --board native (the default) builds for: %s%s\n    %s\n", native.profile.name.c_str(),
                native.detected ? " (detected, not a shipped profile)" : "", native.reason.c_str());
    std::string plugin_list;
    for (const LoadedPlugin* p : plugins)
      plugin_list += (plugin_list.empty() ? "" : ", ") + p->name + " " + (p->table->version ? p->table->version : "?");
    std::printf("  edgert %s; plugins: %s\n\n", EDGERT_VERSION,
                plugin_list.empty() ? (std::string("none found: ") + error.message).c_str() : plugin_list.c_str());

    size_t name_w = 4, features_w = 12, gpu_w = 3;
    for (const config::BoardProfile& p : catalog.profiles) {
      name_w = std::max(name_w, p.name.size());
      features_w = std::max(features_w, joined(p.hardware.cpu_features).size());
      gpu_w = std::max(gpu_w, p.hardware.gpu.size());
    }
    std::printf("Board profiles (%s):\n", joined(catalog.dirs, ", ").c_str());
    std::printf("  %-*s  %-7s  %-*s  %-*s  %7s  %5s  %s\n", static_cast<int>(name_w), "NAME", "ARCH",
                static_cast<int>(features_w), "CPU FEATURES", static_cast<int>(gpu_w), "GPU", "RAM MiB", "CORES",
                "ITS ENGINES RUN HERE");
    for (size_t i = 0; i < catalog.profiles.size(); ++i) {
      const config::BoardProfile& p = catalog.profiles[i];
      const ordered_json& entry = profiles[i];
      std::string runs = entry["runs_here"].get<bool>() ? "yes" : "no: " + entry["why_not"].get<std::string>();
      if (entry["native"].get<bool>()) runs += " (native)";
      if (!entry["note"].is_null()) runs += "; " + entry["note"].get<std::string>();
      std::printf("  %-*s  %-7s  %-*s  %-*s  %7lld  %5d  %s\n", static_cast<int>(name_w), p.name.c_str(),
                  p.hardware.architecture.c_str(), static_cast<int>(features_w),
                  joined(p.hardware.cpu_features).c_str(), static_cast<int>(gpu_w), p.hardware.gpu.c_str(),
                  static_cast<long long>(p.ram_mb), p.cpu_cores, runs.c_str());
    }
    for (const std::string& e : catalog.errors) std::printf("  not loaded: %s\n", e.c_str());
  });
}

}  // namespace edgert::cli
