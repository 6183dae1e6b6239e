// The control socket's wire format, shared by edgertd and edgertctl: each message is a 4-byte
// big-endian length followed by that many bytes of JSON. Requests are {"command": NAME, ...};
// responses {"ok": true, "result": ...} or {"ok": false, "error": {"code": CODE, "message": ...}}.
#pragma once

#include <cstddef>
#include <string>

namespace edgert::control {

constexpr size_t kMaxRequestBytes = 64 * 1024;       // a request is a command and a few arguments
constexpr size_t kMaxResponseBytes = 16 * 1024 * 1024;
constexpr const char* kDefaultSocket = "/run/edgert/control.sock";
constexpr const char* kAccessGroup = "edgert";

std::string frame_message(const std::string& json);

enum class FrameStatus { Incomplete, Complete, TooLarge };
// Takes one complete message off the front of `buffer` into `payload`.
FrameStatus take_frame(std::string& buffer, size_t limit, std::string* payload);

}  // namespace edgert::control
