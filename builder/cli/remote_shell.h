// Commands and file copies on a board over the user's own OpenSSH (keys, ~/.ssh/config, agent):
// what `edgert deploy` and `edgert tune` share. BatchMode=yes always: a missing key is an error,
// never a password prompt.
#pragma once

#include <string>
#include <vector>

namespace edgert::cli {

// ssh's exit status when it could not connect or authenticate (the remote command's own status
// otherwise).
constexpr int kSshFailed = 255;
// A program that could not be started: a remote shell's "command not found", or ssh/scp missing
// here (run_program then writes "edgert: cannot run PROGRAM" to the captured stderr).
constexpr int kCommandNotFound = 127;

struct RemoteShell {
  std::string host;                   // USER@BOARD: anything ssh accepts, ~/.ssh/config aliases too
  int port = 0;                       // 0: ssh's default (or the config's)
  std::string identity;               // -i FILE; empty: ssh's default keys
  std::vector<std::string> options;   // each passed as -o OPTION
  std::string ssh = "ssh", scp = "scp";

  // Runs `command` on the board (each word quoted for the remote shell). `out` / `err` capture
  // its stdout / stderr when given, else they go to ours. Returns the exit status.
  int run(const std::vector<std::string>& command, std::string* out = nullptr, std::string* err = nullptr) const;
  // scp one file; returns scp's exit status, its messages in `err` when given.
  int copy_to(const std::string& local, const std::string& remote_path, std::string* err = nullptr) const;
  int copy_from(const std::string& remote_path, const std::string& local, std::string* err = nullptr) const;

 private:
  std::vector<std::string> base(bool scp) const;
};

// One argument for a POSIX shell: single-quoted, with ' as '\''.
std::string shell_quote(const std::string& s);

// Runs argv here, without a shell; stdout / stderr go to `out` / `err` when given, else to ours.
// Returns the exit status (128 + signal when killed). Throws BuildError only when it cannot fork.
int run_program(const std::vector<std::string>& argv, std::string* out = nullptr, std::string* err = nullptr);

}  // namespace edgert::cli
