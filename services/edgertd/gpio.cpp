#include "gpio.h"

#include <errno.h>
#include <fcntl.h>
#include <gpiod.h>
#include <string.h>

#include <stdexcept>

namespace edgert::daemon {

namespace {

std::string line_name(const std::string& chip, unsigned offset) {
  return "gpio line " + std::to_string(offset) + " of chip '" + chip + "'";
}

[[noreturn]] void fail(const std::string& what, int error, const std::string& hint = "") {
  std::string message = what + ": " + strerror(error);
  // The errno-specific hint wins: it names the actual cause.
  if (error == EBUSY)
    message += " (another consumer holds it; gpioinfo shows which)";
  else if (error == EACCES || error == EPERM)
    message += " (edgertd needs read-write access to the /dev/gpiochip node)";
  else if (!hint.empty())
    message += " (" + hint + ")";
  throw std::runtime_error(message);
}

}  // namespace

GpioChip::GpioChip(const std::string& chip) : name_(chip) {
  errno = 0;
  chip_ = gpiod_chip_open_lookup(chip.c_str());
  if (!chip_) {
    int error = errno ? errno : ENOENT;
    fail("cannot open gpio chip '" + chip + "'", error,
         "give a path like /dev/gpiochip0, a name, a label or a number; gpiodetect lists the chips");
  }
}

GpioChip::~GpioChip() { gpiod_chip_close(chip_); }  // also releases any line still requested

gpiod_line* GpioChip::line(unsigned offset) const {
  gpiod_line* line = gpiod_chip_get_line(chip_, offset);
  if (!line)
    fail("cannot get " + line_name(name_, offset), errno,
         "the chip has " + std::to_string(gpiod_chip_num_lines(chip_)) + " lines");
  return line;
}

GpioOutput::GpioOutput(const std::string& chip, unsigned offset, bool initial_high)
    : chip_(chip), offset_(offset), line_(chip_.line(offset)) {
  if (gpiod_line_request_output(line_, kGpioConsumer, initial_high ? 1 : 0) != 0)
    fail("cannot request " + describe() + " as output", errno);
}

GpioOutput::~GpioOutput() { gpiod_line_release(line_); }

std::string GpioOutput::describe() const { return line_name(chip_.name(), offset_); }

void GpioOutput::set(bool high) {
  if (gpiod_line_set_value(line_, high ? 1 : 0) != 0) fail("cannot set " + describe(), errno);
}

bool GpioOutput::get() const {
  int value = gpiod_line_get_value(line_);
  if (value < 0) fail("cannot read back " + describe(), errno);
  return value != 0;
}

GpioTriggerInput::GpioTriggerInput(const std::string& chip, unsigned offset, Edge edge)
    : chip_(chip), offset_(offset), line_(chip_.line(offset)) {
  int rc = edge == Edge::kBoth ? gpiod_line_request_both_edges_events(line_, kGpioConsumer)
                               : gpiod_line_request_rising_edge_events(line_, kGpioConsumer);
  if (rc != 0) fail("cannot request edge events on " + describe(), errno);
  fd_ = gpiod_line_event_get_fd(line_);
  int flags = fd_ >= 0 ? fcntl(fd_, F_GETFL) : -1;
  if (flags < 0 || fcntl(fd_, F_SETFL, flags | O_NONBLOCK) != 0) {
    int error = errno;
    gpiod_line_release(line_);
    fail("cannot make the event fd of " + describe() + " non-blocking", error);
  }
}

GpioTriggerInput::~GpioTriggerInput() { gpiod_line_release(line_); }

std::string GpioTriggerInput::describe() const { return line_name(chip_.name(), offset_); }

bool GpioTriggerInput::read_event(GpioEdgeEvent* event) {
  gpiod_line_event raw;
  if (gpiod_line_event_read_fd(fd_, &raw) != 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    fail("cannot read an edge event from " + describe(), errno);
  }
  if (event) {
    event->rising = raw.event_type == GPIOD_LINE_EVENT_RISING_EDGE;
    event->timestamp_ns = static_cast<uint64_t>(raw.ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(raw.ts.tv_nsec);
  }
  return true;
}

}  // namespace edgert::daemon
