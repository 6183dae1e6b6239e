// Opening files named by untrusted data: a model's external-data `location`, a tensor file given
// on the command line. The one place that decides which paths may be followed, so every reader
// refuses the same things for the same reasons.
//
// A file is read only when it is a regular file: a FIFO would block the open (or every read), a
// character device such as /dev/zero never ends, a directory reads as garbage sizes. Opens use
// O_NONBLOCK and check fstat before any byte is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace edgert {

class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // Opens `path` (symlinks followed: the caller named it) when it is a regular file. On failure
  // returns false and sets `why` to the reason, without the path ("is a FIFO, not a regular
  // file"), so the caller's message says what the path was for.
  bool open(const std::string& path, std::string* why);

  // Opens `relative` inside the folder `dir` and nowhere else: refuses an empty or absolute
  // path, any ".." component, and a path whose symlinks resolve outside `dir` (both resolved
  // with realpath; the opened descriptor is checked again, so a symlink swapped in between is
  // caught). Symlinks that stay inside `dir` are followed.
  bool open_inside(const std::string& dir, const std::string& relative, std::string* why);

  // Reads exactly `bytes` at `offset`; false with `why` on an error or a short file.
  bool read_at(uint64_t offset, void* data, size_t bytes, std::string* why) const;

  uint64_t size() const { return size_; }
  // The path the descriptor refers to after resolving symlinks (open_inside only).
  const std::string& resolved() const { return resolved_; }

 private:
  bool open_checked(const std::string& path, int extra_flags, std::string* why);

  int fd_ = -1;
  uint64_t size_ = 0;
  std::string resolved_;
};

}  // namespace edgert
