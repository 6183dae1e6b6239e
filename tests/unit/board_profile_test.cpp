// Board profiles are validated strictly, with file:line in every error; `--board native` picks
// the profile a machine is (host_machine.h, board_catalog.h); engines record their board's GPU
// and are refused only for what this machine lacks, naming both boards.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "board_catalog.h"
#include "board_profile.h"
#include "error.h"
#include "host_machine.h"
#include "test_support.h"
#include "yaml_tree.h"

namespace edgert::test {
namespace {

std::string load_error(const std::string& yaml) {
  TempDir dir;
  std::string path = dir.file("board.yaml");
  std::ofstream(path) << yaml;
  try {
    config::load_board_profile(path);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

const char* kValid = R"(name: test-board
architecture: aarch64
cpu:
  features: [neon, dotprod]
  cores: 4
memory:
  ram_mb: 4096
  edgertd_budget_mb: 512
)";

TEST(BoardProfile, ShippedProfileLoads) {
  auto p = config::load_board_profile(source_dir() + "/board_profiles/x86_64-generic.yaml");
  EXPECT_EQ(p.name, "x86_64-generic");
  EXPECT_EQ(p.hardware.architecture, "x86_64");
  EXPECT_EQ(p.fingerprint().size(), 16u);
}

TEST(BoardProfile, FingerprintIgnoresFeatureOrderButNotFeatures) {
  BoardHardware a{"aarch64", {"neon", "dotprod"}, "none"}, b{"aarch64", {"dotprod", "neon"}, "none"},
      c{"aarch64", {"neon"}, "none"};
  EXPECT_EQ(board_fingerprint(a), board_fingerprint(b));
  EXPECT_NE(board_fingerprint(a), board_fingerprint(c));
}

TEST(BoardProfile, UnknownKeyIsAnErrorWithItsLine) {
  std::string e = load_error(std::string(kValid) + "turbo: yes\n");
  EXPECT_NE(e.find("board.yaml:9:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'turbo'"), std::string::npos) << e;
}

// 70 nested flow sequences: refused at the 65th level with its position (the sanitizer tier's
// leak check sees that the refused level's parser event is freed too).
TEST(BoardProfile, NestingDeeperThan64LevelsIsRefused) {
  std::string e = load_error(std::string(kValid) + "extra: " + std::string(70, '[') + "1" + std::string(70, ']') + "\n");
  EXPECT_NE(e.find("nesting deeper than 64 levels"), std::string::npos) << e;
  EXPECT_NE(e.find("board.yaml:9:"), std::string::npos) << e;
}

TEST(BoardProfile, MissingKeyIsNamed) {
  std::string e = load_error("name: x\narchitecture: x86_64\ncpu:\n  cores: 2\n");
  EXPECT_NE(e.find("missing key 'memory'"), std::string::npos) << e;
}

TEST(BoardProfile, BadValuesPointAtTheValue) {
  std::string e = load_error("name: x\narchitecture: riscv\n");
  EXPECT_NE(e.find("board.yaml:2:15"), std::string::npos) << e;
  EXPECT_NE(e.find("riscv"), std::string::npos) << e;
  e = load_error("name: x\narchitecture: x86_64\ncpu:\n  cores: many\n");
  EXPECT_NE(e.find("'cpu.cores' must be an integer"), std::string::npos) << e;
  e = load_error("name: x\narchitecture: x86_64\ncpu:\n  cores: 2\n  features: [avx9000]\n");
  EXPECT_NE(e.find("unknown CPU feature 'avx9000'"), std::string::npos) << e;
  e = load_error("name: x\narchitecture: aarch64\ncpu:\n  cores: 2\n  features: [neon, avx2]\n");
  EXPECT_NE(e.find("unknown CPU feature 'avx2' for aarch64 (known: neon"), std::string::npos) << e;
}

TEST(BoardProfile, GpioLinesAreNamedOffsets) {
  auto p = config::load_board_profile(source_dir() + "/board_profiles/raspberry-pi-5-8gb.yaml");
  ASSERT_EQ(p.gpio_lines.size(), 3u);
  EXPECT_EQ(p.gpio_lines[0], (std::pair<std::string, int>{"trigger", 17}));
  std::string e = load_error(std::string(kValid) + "gpio:\n  chip: gpiochip0\n  lines:\n    detect: 4096\n");
  EXPECT_NE(e.find("'gpio.lines.detect' must be between 0 and 1023"), std::string::npos) << e;
  e = load_error(std::string(kValid) + "gpio:\n  lines: [1, 2]\n");
  EXPECT_NE(e.find("gpio.lines must be a mapping"), std::string::npos) << e;
}

TEST(BoardProfile, SyntaxErrorsCarryALocation) {
  std::string e = load_error("name: [unclosed\n");
  EXPECT_NE(e.find("board.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
}

TEST(BoardProfile, NamesResolveToShippedFiles) {
  EXPECT_NE(config::find_board_profile("x86_64-generic").find("x86_64-generic.yaml"), std::string::npos);
  EXPECT_THROW(config::find_board_profile("no-such-board"), config::ConfigError);
}

TEST(BoardProfile, AnUnknownNameListsTheProfilesThereAre) {
  try {
    config::resolve_board("no-such-board");
    FAIL() << "no error";
  } catch (const config::ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("board profile 'no-such-board' not found"), std::string::npos) << m;
    for (const char* name : {"native", "jetson-orin-nano-8gb", "raspberry-pi-5-8gb", "x86_64-generic", "qemu-virt-x86_64"})
      EXPECT_NE(m.find(name), std::string::npos) << name << " not listed: " << m;
  }
}

TEST(BoardProfile, JetsonProfilesDescribeTheirIntegratedGpu) {
  for (const char* name : {"jetson-orin-nano-8gb", "jetson-orin-nx-16gb", "jetson-agx-orin-64gb"}) {
    auto p = config::load_board_profile(config::find_board_profile(name));
    EXPECT_EQ(p.hardware.gpu, "cuda-sm8.7-unified") << name;
  }
  BoardHardware with_gpu{"aarch64", {"neon"}, "cuda-sm8.7-unified"}, without{"aarch64", {"neon"}, "none"};
  EXPECT_NE(board_fingerprint(with_gpu), board_fingerprint(without));
}

// An engine's board record: the fingerprint must match the facts it lists (GPU included), then
// the machine must have the architecture and CPU features; the GPU is the GPU plugin's business.
TEST(BoardProfile, RefusalsNameTheEnginesBoardAndThisMachine) {
  auto jetson = config::load_board_profile(config::find_board_profile("jetson-orin-nano-8gb"));
  edgert_error error{};
  EXPECT_EQ(check_board_compatible(jetson.name, jetson.hardware, jetson.fingerprint(), "", "this-board", &error),
            host_architecture() == "aarch64" && host_has_cpu_feature("dotprod") && host_has_cpu_feature("asimdhp") &&
                    host_has_cpu_feature("fp16")
                ? EDGERT_OK
                : EDGERT_ERR_BOARD);
  if (host_architecture() != "aarch64") {
    std::string m = error.message;
    EXPECT_NE(m.find("built for board 'jetson-orin-nano-8gb' (aarch64) but this machine is 'this-board' (" +
                     host_architecture() + ")"),
              std::string::npos)
        << m;
  }
  // The GPU left out of the facts: the record no longer adds up (what every Jetson engine met
  // when the loader dropped it).
  BoardHardware no_gpu = jetson.hardware;
  no_gpu.gpu = "none";
  error = edgert_error{};
  EXPECT_EQ(check_board_compatible(jetson.name, no_gpu, jetson.fingerprint(), "", "", &error), EDGERT_ERR_BOARD);
  EXPECT_NE(std::string(error.message).find("inconsistent"), std::string::npos) << error.message;

  // A CPU feature this machine lacks: named, with both boards.
  BoardHardware future{host_architecture(), {}, "none"};
  std::string missing;
  for (const std::string& f : known_cpu_features(host_architecture()))
    if (!host_has_cpu_feature(f)) missing = f;
  if (!missing.empty()) {
    future.cpu_features = {missing};
    error = edgert_error{};
    EXPECT_EQ(check_board_compatible("future-board", future, board_fingerprint(future), "", "this-board", &error),
              EDGERT_ERR_BOARD);
    std::string m = error.message;
    EXPECT_NE(m.find("'future-board', which has CPU feature '" + missing + "'; this machine, 'this-board'"),
              std::string::npos)
        << m;
  }
  // Without a name from the caller the runtime names what it detects.
  error = edgert_error{};
  BoardHardware other{host_architecture() == "x86_64" ? "aarch64" : "x86_64", {}, "none"};
  EXPECT_EQ(check_board_compatible("other", other, board_fingerprint(other), "", "", &error), EDGERT_ERR_BOARD);
  EXPECT_NE(std::string(error.message).find("'" + native_board_name(this_host_machine()) + "'"), std::string::npos)
      << error.message;
}

HostMachine machine(const std::string& arch, std::vector<std::string> features, int cpus, int64_t ram_mb,
                    const std::string& gpu = "none", bool gpu_exact = false) {
  HostMachine host;
  host.hardware = BoardHardware{arch, std::move(features), gpu};
  host.cpu_count = cpus;
  host.ram_mb = ram_mb;
  host.gpu_exact = gpu_exact;
  return host;
}

std::vector<config::BoardProfile> shipped_profiles() {
  std::vector<config::BoardProfile> profiles;
  for (const char* name : {"jetson-agx-orin-64gb", "jetson-orin-nano-8gb", "jetson-orin-nx-16gb", "qemu-virt-aarch64",
                           "qemu-virt-x86_64", "raspberry-pi-5-8gb", "x86_64-avx512", "x86_64-cuda-sm90",
                           "x86_64-generic"})
    profiles.push_back(config::load_board_profile(source_dir() + "/board_profiles/" + name + ".yaml"));
  return profiles;
}

const std::vector<std::string> kX86v3 = {"sse4.2", "avx", "avx2", "fma", "f16c"};
const std::vector<std::string> kArmV82 = {"neon", "asimd", "fp16", "asimdhp", "dotprod"};

TEST(NativeBoard, PicksTheMostSpecificShippedProfileTheMachineHasEverythingOf) {
  const auto profiles = shipped_profiles();
  auto pick = [&](const HostMachine& host) { return config::pick_native_board(profiles, host); };

  std::vector<std::string> v4 = kX86v3;
  v4.insert(v4.end(), {"avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512vbmi"});
  auto avx512 = pick(machine("x86_64", v4, 2, 24000));
  EXPECT_EQ(avx512.profile.name, "x86_64-avx512");  // not x86_64-generic, which it also satisfies
  EXPECT_FALSE(avx512.detected);
  EXPECT_EQ(avx512.profile.cpu_cores, 2);  // tuned for this machine's CPUs, not the profile's 8
  EXPECT_EQ(pick(machine("x86_64", kX86v3, 4, 8000)).profile.name, "x86_64-generic");
  EXPECT_EQ(pick(machine("x86_64", {}, 1, 1024)).profile.name, "qemu-virt-x86_64");  // qemu's baseline CPU

  EXPECT_EQ(pick(machine("aarch64", kArmV82, 4, 8000)).profile.name, "raspberry-pi-5-8gb");
  EXPECT_EQ(pick(machine("aarch64", {"neon", "asimd"}, 1, 1024)).profile.name, "qemu-virt-aarch64");
  // A Jetson Orin: its GPU decides among the Arm v8.2 profiles, then cores and memory.
  const std::string orin = "cuda-sm8.7-unified";
  EXPECT_EQ(pick(machine("aarch64", kArmV82, 6, 7620, orin, true)).profile.name, "jetson-orin-nano-8gb");
  EXPECT_EQ(pick(machine("aarch64", kArmV82, 8, 15388, orin, true)).profile.name, "jetson-orin-nx-16gb");
  EXPECT_EQ(pick(machine("aarch64", kArmV82, 12, 62841, orin, true)).profile.name, "jetson-agx-orin-64gb");

  // An H100/H200 host: the profile with its GPU, though it lists fewer CPU features than the
  // host has (they go unused, and the reason says so).
  auto hopper = pick(machine("x86_64", v4, 16, 131072, "cuda-sm9.0", true));
  EXPECT_EQ(hopper.profile.name, "x86_64-cuda-sm90");
  EXPECT_FALSE(hopper.detected);
  EXPECT_NE(hopper.reason.find("avx512f"), std::string::npos) << hopper.reason;
  // A workstation GPU no profile has: the CPU's profile.
  EXPECT_EQ(pick(machine("x86_64", v4, 8, 32000, "cuda-sm8.6", true)).profile.name, "x86_64-avx512");
}

TEST(NativeBoard, AMachineNoProfileDescribesGetsItsDetectedProfile) {
  const auto profiles = shipped_profiles();
  // AVX-512 without VNNI: x86_64-generic would leave its AVX-512 kernels unused.
  std::vector<std::string> skylake = kX86v3;
  skylake.insert(skylake.end(), {"avx512f", "avx512bw", "avx512vl"});
  auto sk = config::pick_native_board(profiles, machine("x86_64", skylake, 4, 32000));
  EXPECT_TRUE(sk.detected);
  EXPECT_EQ(sk.profile.name, "native-x86_64-avx512");
  EXPECT_EQ(sk.profile.hardware.cpu_features, skylake);
  EXPECT_EQ(sk.profile.cpu_cores, 4);
  EXPECT_EQ(sk.profile.ram_mb, 32000);
  EXPECT_EQ(sk.profile.edgertd_budget_mb, 16000);
  EXPECT_NE(sk.reason.find("x86_64-generic"), std::string::npos) << sk.reason;
  EXPECT_NE(sk.reason.find("avx512f"), std::string::npos) << sk.reason;

  // A Jetson Xavier (sm_72): no shipped profile has its GPU; Raspberry Pi 5's CPU is not enough.
  auto xavier = config::pick_native_board(profiles, machine("aarch64", kArmV82, 8, 31000, "cuda-sm7.2-unified", true));
  EXPECT_TRUE(xavier.detected);
  EXPECT_EQ(xavier.profile.name, "native-aarch64-dotprod-cuda-sm7.2-unified");
  EXPECT_EQ(xavier.profile.hardware.gpu, "cuda-sm7.2-unified");
  EXPECT_EQ(xavier.profile.cuda_compute_capability, "7.2");
  EXPECT_TRUE(xavier.profile.unified_memory);

  // A discrete GPU (compute capability unknown without CUDA) does not make a workstation a
  // board of its own: its CPU profile is picked.
  std::vector<std::string> v4 = kX86v3;
  v4.insert(v4.end(), {"avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512vbmi"});
  auto workstation = config::pick_native_board(profiles, machine("x86_64", v4, 16, 64000, "cuda-discrete", false));
  EXPECT_EQ(workstation.profile.name, "x86_64-avx512");
  EXPECT_FALSE(workstation.detected);
  // A detected profile carries a GPU only when it is known exactly.
  EXPECT_EQ(config::pick_native_board(profiles, machine("x86_64", skylake, 4, 32000, "cuda-discrete", false)).profile.name,
            "native-x86_64-avx512");
  auto with_gpu = config::pick_native_board(profiles, machine("x86_64", skylake, 4, 32000, "cuda-sm8.6", true));
  EXPECT_EQ(with_gpu.profile.name, "native-x86_64-avx512-cuda-sm8.6");
  EXPECT_EQ(with_gpu.profile.hardware.gpu, "cuda-sm8.6");
  EXPECT_FALSE(with_gpu.profile.unified_memory);

  EXPECT_TRUE(config::pick_native_board({}, machine("x86_64", kX86v3, 2, 4096)).detected);
}

// Jetson and discrete NVIDIA GPUs are recognised from files alone (no CUDA): staged under a root.
TEST(NativeBoard, GpusAreDetectedFromTheDriversAndTheDeviceTree) {
  using namespace std::string_literals;
  TempDir root;
  auto put = [&](const std::string& path, const std::string& text) {
    std::string full = root.path() + path;
    for (size_t slash = full.find('/', root.path().size() + 1); slash != std::string::npos; slash = full.find('/', slash + 1))
      mkdir(full.substr(0, slash).c_str(), 0755);
    std::ofstream(full, std::ios::binary) << text;
  };
  HostMachine bare = detect_host_machine(root.path());
  EXPECT_EQ(bare.hardware.gpu, "none");
  EXPECT_EQ(bare.hardware.architecture, host_architecture());
  EXPECT_GE(bare.cpu_count, 1);

  put("/proc/meminfo", "MemTotal:        7802896 kB\nMemFree:  100 kB\n");
  put("/proc/driver/nvidia/gpus/0000:01:00.0/information", "Model: \t\t NVIDIA GeForce RTX 3060\nIRQ:   \t\t 150\n");
  HostMachine discrete = detect_host_machine(root.path());
  EXPECT_EQ(discrete.ram_mb, 7620);
  EXPECT_EQ(discrete.hardware.gpu, "cuda-sm8.6");  // the model names its compute capability
  EXPECT_EQ(discrete.gpu_model, "NVIDIA GeForce RTX 3060");
  EXPECT_TRUE(discrete.gpu_exact);
  EXPECT_FALSE(discrete.gpu_integrated());
  // As an H200's driver says it (the file's layout on the GPU machine).
  put("/proc/driver/nvidia/gpus/0000:01:00.0/information",
      "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-e2ad6ce3\nBus Type: \t PCIe\n");
  EXPECT_EQ(detect_host_machine(root.path()).hardware.gpu, "cuda-sm9.0");
  put("/proc/driver/nvidia/gpus/0000:01:00.0/information", "Model: \t\t NVIDIA Quadro FX 580\n");
  HostMachine unknown = detect_host_machine(root.path());
  EXPECT_EQ(unknown.hardware.gpu, "cuda-discrete");
  EXPECT_FALSE(unknown.gpu_exact);
  EXPECT_EQ(native_board_name(unknown).find("cuda"), std::string::npos);  // not exact: not in the name

  put("/proc/device-tree/compatible", "nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0nvidia,tegra234\0"s);
  put("/proc/device-tree/model", "NVIDIA Jetson Orin Nano Developer Kit\0"s);
  HostMachine orin = detect_host_machine(root.path());
  EXPECT_EQ(orin.hardware.gpu, "cuda-sm8.7-unified");
  EXPECT_TRUE(orin.gpu_exact);
  EXPECT_TRUE(orin.gpu_integrated());
  EXPECT_NE(orin.gpu_model.find("NVIDIA Jetson Orin Nano Developer Kit"), std::string::npos) << orin.gpu_model;
  EXPECT_NE(native_board_name(orin).find("-cuda-sm8.7-unified"), std::string::npos);

  TempDir l4t;
  std::string etc = l4t.path() + "/etc";
  mkdir(etc.c_str(), 0755);
  std::ofstream(etc + "/nv_tegra_release") << "# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref\n";
  HostMachine container = detect_host_machine(l4t.path());
  EXPECT_EQ(container.hardware.gpu, "cuda-unified");
  EXPECT_FALSE(container.gpu_exact);
  EXPECT_NE(container.gpu_model.find("R35"), std::string::npos) << container.gpu_model;
}

TEST(NativeBoard, ResolvesToThisMachinesPick) {
  config::ResolvedBoard native = config::resolve_board("native");
  EXPECT_TRUE(native.native);
  EXPECT_EQ(native.profile.name,
            config::pick_native_board(config::load_board_catalog().profiles, this_host_machine()).profile.name);
  EXPECT_EQ(native.profile.cpu_cores, default_kernel_threads());
  EXPECT_FALSE(native.reason.empty());
  config::ResolvedBoard named = config::resolve_board("x86_64-generic");
  EXPECT_FALSE(named.native);
  EXPECT_EQ(named.profile.cpu_cores, 2);  // the profile's own
}

// `edgert build` without --board builds for native; `edgert boards` says what that is.
TEST(BoardsCommand, DescribesEveryProfileAndWhatThisMachineIs) {
  auto r = run_command(edgert_cli() + " boards --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  const auto& m = j["machine"];
  EXPECT_EQ(m["architecture"], host_architecture());
  EXPECT_GE(m["cpu_count"].get<int>(), 1);
  EXPECT_EQ(m["edgert_version"], EDGERT_VERSION);
  const std::string native = m["native"]["name"];
  int natives = 0;
  std::set<std::string> names;
  for (const auto& p : j["profiles"]) {
    names.insert(p["name"].get<std::string>());
    natives += p["native"].get<bool>();
    if (p["architecture"] != host_architecture()) {
      EXPECT_FALSE(p["runs_here"].get<bool>()) << p;
      EXPECT_NE(p["why_not"].get<std::string>().find(host_architecture()), std::string::npos) << p;
    }
    if (p["native"].get<bool>()) {
      EXPECT_TRUE(p["runs_here"].get<bool>()) << p;
    }
  }
  EXPECT_EQ(natives, m["native"]["detected"].get<bool>() ? 0 : 1);
  for (const char* name : {"jetson-orin-nano-8gb", "jetson-orin-nx-16gb", "jetson-agx-orin-64gb", "raspberry-pi-5-8gb",
                           "x86_64-generic", "x86_64-avx512", "qemu-virt-x86_64", "qemu-virt-aarch64"})
    EXPECT_TRUE(names.count(name)) << name;

  auto text = run_command(edgert_cli() + " boards");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("--board native (the default) builds for: " + native), std::string::npos) << text.output;

  TempDir dir;
  save_model(make_small_model(), dir.file("small.onnx"));
  auto built = run_command(edgert_cli() + " build " + dir.file("small.onnx") + " -o " + dir.file("small.engine"));
  ASSERT_EQ(built.exit_code, 0) << built.output;
  EXPECT_NE(built.output.find("for board " + native + " (native)"), std::string::npos) << built.output;
  auto inspected = run_command(edgert_cli() + " inspect --json " + dir.file("small.engine"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  auto board = nlohmann::json::parse(inspected.output)["board"];
  EXPECT_EQ(board["name"], native);
  EXPECT_EQ(board["fingerprint"], m["native"]["fingerprint"]);
  EXPECT_EQ(board["gpu"], "none");
}

// The engines every Jetson profile gives: the board's GPU is recorded, and on a machine of
// another architecture the refusal is the architecture, naming both boards, never a broken record.
TEST(BoardsCommand, JetsonEnginesAreRefusedOnlyForWhatThisMachineLacks) {
  TempDir dir;
  save_model(make_small_model(), dir.file("small.onnx"));
  const std::string native =
      nlohmann::json::parse(run_command(edgert_cli() + " boards --json").output)["machine"]["native"]["name"];
  for (const char* name : {"jetson-orin-nano-8gb", "jetson-orin-nx-16gb", "jetson-agx-orin-64gb"}) {
    const std::string engine = dir.file(std::string(name) + ".engine");
    auto built = run_command(edgert_cli() + " build " + dir.file("small.onnx") + " --board " + name + " -o " + engine);
    ASSERT_EQ(built.exit_code, 0) << built.output;
    auto j = nlohmann::json::parse(run_command(edgert_cli() + " inspect --json " + engine).output);
    EXPECT_EQ(j["board"]["gpu"], "cuda-sm8.7-unified") << name;
    auto ran = run_command(edgert_cli() + " run " + engine);
    EXPECT_EQ(ran.output.find("inconsistent"), std::string::npos) << ran.output;
    if (host_architecture() != "aarch64") {
      EXPECT_EQ(ran.exit_code, 1) << ran.output;
      EXPECT_NE(ran.output.find("built for board '" + std::string(name) + "' (aarch64) but this machine is '" + native +
                                "' (" + host_architecture() + ")"),
                std::string::npos)
          << ran.output;
    }
  }
}

}  // namespace
}  // namespace edgert::test
