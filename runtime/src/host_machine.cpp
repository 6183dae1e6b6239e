#include "host_machine.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace edgert {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Jetson SoCs by device-tree compatible string, with their integrated GPU's compute capability.
struct TegraSoc {
  const char* compatible;
  const char* family;
  const char* compute_capability;
};
constexpr TegraSoc kTegraSocs[] = {
    {"nvidia,tegra234", "Orin", "8.7"},
    {"nvidia,tegra194", "Xavier", "7.2"},
    {"nvidia,tegra186", "TX2", "6.2"},
    {"nvidia,tegra210", "Nano/TX1", "5.3"},
};

// A Jetson: /proc/device-tree/compatible names the SoC (NUL-separated strings); without a
// device tree (some containers) /etc/nv_tegra_release still says it is L4T, SoC unknown.
bool detect_jetson(const std::string& root, HostMachine& host) {
  const std::string compatible_path = root + "/proc/device-tree/compatible";
  std::string compatible = read_text(compatible_path);
  std::replace(compatible.begin(), compatible.end(), '\0', '\n');
  for (const TegraSoc& soc : kTegraSocs)
    if (compatible.find(soc.compatible) != std::string::npos) {
      host.hardware.gpu = std::string("cuda-sm") + soc.compute_capability + "-unified";
      std::string model = read_text(root + "/proc/device-tree/model");
      model = trim(model.substr(0, model.find('\0')));
      host.gpu_model = (model.empty() ? std::string("NVIDIA Jetson ") + soc.family : model) + ", integrated GPU sm_" +
                       soc.compute_capability;
      host.gpu_source = compatible_path;
      host.gpu_exact = true;
      return true;
    }
  const std::string release_path = root + "/etc/nv_tegra_release";
  std::string release = read_text(release_path);
  if (release.empty()) return false;
  host.hardware.gpu = "cuda-unified";
  host.gpu_model = "NVIDIA Jetson (" + trim(release.substr(0, release.find(','))) + "), SoC not visible";
  host.gpu_source = release_path;
  return true;
}

// The compute capability of a discrete NVIDIA GPU, from the model name its driver reports
// ("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 3060", "Tesla T4"); empty when not known here.
// Without CUDA this name is all there is; an unlisted model stays "cuda-discrete".
std::string compute_capability_of(const std::string& model) {
  std::vector<std::string> words;
  std::istringstream in(model);
  for (std::string w; in >> w;) words.push_back(w);
  auto starts = [](const std::string& w, const char* prefix) { return w.rfind(prefix, 0) == 0; };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (starts(w, "H100") || starts(w, "H200") || starts(w, "H800") || starts(w, "GH200")) return "9.0";
    if (starts(w, "A100") || starts(w, "A800") || w == "A30") return "8.0";
    if (starts(w, "L40") || w == "L4") return "8.9";
    if (w == "A10" || w == "A10G" || w == "A16" || w == "A2" || w == "A40" || starts(w, "A4000") ||
        starts(w, "A5000") || starts(w, "A6000"))
      return "8.6";
    if (w == "T4") return "7.5";
    if (starts(w, "V100")) return "7.0";
    if (w == "RTX" && i + 1 < words.size()) {
      const std::string& n = words[i + 1];
      if (starts(n, "50")) return "12.0";
      if (starts(n, "40")) return "8.9";
      if (starts(n, "30")) return "8.6";
      if (starts(n, "20")) return "7.5";
    }
  }
  return "";
}

// A discrete NVIDIA GPU through its kernel driver: the model from the first GPU's information
// file (its compute capability when the model is known), else just the device node.
bool detect_nvidia_driver(const std::string& root, HostMachine& host) {
  const std::string gpus = root + "/proc/driver/nvidia/gpus";
  std::vector<std::string> entries;
  if (DIR* dir = opendir(gpus.c_str())) {
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.') entries.push_back(e->d_name);
    closedir(dir);
  }
  std::sort(entries.begin(), entries.end());
  for (const std::string& entry : entries) {
    const std::string path = gpus + "/" + entry + "/information";
    std::istringstream lines(read_text(path));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("Model:", 0) == 0) {
        const std::string model = trim(line.substr(6));
        const std::string cc = compute_capability_of(model);
        // As a profile spells a discrete GPU (board_profile.cpp): "cuda-sm9.0".
        host.hardware.gpu = cc.empty() ? "cuda-discrete" : "cuda-sm" + cc;
        host.gpu_exact = !cc.empty();
        host.gpu_model = model + (entries.size() > 1 ? " (+" + std::to_string(entries.size() - 1) + " more)" : "");
        host.gpu_source = path;
        return true;
      }
  }
  if (exists(root + "/dev/nvidia0")) {
    host.hardware.gpu = "cuda-discrete";
    host.gpu_model = "NVIDIA GPU";
    host.gpu_source = root + "/dev/nvidia0";
    return true;
  }
  return false;
}

int64_t mem_total_mb(const std::string& root) {
  std::istringstream lines(read_text(root + "/proc/meminfo"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("MemTotal:", 0) == 0) return std::atoll(line.c_str() + 9) / 1024;
  return 0;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

}  // namespace

const std::vector<std::string>& known_cpu_features(const std::string& architecture) {
  static const std::vector<std::string> x86 = {"sse4.2", "avx", "avx2", "fma", "f16c",
                                               "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512vbmi",
                                               "avx512bf16"};
  static const std::vector<std::string> arm = {"neon", "asimd", "fp16", "asimdhp", "dotprod"};
  static const std::vector<std::string> none;
  return architecture == "x86_64" ? x86 : architecture == "aarch64" ? arm : none;
}

HostMachine detect_host_machine(const std::string& root) {
  HostMachine host;
  host.hardware.architecture = host_architecture();
  for (const std::string& feature : known_cpu_features(host.hardware.architecture))
    if (host_has_cpu_feature(feature)) host.hardware.cpu_features.push_back(feature);
  host.hardware.gpu = "none";
  host.cpu_count = affinity_cpus();
  host.ram_mb = mem_total_mb(root);
  if (!detect_jetson(root, host)) detect_nvidia_driver(root, host);
  return host;
}

const HostMachine& this_host_machine() {
  static const HostMachine host = detect_host_machine();
  return host;
}

std::string native_board_name(const HostMachine& host) {
  const std::vector<std::string>& f = host.hardware.cpu_features;
  auto has = [&](const char* name) { return std::find(f.begin(), f.end(), name) != f.end(); };
  std::string isa = "baseline";
  if (host.hardware.architecture == "x86_64") {
    isa = has("avx512f") ? "avx512" : has("avx2") ? "avx2" : has("avx") ? "avx" : has("sse4.2") ? "sse4.2" : "baseline";
  } else if (host.hardware.architecture == "aarch64") {
    isa = has("dotprod") ? "dotprod" : has("fp16") || has("asimdhp") ? "fp16" : has("neon") || has("asimd") ? "neon"
                                                                                                       : "baseline";
  }
  std::string name = "native-" + host.hardware.architecture + "-" + isa;
  if (host.gpu_exact) name += "-" + host.hardware.gpu;
  return name;
}

int default_kernel_threads() {
  if (const char* env = std::getenv("EDGERT_CPU_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return affinity_cpus();
}

}  // namespace edgert
