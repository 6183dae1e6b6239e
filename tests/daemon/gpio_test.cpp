// GPIO lines and GpioSink.
//
// Two tiers live in this binary, because GPIO needs a chip and the build hosts have none
// (Debian's kernel does not build gpio-sim; the VM test tier loads an out-of-tree build):
//   GpioHost.*  run everywhere and touch no chip. The host suite registers only these
//               (--gtest_filter=GpioHost.*).
//   GpioSim.*   need a gpio-sim chip named by EDGERT_TEST_GPIOCHIP (e.g. /dev/gpiochip0) with at
//               least 3 lines: 0 = detect output, 1 = heartbeat output, 2 = trigger input. They
//               FAIL, never skip, when it is unset, so a VM run that lost its chip cannot pass
//               by doing nothing; register them only in the VM tier.
// Outputs are read back through gpiod on the same request and, where the sim's sysfs directory
// exists, through its sim_gpioN/value too. Inputs are driven by writing the sim's
// sim_gpioN/pull. The directory is found from the chip (/sys/bus/gpio/devices/gpiochipN, a link
// into /sys/devices/platform/gpio-sim.M/) or given by EDGERT_TEST_GPIOSIM_DIR.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "gpio.h"
#include "gpio_sink.h"

namespace edgert::daemon {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kDetectLine = 0, kHeartbeatLine = 1, kTriggerLine = 2;

template <typename Make>
std::string error_of(Make make) {
  try {
    make();
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

TEST(GpioHost, OpeningAMissingChipNamesIt) {
  std::string path = "/dev/gpiochip-edgert-missing";
  std::string message = error_of([&] { GpioOutput out(path, 0); });
  EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;

  message = error_of([] { GpioTriggerInput in("edgert-missing-chip", 3); });
  EXPECT_NE(message.find("'edgert-missing-chip'"), std::string::npos) << message;
}

Result result_with(std::initializer_list<Detection> detections) {
  Result r;
  r.pipeline = "cam0";
  r.detections = detections;
  return r;
}

Detection detection(int class_id, const std::string& label, float score) {
  Detection d;
  d.class_id = class_id;
  d.label = label;
  d.score = score;
  return d;
}

TEST(GpioHost, DetectionMatchesByLabelOrIdAboveMinScore) {
  GpioSinkConfig config;
  config.classes = {"person", "3"};
  config.min_score = 0.5f;
  EXPECT_TRUE(gpio_detection_matches(result_with({detection(0, "person", 0.9f)}), config));
  EXPECT_TRUE(gpio_detection_matches(result_with({detection(3, "", 0.5f)}), config));  // id, at the threshold
  EXPECT_FALSE(gpio_detection_matches(result_with({detection(0, "person", 0.49f)}), config));
  EXPECT_FALSE(gpio_detection_matches(result_with({detection(1, "car", 0.99f)}), config));
  EXPECT_FALSE(gpio_detection_matches(result_with({}), config));
  EXPECT_TRUE(gpio_detection_matches(result_with({detection(1, "car", 0.9f), detection(0, "person", 0.8f)}), config));
  config.classes.clear();  // any class counts
  EXPECT_TRUE(gpio_detection_matches(result_with({detection(1, "car", 0.9f)}), config));
}

class GpioSim : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* chip = getenv("EDGERT_TEST_GPIOCHIP");
    if (!chip || !*chip)
      FAIL() << "EDGERT_TEST_GPIOCHIP is not set: GpioSim.* need a gpio-sim chip and run only in the VM test tier "
                "(the host suite runs --gtest_filter=GpioHost.*)";
    chip_ = chip;
    if (const char* dir = getenv("EDGERT_TEST_GPIOSIM_DIR")) {
      sim_dir_ = dir;
    } else {
      std::error_code ignored;
      fs::path link = fs::path("/sys/bus/gpio/devices") / fs::path(chip_).filename();
      fs::path resolved = fs::canonical(link, ignored);
      if (!resolved.empty() && fs::exists(resolved / "sim_gpio0")) sim_dir_ = resolved.string();
    }
  }

  bool have_sim() const { return !sim_dir_.empty(); }

  std::string sim_read(unsigned line, const char* attribute) const {
    std::ifstream in(sim_dir_ + "/sim_gpio" + std::to_string(line) + "/" + attribute);
    std::string value;
    in >> value;
    return value;
  }

  void sim_write(unsigned line, const char* attribute, const std::string& value) const {
    std::string path = sim_dir_ + "/sim_gpio" + std::to_string(line) + "/" + attribute;
    std::ofstream out(path);
    out << value;
    out.close();
    ASSERT_TRUE(out) << "cannot write '" << value << "' to " << path;
  }

  std::string chip_, sim_dir_;
};

TEST_F(GpioSim, OutputReadsBackWhatWasSet) {
  GpioOutput out(chip_, kDetectLine);
  EXPECT_FALSE(out.get());
  out.set(true);
  EXPECT_TRUE(out.get());
  if (have_sim()) {
    EXPECT_EQ(sim_read(kDetectLine, "value"), "1");
  }
  out.set(false);
  EXPECT_FALSE(out.get());
  if (have_sim()) {
    EXPECT_EQ(sim_read(kDetectLine, "value"), "0");
  }
}

TEST_F(GpioSim, ASecondRequestOfTheLineSaysItIsBusy) {
  GpioOutput first(chip_, kDetectLine);
  std::string message = error_of([&] { GpioOutput second(chip_, kDetectLine); });
  EXPECT_NE(message.find("gpio line 0 of chip '" + chip_ + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("Device or resource busy"), std::string::npos) << message;
}

TEST_F(GpioSim, TriggerInputSeesEdgesDrivenByTheSimPull) {
  ASSERT_TRUE(have_sim()) << "no gpio-sim sysfs directory for " << chip_ << " to drive the input; set "
                          << "EDGERT_TEST_GPIOSIM_DIR";
  sim_write(kTriggerLine, "pull", "pull-down");
  GpioTriggerInput in(chip_, kTriggerLine, GpioTriggerInput::Edge::kBoth);
  EXPECT_FALSE(in.read_event()) << "an edge was queued before the line moved";

  auto next_edge = [&](GpioEdgeEvent* event) {
    pollfd p{in.fd(), POLLIN, 0};
    return poll(&p, 1, 2000) == 1 && in.read_event(event);
  };
  GpioEdgeEvent event;
  sim_write(kTriggerLine, "pull", "pull-up");
  ASSERT_TRUE(next_edge(&event)) << "no edge within 2 s of pulling line " << kTriggerLine << " up";
  EXPECT_TRUE(event.rising);
  EXPECT_GT(event.timestamp_ns, 0u);
  sim_write(kTriggerLine, "pull", "pull-down");
  ASSERT_TRUE(next_edge(&event)) << "no edge within 2 s of pulling line " << kTriggerLine << " down";
  EXPECT_FALSE(event.rising);
  EXPECT_FALSE(in.read_event()) << "read_event must not block or invent edges";
}

TEST_F(GpioSim, SinkDrivesDetectAndHeartbeatLines) {
  GpioSinkConfig config;
  config.chip = chip_;
  config.detect_line = kDetectLine;
  config.heartbeat_line = kHeartbeatLine;
  config.classes = {"person"};
  config.min_score = 0.5f;
  GpioSink sink(config);
  auto detect = [&] { return have_sim() ? sim_read(kDetectLine, "value") : std::string(sink.detect_level() ? "1" : "0"); };
  auto heartbeat = [&] { return have_sim() ? sim_read(kHeartbeatLine, "value") : std::string(sink.heartbeat_level() ? "1" : "0"); };
  EXPECT_EQ(detect(), "0");
  EXPECT_EQ(heartbeat(), "0");

  sink.publish(result_with({detection(0, "person", 0.9f)}));
  EXPECT_EQ(detect(), "1");
  EXPECT_EQ(heartbeat(), "1");
  sink.publish(result_with({detection(0, "person", 0.3f)}));
  EXPECT_EQ(detect(), "0");
  EXPECT_EQ(heartbeat(), "0");
  sink.publish(result_with({detection(0, "person", 0.7f)}));
  sink.publish(result_with({detection(0, "person", 0.8f)}));  // still detected: the line stays up
  EXPECT_EQ(detect(), "1");
  sink.tick();  // per-result mode: the timer does not touch the heartbeat
  EXPECT_EQ(heartbeat(), "0");
  EXPECT_EQ(sink.write_failures(), 0u);
}

TEST_F(GpioSim, TimerHeartbeatTogglesOnTickOnly) {
  GpioSinkConfig config;
  config.chip = chip_;
  config.heartbeat_line = kHeartbeatLine;
  config.heartbeat = GpioSinkConfig::Heartbeat::kTimer;
  GpioSink sink(config);
  sink.publish(result_with({}));
  EXPECT_FALSE(sink.heartbeat_level());
  sink.tick();
  EXPECT_TRUE(sink.heartbeat_level());
  if (have_sim()) {
    EXPECT_EQ(sim_read(kHeartbeatLine, "value"), "1");
  }
  sink.tick();
  EXPECT_FALSE(sink.heartbeat_level());
}

}  // namespace
}  // namespace edgert::daemon
