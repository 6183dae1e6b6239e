#include "board_catalog.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "yaml_tree.h"

namespace edgert::config {
namespace {

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

bool has_gpu(const BoardHardware& hw) { return !hw.gpu.empty() && hw.gpu != "none"; }

}  // namespace

BoardCatalog load_board_catalog() {
  BoardCatalog catalog;
  catalog.dirs = board_profile_dirs();
  std::map<std::string, BoardProfile> by_name;
  for (const std::string& name : board_profile_names()) {
    std::string path;
    try {
      path = find_board_profile(name);
      BoardProfile profile = load_board_profile(path);
      by_name.emplace(profile.name, std::move(profile));
    } catch (const ConfigError& e) {
      catalog.errors.push_back(e.what());
    }
  }
  for (auto& [name, profile] : by_name) catalog.profiles.push_back(std::move(profile));
  return catalog;
}

bool board_runs_on(const BoardProfile& profile, const HostMachine& host, std::string* why_not) {
  if (profile.hardware.architecture != host.hardware.architecture) {
    if (why_not)
      *why_not = "it is " + profile.hardware.architecture + ", this machine is " + host.hardware.architecture;
    return false;
  }
  for (const std::string& feature : profile.hardware.cpu_features)
    if (!has(host.hardware.cpu_features, feature)) {
      if (why_not) *why_not = "it has CPU feature " + feature + ", this machine lacks it";
      return false;
    }
  return true;
}

BoardProfile detected_board_profile(const HostMachine& host) {
  BoardProfile p;
  p.name = native_board_name(host);
  p.description = "this machine as edgert detects it (no shipped profile describes it)";
  p.source_path = "(detected)";
  p.hardware = host.hardware;
  if (!host.gpu_exact) p.hardware.gpu = "none";
  if (has_gpu(p.hardware)) {
    // "cuda-sm8.7-unified": what board_profile.cpp makes of type, compute_capability, unified_memory.
    p.gpu_type = "cuda";
    const std::string& gpu = p.hardware.gpu;
    size_t start = gpu.find("-sm");
    size_t end = gpu.find('-', start + 3);
    if (start != std::string::npos) p.cuda_compute_capability = gpu.substr(start + 3, end == std::string::npos ? end : end - start - 3);
    p.unified_memory = gpu.size() > 8 && gpu.compare(gpu.size() - 8, 8, "-unified") == 0;
  }
  p.cpu_cores = std::max(1, host.cpu_count);
  p.ram_mb = host.ram_mb > 0 ? host.ram_mb : 1024;
  p.edgertd_budget_mb = std::max<int64_t>(16, p.ram_mb / 2);
  p.zram_mb = 0;
  p.swappiness = 60;
  p.precisions = {"fp32"};
  return p;
}

NativeBoard pick_native_board(const std::vector<BoardProfile>& profiles, const HostMachine& host) {
  const BoardProfile* best = nullptr;
  auto rank = [&](const BoardProfile& p) {
    const bool gpu_match = has_gpu(p.hardware) && p.hardware.gpu == host.hardware.gpu;
    return std::make_tuple(gpu_match ? 1 : 0, p.hardware.cpu_features.size(), -std::abs(p.cpu_cores - host.cpu_count),
                           -std::abs(p.ram_mb - host.ram_mb));
  };
  for (const BoardProfile& p : profiles) {
    if (!board_runs_on(p, host, nullptr)) continue;
    if (has_gpu(p.hardware) && p.hardware.gpu != host.hardware.gpu) continue;
    if (!best || rank(p) > rank(*best)) best = &p;  // equal ranks: the first by name stays
  }
  NativeBoard native;
  std::string extra;
  if (best) {
    for (const std::string& feature : host.hardware.cpu_features)
      if (!has(best->hardware.cpu_features, feature)) extra += (extra.empty() ? "" : ", ") + feature;
    // A GPU board's profile is about its GPU: taken even where this CPU has more than it lists.
    // A CPU-only profile must list every feature here, and a Jetson-like integrated GPU needs
    // a profile of its own.
    if (has_gpu(best->hardware) || (extra.empty() && !host.gpu_integrated())) {
      native.profile = *best;
      native.profile.cpu_cores = std::max(1, host.cpu_count);
      std::string features;
      for (const std::string& f : best->hardware.cpu_features) features += (features.empty() ? "" : " ") + f;
      native.reason = "shipped profile " + best->name + ": " + best->hardware.architecture + " with " +
                      (features.empty() ? std::string("no optional CPU features") : features) +
                      (has_gpu(best->hardware) ? " and GPU " + best->hardware.gpu : std::string()) +
                      ", all of which this machine has" +
                      (extra.empty() ? std::string(", and none that it lacks")
                                     : " (its " + extra + " go unused: the profile is for the GPU)");
      return native;
    }
  }
  native.profile = detected_board_profile(host);
  native.detected = true;
  if (!best)
    native.reason = "no shipped " + host.hardware.architecture + " profile fits this machine: built from what was detected";
  else if (!extra.empty())
    native.reason = "the closest shipped profile, " + best->name + ", lacks this machine's " + extra +
                    ": built from what was detected so its kernels are used";
  else
    native.reason = "the closest shipped profile, " + best->name + ", has no GPU; this machine's " + host.hardware.gpu +
                    ": built from what was detected";
  return native;
}

ResolvedBoard resolve_board(const std::string& name_or_path) {
  ResolvedBoard resolved;
  if (name_or_path == "native") {
    NativeBoard native = pick_native_board(load_board_catalog().profiles, this_host_machine());
    resolved.profile = std::move(native.profile);
    resolved.profile.cpu_cores = default_kernel_threads();
    resolved.native = true;
    resolved.reason = std::move(native.reason);
    return resolved;
  }
  resolved.profile = load_board_profile(find_board_profile(name_or_path));
  return resolved;
}

}  // namespace edgert::config
