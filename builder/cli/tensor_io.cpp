#include "tensor_io.h"

#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

#include "build_error.h"
#include "contained_file.h"
#include "edgert/narrow_types.h"
#include "error.h"
#include "onnx_import.h"

namespace edgert::cli {

using builder::build_fail;

int64_t HostTensor::numel() const {
  // Shapes come from files: a product past int64 is reported as -1 (no tensor has that many
  // elements), never as signed overflow. A zero dim empties the tensor whatever the others are,
  // so it is looked for first: [huge, huge, 0] holds nothing, as its file's zero bytes say.
  for (int64_t d : shape)
    if (d < 0) return -1;
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

edgert_tensor HostTensor::view() const {
  edgert_tensor t{};
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < EDGERT_MAX_RANK; ++i) t.dims[i] = shape[i];
  t.data = const_cast<uint8_t*>(data.data());
  return t;
}

HostTensor HostTensor::from(const edgert_tensor& t, const std::string& name) {
  HostTensor h;
  h.name = name;
  h.dtype = t.dtype;
  h.shape.assign(t.dims, t.dims + t.rank);
  size_t bytes = static_cast<size_t>(h.numel()) * dtype_size(t.dtype);
  const uint8_t* p = static_cast<const uint8_t*>(t.data);
  if (bytes) h.data.assign(p, p + bytes);
  return h;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// Tensor files are named on the command line, so symlinks are followed; but only regular files
// are read (contained_file.h): /dev/zero or a FIFO would be read until memory ran out.
void open_tensor_file(ReadOnlyFile& file, const std::string& path) {
  std::string why;
  if (!file.open(path, &why)) build_fail(EDGERT_ERR_IO, "cannot read tensor file '%s': %s", path.c_str(), why.c_str());
}

std::string read_bytes(const ReadOnlyFile& file, const std::string& path, uint64_t offset, uint64_t bytes) {
  std::string content(static_cast<size_t>(bytes), '\0');
  std::string why;
  if (!file.read_at(offset, content.data(), content.size(), &why))
    build_fail(EDGERT_ERR_IO, "cannot read tensor file '%s': %s", path.c_str(), why.c_str());
  return content;
}

// Protobuf parses at most 2 GiB; a larger .pb cannot be a TensorProto it reads.
constexpr uint64_t kMaxProtoBytes = INT32_MAX;

}  // namespace

HostTensor read_tensor_pb(const std::string& path) {
  onnx::TensorProto proto;
  ReadOnlyFile file;
  open_tensor_file(file, path);
  if (file.size() > kMaxProtoBytes)
    build_fail(EDGERT_ERR_FORMAT, "'%s' is %llu bytes; a TensorProto file holds at most 2 GiB (use .npy)", path.c_str(),
               static_cast<unsigned long long>(file.size()));
  std::string content = read_bytes(file, path, 0, file.size());
  if (!proto.ParseFromString(content))
    build_fail(EDGERT_ERR_FORMAT, "'%s' is not an ONNX TensorProto file", path.c_str());
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  return host_tensor_from_proto(proto, "tensor file '" + path + "'", dir);
}

HostTensor host_tensor_from_proto(const onnx::TensorProto& proto, const std::string& what, const std::string& dir) {
  builder::Value v = builder::tensor_from_proto(proto, what, dir);
  HostTensor t;
  t.name = proto.name();
  t.dtype = static_cast<edgert_dtype>(v.dtype);
  for (const builder::Dim& d : v.shape) t.shape.push_back(d.value);
  t.data = *v.data;
  return t;
}

namespace {

struct NpyType {
  const char* descr;
  edgert_dtype dtype;
};
const NpyType kNpyTypes[] = {
    {"<f4", EDGERT_DTYPE_FLOAT32}, {"<f8", EDGERT_DTYPE_FLOAT64}, {"<f2", EDGERT_DTYPE_FLOAT16},
    {"|i1", EDGERT_DTYPE_INT8},    {"<i2", EDGERT_DTYPE_INT16},   {"<i4", EDGERT_DTYPE_INT32},
    {"<i8", EDGERT_DTYPE_INT64},   {"|u1", EDGERT_DTYPE_UINT8},   {"<u2", EDGERT_DTYPE_UINT16},
    {"<u4", EDGERT_DTYPE_UINT32},  {"<u8", EDGERT_DTYPE_UINT64},  {"|b1", EDGERT_DTYPE_BOOL},
};

std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) build_fail(EDGERT_ERR_FORMAT, "'%s': .npy header lacks '%s'", path.c_str(), key.c_str());
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) build_fail(EDGERT_ERR_FORMAT, "'%s': malformed .npy header", path.c_str());
  return header.substr(colon + 1);
}

}  // namespace

