#include "board.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "error.h"
#include "host_machine.h"

namespace edgert {

std::string board_fingerprint(const BoardHardware& hw) {
  std::vector<std::string> features = hw.cpu_features;
  std::sort(features.begin(), features.end());
  features.erase(std::unique(features.begin(), features.end()), features.end());
  std::string canonical = "arch=" + hw.architecture + ";features=";
  for (size_t i = 0; i < features.size(); ++i) canonical += (i ? "," : "") + features[i];
  canonical += ";gpu=" + (hw.gpu.empty() ? std::string("none") : hw.gpu);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH64(canonical.data(), canonical.size(), 0)));
  return hex;
}

std::string host_architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

bool host_has_cpu_feature(const std::string& f) {
#if defined(__x86_64__)
  // cpuid plus the OS's XSAVE state: a CPU with AVX registers the kernel does not save is no
  // AVX machine.
  unsigned eax, ebx, ecx, edx;
  __cpuid(1, eax, ebx, ecx, edx);
  unsigned leaf1_ecx = ecx;
  bool os_avx = false, os_avx512 = false;
  if (leaf1_ecx & (1u << 27)) {
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    os_avx = (lo & 0x6u) == 0x6u;
    os_avx512 = (lo & 0xe6u) == 0xe6u;
  }
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  unsigned leaf7_ebx = ebx, leaf7_ecx = ecx;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  unsigned leaf7_1_eax = eax;
  if (f == "sse4.2") return leaf1_ecx & (1u << 20);
  if (f == "avx") return os_avx && (leaf1_ecx & (1u << 28));
  if (f == "fma") return os_avx && (leaf1_ecx & (1u << 12));
  if (f == "f16c") return os_avx && (leaf1_ecx & (1u << 29));
  if (f == "avx2") return os_avx && (leaf7_ebx & (1u << 5));
  if (f == "avx512f") return os_avx512 && (leaf7_ebx & (1u << 16));
  if (f == "avx512bw") return os_avx512 && (leaf7_ebx & (1u << 30));
  if (f == "avx512vl") return os_avx512 && (leaf7_ebx & (1u << 31));
  if (f == "avx512vnni") return os_avx512 && (leaf7_ecx & (1u << 11));
  if (f == "avx512vbmi") return os_avx512 && (leaf7_ecx & (1u << 1));
  if (f == "avx512bf16") return os_avx512 && (leaf7_1_eax & (1u << 5));
  return false;
#elif defined(__aarch64__)
  unsigned long hwcap = getauxval(AT_HWCAP);
  if (f == "neon" || f == "asimd") return hwcap & HWCAP_ASIMD;
  if (f == "fp16") return hwcap & HWCAP_FPHP;
  if (f == "asimdhp") return hwcap & HWCAP_ASIMDHP;
  if (f == "dotprod") return hwcap & HWCAP_ASIMDDP;
  return false;
#else
  (void)f;
  return false;
#endif
}

edgert_status check_board_compatible(const std::string& board_name, const BoardHardware& hw,
                                     const std::string& fingerprint, const std::string& expected_board,
                                     const std::string& host_board, edgert_error* error) {
  const std::string gpu = hw.gpu.empty() ? "none" : hw.gpu;
  if (board_fingerprint(hw) != fingerprint)
    return set_error(error, EDGERT_ERR_BOARD,
                     "engine's board record for '%s' is inconsistent: fingerprint %s does not match its "
                     "hardware description (%s, CPU features as listed, GPU %s: %s); the file was altered or "
                     "written by a faulty builder",
                     board_name.c_str(), fingerprint.c_str(), hw.architecture.c_str(), gpu.c_str(),
                     board_fingerprint(hw).c_str());
  const std::string here = !expected_board.empty() ? expected_board
                           : !host_board.empty()   ? host_board
                                                   : native_board_name(this_host_machine());
  if (hw.architecture != host_architecture())
    return set_error(error, EDGERT_ERR_BOARD,
                     "engine was built for board '%s' (%s) but this machine is '%s' (%s); rebuild it for "
                     "this machine (edgert build --board native)",
                     board_name.c_str(), hw.architecture.c_str(), here.c_str(), host_architecture().c_str());
  for (const std::string& f : hw.cpu_features)
    if (!host_has_cpu_feature(f))
      return set_error(error, EDGERT_ERR_BOARD,
                       "engine was built for board '%s', which has CPU feature '%s'; this machine, '%s' (%s), "
                       "lacks it; rebuild it for this machine (edgert build --board native)",
                       board_name.c_str(), f.c_str(), here.c_str(), host_architecture().c_str());
  if (!expected_board.empty() && expected_board != board_name)
    return set_error(error, EDGERT_ERR_BOARD,
                     "engine was built for board '%s' but this machine is configured as '%s'; rebuild "
                     "with --board %s (or load with the board check overridden)",
                     board_name.c_str(), expected_board.c_str(), expected_board.c_str());
  return EDGERT_OK;
}

}  // namespace edgert
