#include "remote_shell.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "build_error.h"

namespace edgert::cli {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int run_program(const std::vector<std::string>& argv, std::string* out, std::string* err) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if ((out && pipe(out_pipe) != 0) || (err && pipe(err_pipe) != 0))
    builder::build_fail(EDGERT_ERR_IO, "pipe failed: %s", std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) builder::build_fail(EDGERT_ERR_IO, "fork failed: %s", std::strerror(errno));
  if (pid == 0) {
    for (auto [pipe_fds, target] : {std::pair{out_pipe, 1}, std::pair{err_pipe, 2}})
      if (pipe_fds[1] >= 0) {
        dup2(pipe_fds[1], target);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
      }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "edgert: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(kCommandNotFound);
  }
  // Both pipes drained together: a child filling one while we block on the other would hang.
  std::vector<pollfd> fds;
  std::vector<std::string*> sinks;
  for (auto [pipe_fds, sink] : {std::pair{out_pipe, out}, std::pair{err_pipe, err}})
    if (sink) {
      close(pipe_fds[1]);
      fds.push_back({pipe_fds[0], POLLIN, 0});
      sinks.push_back(sink);
    }
  while (!fds.empty()) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < fds.size();) {
      char chunk[4096];
      ssize_t n = fds[i].revents ? read(fds[i].fd, chunk, sizeof chunk) : -2;
      if (n > 0) sinks[i]->append(chunk, static_cast<size_t>(n));
      if (n == 0 || (n == -1 && errno != EINTR)) {
        close(fds[i].fd);
        fds.erase(fds.begin() + static_cast<long>(i));
        sinks.erase(sinks.begin() + static_cast<long>(i));
        continue;
      }
      ++i;
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> RemoteShell::base(bool use_scp) const {
  std::vector<std::string> argv = {use_scp ? scp : ssh, "-o", "BatchMode=yes"};
  if (port) argv.insert(argv.end(), {use_scp ? "-P" : "-p", std::to_string(port)});
  if (!identity.empty()) argv.insert(argv.end(), {"-i", identity});
  for (const std::string& opt : options) argv.insert(argv.end(), {"-o", opt});
  if (use_scp) argv.push_back("-q");
  return argv;
}

int RemoteShell::run(const std::vector<std::string>& command, std::string* out, std::string* err) const {
  std::vector<std::string> argv = base(false);
  argv.push_back(host);
  std::string line;
  for (const std::string& a : command) line += (line.empty() ? "" : " ") + shell_quote(a);
  argv.push_back(line);
  return run_program(argv, out, err);
}

int RemoteShell::copy_to(const std::string& local, const std::string& remote_path, std::string* err) const {
  std::vector<std::string> argv = base(true);
  argv.insert(argv.end(), {local, host + ":" + remote_path});
  return run_program(argv, nullptr, err);
}

int RemoteShell::copy_from(const std::string& remote_path, const std::string& local, std::string* err) const {
  std::vector<std::string> argv = base(true);
  argv.insert(argv.end(), {host + ":" + remote_path, local});
  return run_program(argv, nullptr, err);
}

}  // namespace edgert::cli
