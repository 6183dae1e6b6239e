#include "board_profile.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "host_machine.h"
#include "yaml_tree.h"

#ifndef EDGERT_BOARD_PROFILE_DIRS
#define EDGERT_BOARD_PROFILE_DIRS "/usr/share/edgert/board_profiles"
#endif

namespace edgert::config {

BoardProfile load_board_profile(const std::string& path) {
  auto root = load_yaml_file(path);
  YamlReader r(*root, path);
  r.expect_keys(*root, {"name", "description", "architecture", "cpu", "gpu", "memory", "swap", "camera", "gpio",
                        "precisions"}, "board profile");
  BoardProfile p;
  p.source_path = path;
  p.name = r.string_value(r.require(*root, "name", "board profile"), "name");
  if (const YamlNode* d = root->get("description")) p.description = r.string_value(*d, "description");
  const YamlNode& arch = r.require(*root, "architecture", "board profile");
  p.hardware.architecture = r.string_value(arch, "architecture");
  if (p.hardware.architecture != "x86_64" && p.hardware.architecture != "aarch64")
    r.fail(arch, "architecture must be x86_64 or aarch64, got '" + p.hardware.architecture + "'");

  const YamlNode& cpu = r.require(*root, "cpu", "board profile");
  r.expect_keys(cpu, {"features", "cores"}, "cpu");
  if (const YamlNode* f = cpu.get("features")) {
    p.hardware.cpu_features = r.string_list(*f, "cpu.features");
    const std::vector<std::string>& known = known_cpu_features(p.hardware.architecture);
    for (size_t i = 0; i < p.hardware.cpu_features.size(); ++i)
      if (std::find(known.begin(), known.end(), p.hardware.cpu_features[i]) == known.end()) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        r.fail(*f->items[i], "unknown CPU feature '" + p.hardware.cpu_features[i] + "' for " +
                                 p.hardware.architecture + " (known: " + list + ")");
      }
  }
  p.cpu_cores = static_cast<int>(r.int_value(r.require(cpu, "cores", "cpu"), "cpu.cores", 1, 1024));

  if (const YamlNode* gpu = root->get("gpu")) {
    r.expect_keys(*gpu, {"type", "compute_capability", "unified_memory"}, "gpu");
    p.gpu_type = r.string_value(r.require(*gpu, "type", "gpu"), "gpu.type");
    if (p.gpu_type != "none" && p.gpu_type != "cuda") r.fail(*gpu->get("type"), "gpu.type must be none or cuda");
    if (const YamlNode* cc = gpu->get("compute_capability")) p.cuda_compute_capability = r.string_value(*cc, "gpu.compute_capability");
    if (const YamlNode* um = gpu->get("unified_memory")) p.unified_memory = r.bool_value(*um, "gpu.unified_memory");
    if (p.gpu_type == "cuda" && p.cuda_compute_capability.empty()) r.fail(*gpu, "a cuda gpu needs compute_capability");
  }
  p.hardware.gpu = p.gpu_type == "cuda" ? "cuda-sm" + p.cuda_compute_capability + (p.unified_memory ? "-unified" : "") : "none";

  const YamlNode& mem = r.require(*root, "memory", "board profile");
  r.expect_keys(mem, {"ram_mb", "edgertd_budget_mb"}, "memory");
  p.ram_mb = r.int_value(r.require(mem, "ram_mb", "memory"), "memory.ram_mb", 64, 1 << 24);
  p.edgertd_budget_mb = r.int_value(r.require(mem, "edgertd_budget_mb", "memory"), "memory.edgertd_budget_mb", 16, p.ram_mb);

  if (const YamlNode* swap = root->get("swap")) {
    r.expect_keys(*swap, {"zram_mb", "swappiness"}, "swap");
    if (const YamlNode* z = swap->get("zram_mb")) p.zram_mb = r.int_value(*z, "swap.zram_mb", 0, p.ram_mb * 2);
    if (const YamlNode* s = swap->get("swappiness")) p.swappiness = static_cast<int>(r.int_value(*s, "swap.swappiness", 0, 200));
  }
  if (const YamlNode* cam = root->get("camera")) {
    r.expect_keys(*cam, {"device"}, "camera");
    if (const YamlNode* d = cam->get("device")) p.camera_device = r.string_value(*d, "camera.device");
  }
  if (const YamlNode* gpio = root->get("gpio")) {
    r.expect_keys(*gpio, {"chip", "lines"}, "gpio");
    if (const YamlNode* c = gpio->get("chip")) p.gpio_chip = r.string_value(*c, "gpio.chip");
    if (const YamlNode* lines = gpio->get("lines")) {
      if (lines->kind != YamlNode::Kind::Mapping) r.fail(*lines, "gpio.lines must be a mapping of name: line offset");
      for (const auto& [name, value] : lines->map)
        p.gpio_lines.emplace_back(name, static_cast<int>(r.int_value(*value, "gpio.lines." + name, 0, 1023)));
    }
  }
  if (const YamlNode* prec = root->get("precisions")) {
    p.precisions = r.string_list(*prec, "precisions");
    for (size_t i = 0; i < p.precisions.size(); ++i)
      if (p.precisions[i] != "fp32" && p.precisions[i] != "fp16" && p.precisions[i] != "bf16" &&
          p.precisions[i] != "int8")
        r.fail(*prec->items[i], "precision must be fp32, fp16, bf16 or int8, got '" + p.precisions[i] + "'");
  } else {
    p.precisions = {"fp32"};
  }
  return p;
}

std::vector<std::string> board_profile_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("EDGERT_BOARD_PROFILES")) dirs.push_back(env);
  std::string compiled = EDGERT_BOARD_PROFILE_DIRS;
  size_t start = 0;
  while (start <= compiled.size()) {
    size_t colon = compiled.find(':', start);
    dirs.push_back(compiled.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return dirs;
}

std::vector<std::string> board_profile_names() {
  std::set<std::string> names;
  for (const std::string& dir : board_profile_dirs())
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string file = e->d_name;
        if (file.size() > 5 && file[0] != '.' && file.compare(file.size() - 5, 5, ".yaml") == 0)
          names.insert(file.substr(0, file.size() - 5));
      }
      closedir(d);
    }
  return {names.begin(), names.end()};
}

std::string find_board_profile(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".yaml") == 0))
    return name_or_path;
  std::string searched;
  for (const std::string& dir : board_profile_dirs()) {
    std::string file = dir + "/" + name_or_path + ".yaml";
    if (access(file.c_str(), R_OK) == 0) return file;
    searched += (searched.empty() ? "" : ", ") + dir;
  }
  std::string available;
  for (const std::string& name : board_profile_names()) available += (available.empty() ? "" : ", ") + name;
  throw ConfigError("board profile '" + name_or_path + "' not found in " + searched + "; available: native (this " +
                    "machine), " + (available.empty() ? std::string("none") : available) +
                    " (edgert boards describes them; or pass a path to a .yaml file, or set EDGERT_BOARD_PROFILES)");
}

}  // namespace edgert::config
