// Board profiles are validated strictly, with file:line in every error.
#include <gtest/gtest.h>

#include <fstream>

#include "board_profile.h"
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

}  // namespace
}  // namespace edgert::test
