// GPIO lines through libgpiod v1 (the character device, /dev/gpiochipN): an output the daemon
// drives, and an edge-triggered input whose fd the event loop watches. Lines are requested with
// consumer "edgertd", so gpioinfo shows who holds them, and are released on destruction.
//
// A chip is named the ways gpiod tools accept: a path ("/dev/gpiochip0"), a name ("gpiochip0"),
// a label ("gpio-sim.0-node0") or a number ("0"). Errors throw std::runtime_error naming the
// chip, the line and strerror.
#pragma once

#include <cstdint>
#include <string>

struct gpiod_chip;
struct gpiod_line;

namespace edgert::daemon {

constexpr const char* kGpioConsumer = "edgertd";

// Owns an open chip; the line handles gpiod gives out live as long as it does.
class GpioChip {
 public:
  explicit GpioChip(const std::string& chip);
  ~GpioChip();
  GpioChip(const GpioChip&) = delete;
  GpioChip& operator=(const GpioChip&) = delete;

  const std::string& name() const { return name_; }
  // The line at `offset`, not yet requested; throws if the chip has no such line.
  gpiod_line* line(unsigned offset) const;

 private:
  std::string name_;
  gpiod_chip* chip_ = nullptr;
};

class GpioOutput {
 public:
  GpioOutput(const std::string& chip, unsigned offset, bool initial_high = false);
  ~GpioOutput();  // releases the line; the kernel keeps its last value (driver dependent)
  GpioOutput(const GpioOutput&) = delete;
  GpioOutput& operator=(const GpioOutput&) = delete;

  void set(bool high);
  bool get() const;  // reads the line back through the same request
  std::string describe() const;

 private:
  GpioChip chip_;
  unsigned offset_;
  gpiod_line* line_ = nullptr;
};

struct GpioEdgeEvent {
  bool rising = false;
  uint64_t timestamp_ns = 0;  // the kernel's timestamp of the edge (CLOCK_MONOTONIC on 5.7+ kernels)
};

class GpioTriggerInput {
 public:
  enum class Edge { kRising, kBoth };
  GpioTriggerInput(const std::string& chip, unsigned offset, Edge edge = Edge::kRising);
  ~GpioTriggerInput();
  GpioTriggerInput(const GpioTriggerInput&) = delete;
  GpioTriggerInput& operator=(const GpioTriggerInput&) = delete;

  // Readable when an edge is queued; owned by this object (do not close). It is non-blocking,
  // so a spurious wake-up costs a false from read_event, never a stalled loop.
  int fd() const { return fd_; }
  // Consumes one queued edge into `event` (may be null); false when none is queued.
  bool read_event(GpioEdgeEvent* event = nullptr);
  std::string describe() const;

 private:
  GpioChip chip_;
  unsigned offset_;
  gpiod_line* line_ = nullptr;
  int fd_ = -1;
};

}  // namespace edgert::daemon
