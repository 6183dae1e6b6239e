#include "control_protocol.h"

#include <cstdint>

namespace edgert::control {

std::string frame_message(const std::string& json) {
  uint32_t n = static_cast<uint32_t>(json.size());
  std::string out(4, '\0');
  out[0] = static_cast<char>(n >> 24);
  out[1] = static_cast<char>(n >> 16);
  out[2] = static_cast<char>(n >> 8);
  out[3] = static_cast<char>(n);
  return out + json;
}

FrameStatus take_frame(std::string& buffer, size_t limit, std::string* payload) {
  if (buffer.size() < 4) return FrameStatus::Incomplete;
  uint32_t n = (static_cast<uint32_t>(static_cast<uint8_t>(buffer[0])) << 24) |
               (static_cast<uint32_t>(static_cast<uint8_t>(buffer[1])) << 16) |
               (static_cast<uint32_t>(static_cast<uint8_t>(buffer[2])) << 8) | static_cast<uint8_t>(buffer[3]);
  if (n > limit) return FrameStatus::TooLarge;
  if (buffer.size() < 4 + static_cast<size_t>(n)) return FrameStatus::Incomplete;
  *payload = buffer.substr(4, n);
  buffer.erase(0, 4 + static_cast<size_t>(n));
  return FrameStatus::Complete;
}

}  // namespace edgert::control