HostTensor read_tensor_npy(const std::string& path) {
  ReadOnlyFile file;
  open_tensor_file(file, path);
  // The header first: the data is read only once its size is known to match the file's.
  const uint64_t file_size = file.size();
  if (file_size < 10) build_fail(EDGERT_ERR_FORMAT, "'%s' is not a .npy file (%llu bytes)", path.c_str(),
                                 static_cast<unsigned long long>(file_size));
  std::string prefix = read_bytes(file, path, 0, std::min<uint64_t>(file_size, 12));
  if (prefix.compare(0, 6, "\x93NUMPY") != 0)
    build_fail(EDGERT_ERR_FORMAT, "'%s' is not a .npy file (no \\x93NUMPY magic)", path.c_str());
  uint8_t major = static_cast<uint8_t>(prefix[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(prefix[8]) | (static_cast<uint8_t>(prefix[9]) << 8);
    header_start = 10;
  } else {
    if (prefix.size() < 12) build_fail(EDGERT_ERR_FORMAT, "'%s': truncated .npy header", path.c_str());
    header_len = static_cast<uint32_t>(static_cast<uint8_t>(prefix[8]) | (static_cast<uint8_t>(prefix[9]) << 8) |
                                       (static_cast<uint8_t>(prefix[10]) << 16) |
                                       (static_cast<uint32_t>(static_cast<uint8_t>(prefix[11])) << 24));
    header_start = 12;
  }
  if (header_start + header_len > file_size)
    build_fail(EDGERT_ERR_FORMAT, "'%s': .npy header runs past the end of the file", path.c_str());
  std::string header = read_bytes(file, path, header_start, header_len);
  std::string descr_field = header_field(header, "descr", path);
  // Every position found is checked before use: a hostile header must get a message, not an
  // std::out_of_range from the string it holds.
  const size_t q1 = descr_field.find_first_not_of(' '),
               q2 = q1 == std::string::npos || descr_field[q1] != '\'' ? std::string::npos : descr_field.find('\'', q1 + 1);
  if (q2 == std::string::npos)
    build_fail(EDGERT_ERR_FORMAT, "'%s': .npy 'descr' is not a quoted string", path.c_str());
  std::string descr = descr_field.substr(q1 + 1, q2 - q1 - 1);
  if (descr == "<b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  HostTensor t;
  for (const NpyType& n : kNpyTypes)
    if (descr == n.descr) t.dtype = n.dtype;
  if (t.dtype == EDGERT_DTYPE_UNDEFINED)
    build_fail(EDGERT_ERR_UNSUPPORTED, "'%s': .npy dtype '%s' is not supported (little-endian numeric only)",
               path.c_str(), descr.c_str());
  std::string order = header_field(header, "fortran_order", path);
  const size_t order_start = order.find_first_not_of(' ');
  if (order_start != std::string::npos && order.compare(order_start, 4, "True") == 0)
    build_fail(EDGERT_ERR_UNSUPPORTED, "'%s': Fortran-ordered .npy files are not supported", path.c_str());
  std::string shape_field = header_field(header, "shape", path);
  const size_t open = shape_field.find('('), close = open == std::string::npos ? open : shape_field.find(')', open);
  if (close == std::string::npos) build_fail(EDGERT_ERR_FORMAT, "'%s': .npy 'shape' is not a tuple", path.c_str());
  std::stringstream dims(shape_field.substr(open + 1, close - open - 1));
  std::string item;
  uint64_t bytes = dtype_size(t.dtype);
  bool overflow = false;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    char* end = nullptr;
    errno = 0;
    long long d = std::strtoll(item.c_str(), &end, 10);
    if (end == item.c_str() || end[std::strspn(end, " ")] != '\0' || errno == ERANGE || d < 0)
      build_fail(EDGERT_ERR_FORMAT, "'%s': .npy shape entry '%s' is not a dimension", path.c_str(), item.c_str());
    t.shape.push_back(d);
    overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  }
  if (overflow)
    build_fail(EDGERT_ERR_FORMAT, "'%s': shape %s of %s overflows: its size in bytes does not fit in 64 bits",
               path.c_str(), shape_string(t.shape).c_str(), dtype_name(t.dtype));
  const uint64_t data_start = header_start + header_len;
  if (file_size - data_start != bytes)
    build_fail(EDGERT_ERR_FORMAT, "'%s': shape %s of %s needs %llu bytes, the file holds %llu", path.c_str(),
               shape_string(t.shape).c_str(), dtype_name(t.dtype), static_cast<unsigned long long>(bytes),
               static_cast<unsigned long long>(file_size - data_start));
  std::string data = read_bytes(file, path, data_start, bytes);
  t.data.assign(data.begin(), data.end());
  return t;
}

HostTensor read_tensor_file(const std::string& path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return read_tensor_npy(path);
  return read_tensor_pb(path);
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void write_file_checked(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) build_fail(EDGERT_ERR_IO, "cannot create '%s': %s", path.c_str(), std::strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  int err = 0;
  while (left > 0 && !err) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  // close reports what a delayed write could not store (NFS, quotas).
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    // A truncated output must not pass for a result; a device or FIFO given as the path stays.
    if (regular) ::unlink(path.c_str());
    build_fail(EDGERT_ERR_IO, "cannot write '%s' (%zu of %zu bytes written): %s", path.c_str(), bytes.size() - left,
               bytes.size(), std::strerror(err));
  }
}

void write_tensor_pb(const std::string& path, const HostTensor& t) {
  onnx::TensorProto proto;
  proto.set_name(t.name);
  proto.set_data_type(t.dtype);
  for (int64_t d : t.shape) proto.add_dims(d);
  if (edgert_dtype_packed_bits(t.dtype) < 8) {
    // The 4- and 2-bit types are held a byte per element; ONNX files pack them.
    std::string packed(edgert_packed_bytes(t.dtype, t.data.size()), '\0');
    edgert_pack_elements(t.dtype, t.data.data(), t.data.size(), reinterpret_cast<uint8_t*>(packed.data()));
    proto.set_raw_data(std::move(packed));
  } else {
    proto.set_raw_data(std::string(t.data.begin(), t.data.end()));
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    build_fail(EDGERT_ERR_IO, "cannot write '%s': the tensor does not serialize (over 2 GiB?)", path.c_str());
  write_file_checked(path, bytes);
}

void write_tensor_npy(const std::string& path, const HostTensor& t) {
  const char* descr = nullptr;
  for (const NpyType& n : kNpyTypes)
    if (n.dtype == t.dtype) descr = n.descr;
  if (!descr) build_fail(EDGERT_ERR_UNSUPPORTED, "cannot write dtype %s as .npy", dtype_name(t.dtype));
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  write_file_checked(path, bytes);
}

}  // namespace edgert::cli
