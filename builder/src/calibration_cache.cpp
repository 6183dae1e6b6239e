#include "calibration_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <vector>

#include "build_error.h"

namespace edgert::builder {
namespace {

constexpr const char* kFormatName = "edgert-calibration-cache";
constexpr int kFormatVersion = 1;
// Lines before the first tensor: the format line and the fields below, in this order.
constexpr const char* kStampFields[] = {"model-sha256", "calibrator", "edgert-version", "samples", "tensors"};
constexpr size_t kHeaderLines = 1 + sizeof kStampFields / sizeof kStampFields[0];

std::string hex_float(float value) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", static_cast<double>(value));
  return text;
}

std::string lower_case(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool is_sha256(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// A line of the file as it is read, for messages: escaped like a name and cut at 80 bytes,
// because a file that is not a cache may hold anything.
std::string shown(const std::string& line) {
  std::string quoted = quote_tensor_name(line.size() > 80 ? line.substr(0, 80) : line);
  return line.size() > 80 ? quoted + "..." : quoted;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The file's lines, and whether the last one ended with '\n' (else the file was cut short).
class CacheLines {
 public:
  CacheLines(const std::string& path, const std::string& text) : path_(path) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) {
        lines_.push_back(text.substr(start));
        last_complete_ = false;
        break;
      }
      lines_.push_back(text.substr(start, end - start));
      start = end + 1;
    }
  }

  size_t count() const { return lines_.size(); }
  // Line `number` as it is, whole or not (1 <= number <= count()).
  const std::string& raw(size_t number) const { return lines_[number - 1]; }

  // Line `number` (1-based), which must be there and be whole.
  const std::string& line(size_t number, const char* expected) const {
    if (number > lines_.size())
      fail(number, "the file ends where %s was expected: it is truncated; calibrate again", expected);
    if (number == lines_.size() && !last_complete_)
      fail(number, "the line is cut short (no end of line) where %s was expected: the file is truncated; "
                   "calibrate again", expected);
    return lines_[number - 1];
  }

  // "KEY VALUE" on line `number`: the value.
  std::string field(size_t number, const char* key) const {
    std::string expected = std::string("'") + key + " ...'";
    const std::string& text = line(number, expected.c_str());
    size_t key_size = std::strlen(key);
    if (text.size() <= key_size + 1 || text.compare(0, key_size, key) != 0 || text[key_size] != ' ')
      fail(number, "expected '%s VALUE', found %s", key, shown(text).c_str());
    return text.substr(key_size + 1);
  }

  uint64_t count_field(size_t number, const char* key) const {
    std::string value = field(number, key);
    errno = 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(value.c_str(), &end, 10);
    if (!std::isdigit(static_cast<unsigned char>(value[0])) || *end != '\0' || errno == ERANGE)
      fail(number, "%s is %s, not a count", key, shown(value).c_str());
    return n;
  }

  [[noreturn]] void fail(size_t number, const char* format, ...) const __attribute__((format(printf, 3, 4))) {
    va_list args;
    va_start(args, format);
    char why[512];
    std::vsnprintf(why, sizeof why, format, args);
    va_end(args);
    build_fail(EDGERT_ERR_FORMAT, "calibration cache '%s' line %zu: %s", path_.c_str(), number, why);
  }

 private:
  std::string path_;
  std::vector<std::string> lines_;
  bool last_complete_ = true;
};

// Reads the quoted name at the start of `text`; returns the position after the closing quote.
size_t parse_quoted_name(const CacheLines& lines, size_t number, const std::string& text, std::string* name) {
  if (text.empty() || text[0] != '"')
    lines.fail(number, "expected a quoted tensor name and its range, found %s", shown(text).c_str());
  size_t i = 1;
  while (i < text.size() && text[i] != '"') {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) lines.fail(number, "the tensor name holds byte 0x%02x unescaped", c);
    if (c != '\\') {
      name->push_back(text[i++]);
      continue;
    }
    if (i + 1 >= text.size()) break;
    char escape = text[i + 1];
    i += 2;
    switch (escape) {
      case '"': name->push_back('"'); break;
      case '\\': name->push_back('\\'); break;
      case 'n': name->push_back('\n'); break;
      case 'r': name->push_back('\r'); break;
      case 't': name->push_back('\t'); break;
      case 'x': {
        int high = i + 1 < text.size() ? hex_digit(text[i]) : -1;
        int low = high >= 0 ? hex_digit(text[i + 1]) : -1;
        if (low < 0) lines.fail(number, "the tensor name has '\\x' without two hex digits after it");
        name->push_back(static_cast<char>(high * 16 + low));
        i += 2;
        break;
      }
      default:
        lines.fail(number, "the tensor name has an unknown escape '\\%c' (known: \\\" \\\\ \\n \\r \\t \\xHH)", escape);
    }
  }
  if (i >= text.size()) lines.fail(number, "the tensor name has no closing quote");
  return i + 1;
}

