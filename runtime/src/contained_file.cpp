#include "contained_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace edgert {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a plain file";
}

bool real_path(const std::string& path, std::string* out) {
  char buffer[PATH_MAX];
  if (!::realpath(path.c_str(), buffer)) return false;
  *out = buffer;
  return true;
}

bool inside(const std::string& base, const std::string& path) {
  if (base == "/") return path.size() > 1 && path[0] == '/';
  return path.size() > base.size() + 1 && path.compare(0, base.size(), base) == 0 && path[base.size()] == '/';
}

}  // namespace

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool ReadOnlyFile::open_checked(const std::string& path, int extra_flags, std::string* why) {
  if (fd_ >= 0) ::close(fd_);
  size_ = 0;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever, before fstat could
  // tell what it is. It changes nothing for the regular files that pass.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags);
  if (fd_ < 0) {
    *why = errno == ELOOP && (extra_flags & O_NOFOLLOW) ? "was replaced by a symlink while being opened"
                                                         : std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    *why = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = std::string("is ") + kind_of(st.st_mode) + ", not a regular file";
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  size_ = static_cast<uint64_t>(st.st_size);
  return true;
}

bool ReadOnlyFile::open(const std::string& path, std::string* why) {
  resolved_ = path;
  return open_checked(path, 0, why);
}

bool ReadOnlyFile::open_inside(const std::string& dir, const std::string& relative, std::string* why) {
  if (relative.empty()) {
    *why = "is empty";
    return false;
  }
  if (relative[0] == '/') {
    *why = "is an absolute path; it must name a file inside the folder";
    return false;
  }
  for (size_t start = 0; start <= relative.size();) {
    size_t slash = relative.find('/', start);
    if (slash == std::string::npos) slash = relative.size();
    if (relative.compare(start, slash - start, "..") == 0 && slash - start == 2) {
      *why = "has a '..' component; it must name a file inside the folder";
      return false;
    }
    start = slash + 1;
  }
  std::string base;
  if (!real_path(dir.empty() ? "." : dir, &base)) {
    *why = "cannot be looked up: the folder '" + dir + "': " + std::strerror(errno);
    return false;
  }
  if (!real_path(base + "/" + relative, &resolved_)) {
    *why = std::strerror(errno);
    return false;
  }
  if (resolved_ == base) {
    *why = "is the folder itself, not a regular file";
    return false;
  }
  if (!inside(base, resolved_)) {
    *why = "resolves to '" + resolved_ + "', outside the folder '" + base + "' (symlinks must stay inside it)";
    return false;
  }
  // realpath gave a path without symlinks; O_NOFOLLOW and the descriptor's own path catch one
  // put in its place between the two calls.
  if (!open_checked(resolved_, O_NOFOLLOW, why)) return false;
  std::string opened;
  if (real_path("/proc/self/fd/" + std::to_string(fd_), &opened) && opened != resolved_) {
    *why = "changed while being opened (now '" + opened + "')";
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  return true;
}

bool ReadOnlyFile::read_at(uint64_t offset, void* data, size_t bytes, std::string* why) const {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::strerror(errno);
      return false;
    }
    if (n == 0) {
      *why = "ends at byte " + std::to_string(offset) + ", before the data it should hold (truncated while read?)";
      return false;
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace edgert