float parse_bound(const CacheLines& lines, size_t number, const std::string& token, const char* which) {
  char* end = nullptr;
  float value = std::strtof(token.c_str(), &end);
  if (token.empty() || std::isspace(static_cast<unsigned char>(token[0])) || *end != '\0' || !std::isfinite(value))
    lines.fail(number, "%s of the range is %s, not a finite number (written as %%a, e.g. -0x1.8p+1)", which,
               shown(token).c_str());
  return value;
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::system_error(errno, std::generic_category());
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string quote_tensor_name(const std::string& name) {
  std::string quoted = "\"";
  for (char c : name) {
    unsigned char byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': quoted += "\\\""; break;
      case '\\': quoted += "\\\\"; break;
      case '\n': quoted += "\\n"; break;
      case '\r': quoted += "\\r"; break;
      case '\t': quoted += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          char escape[5];
          std::snprintf(escape, sizeof escape, "\\x%02x", byte);
          quoted += escape;
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

void write_calibration_cache(const std::string& path, const CalibrationCache& cache) {
  std::string text = std::string(kFormatName) + " " + std::to_string(kFormatVersion) + "\n";
  text += "model-sha256 " + lower_case(cache.stamp.model_sha256) + "\n";
  text += "calibrator " + calibrator_name(cache.stamp.calibrator) + "\n";
  text += "edgert-version " + cache.stamp.edgert_version + "\n";
  text += "samples " + std::to_string(cache.stamp.samples) + "\n";
  text += "tensors " + std::to_string(cache.ranges.size()) + "\n";
  for (const auto& [name, range] : cache.ranges) {
    if (!std::isfinite(range.lo) || !std::isfinite(range.hi) || range.lo > range.hi)
      build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                 "calibration cache '%s': tensor %s has range [%g, %g], which is not finite with lo <= hi",
                 path.c_str(), quote_tensor_name(name).c_str(), range.lo, range.hi);
    text += quote_tensor_name(name) + " " + hex_float(range.lo) + " " + hex_float(range.hi) + "\n";
  }

  std::string temporary = path + ".XXXXXX";
  int fd = ::mkstemp(temporary.data());
  if (fd < 0)
    build_fail(EDGERT_ERR_IO, "cannot write calibration cache '%s': creating '%s' failed: %s", path.c_str(),
               temporary.c_str(), std::strerror(errno));
  try {
    write_all(fd, text);
    // mkstemp makes the file 0600; a cache holds nothing secret and is shared like the model.
    if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) throw std::system_error(errno, std::generic_category());
  } catch (const std::system_error& e) {
    ::close(fd);
    ::unlink(temporary.c_str());
    build_fail(EDGERT_ERR_IO, "cannot write calibration cache '%s': writing '%s' failed: %s", path.c_str(),
               temporary.c_str(), e.code().message().c_str());
  }
  // Data on disk before the rename makes it visible: a crash then leaves the old file or the new.
  if (::close(fd) != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    build_fail(EDGERT_ERR_IO, "cannot write calibration cache '%s': %s", path.c_str(), std::strerror(error));
  }
}

std::optional<CalibrationCache> read_calibration_cache(const std::string& path, const CalibrationStamp& expected) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) {
    if (errno == ENOENT) return std::nullopt;
    build_fail(EDGERT_ERR_IO, "cannot open calibration cache '%s': %s", path.c_str(), std::strerror(errno));
  }
  std::string text;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  bool failed = std::ferror(file) != 0;
  int error = errno;
  std::fclose(file);
  if (failed) build_fail(EDGERT_ERR_IO, "cannot read calibration cache '%s': %s", path.c_str(), std::strerror(error));

  CacheLines lines(path, text);
  const std::string format_line = std::string(kFormatName) + " " + std::to_string(kFormatVersion);
  const std::string format_prefix = std::string(kFormatName) + " ";
  // What the file is comes before whether it is whole: a binary file has no line ends either.
  if (lines.count() == 0 || lines.raw(1).compare(0, format_prefix.size(), format_prefix) != 0)
    lines.fail(1, "expected '%s', found %s: this is not an edgert calibration cache", format_line.c_str(),
               lines.count() == 0 ? "an empty file" : shown(lines.raw(1)).c_str());
  const std::string& first = lines.line(1, ("'" + format_line + "'").c_str());
  if (first != format_line)
    build_fail(EDGERT_ERR_VERSION,
               "calibration cache '%s' has format '%s'; this edgert reads '%s': calibrate again to write a new cache",
               path.c_str(), first.c_str(), format_line.c_str());

  CalibrationCache cache;
  CalibrationStamp& stamp = cache.stamp;
  stamp.model_sha256 = lines.field(2, kStampFields[0]);
  if (!is_sha256(stamp.model_sha256))
    lines.fail(2, "model-sha256 is %s, not 64 hex digits", shown(stamp.model_sha256).c_str());
  std::string calibrator = lines.field(3, kStampFields[1]);
  try {
    stamp.calibrator = parse_calibrator(calibrator);
  } catch (const BuildError& e) {
    lines.fail(3, "%s", e.what());
  }
  stamp.edgert_version = lines.field(4, kStampFields[2]);
  stamp.samples = lines.count_field(5, kStampFields[3]);
  const uint64_t tensors = lines.count_field(6, kStampFields[4]);

  // The stamp before the tensor lines: for a cache of something else, that is the news.
  if (lower_case(stamp.model_sha256) != lower_case(expected.model_sha256))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "calibration cache '%s' was made for model sha256 %s (this model is %s): calibrate again, or pass "
               "the cache of this model",
               path.c_str(), stamp.model_sha256.c_str(), expected.model_sha256.c_str());
  std::string file_calibrator = calibrator_name(stamp.calibrator), wanted = calibrator_name(expected.calibrator);
  if (file_calibrator != wanted)
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "calibration cache '%s' was made with calibrator %s (this build calibrates with %s): calibrate again, "
               "or choose calibrator %s to use this cache",
               path.c_str(), file_calibrator.c_str(), wanted.c_str(), file_calibrator.c_str());
  if (stamp.edgert_version != expected.edgert_version)
    build_fail(EDGERT_ERR_VERSION,
               "calibration cache '%s' was made by edgert %s (this is edgert %s): calibrate again, since the "
               "calibrators may have changed between versions",
               path.c_str(), shown(stamp.edgert_version).c_str(), shown(expected.edgert_version).c_str());

  std::map<std::string, size_t> line_of;
  for (uint64_t t = 0; t < tensors; ++t) {
    const size_t number = kHeaderLines + 1 + t;
    std::string what = "tensor " + std::to_string(t + 1) + " of " + std::to_string(tensors);
    const std::string& text = lines.line(number, what.c_str());
    std::string name;
    size_t at = parse_quoted_name(lines, number, text, &name);
    size_t gap = text.find(' ', at + 1);
    if (at >= text.size() || text[at] != ' ' || gap == std::string::npos)
      lines.fail(number, "expected '\"NAME\" LO HI', found %s", shown(text).c_str());
    CalibratedRange range;
    range.lo = parse_bound(lines, number, text.substr(at + 1, gap - at - 1), "lo");
    range.hi = parse_bound(lines, number, text.substr(gap + 1), "hi");
    if (range.lo > range.hi)
      lines.fail(number, "tensor %s has lo %a above hi %a", quote_tensor_name(name).c_str(), range.lo, range.hi);
    auto [it, added] = line_of.emplace(name, number);
    if (!added)
      lines.fail(number, "tensor %s is listed again (first on line %zu)", quote_tensor_name(name).c_str(),
                 it->second);
    cache.ranges.emplace(std::move(name), range);
  }
  if (lines.count() > kHeaderLines + tensors)
    lines.fail(kHeaderLines + tensors + 1, "found %s after the %llu tensors the header announces",
               shown(lines.raw(kHeaderLines + tensors + 1)).c_str(),
               static_cast<unsigned long long>(tensors));
  return cache;
}

}  // namespace edgert::builder
