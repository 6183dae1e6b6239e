#include "tensor_io.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "build_error.h"
#include "error.h"
#include "onnx_import.h"

namespace edgert::cli {

using builder::build_fail;

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
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

static std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) build_fail(EDGERT_ERR_IO, "cannot open '%s': %s", path.c_str(), std::strerror(errno));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

HostTensor read_tensor_pb(const std::string& path) {
  onnx::TensorProto proto;
  std::string content = slurp(path);
  if (!proto.ParseFromString(content))
    build_fail(EDGERT_ERR_FORMAT, "'%s' is not an ONNX TensorProto file", path.c_str());
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  builder::Value v = builder::tensor_from_proto(proto, "tensor file '" + path + "'", dir);
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
  std::string content = slurp(path);
  if (content.size() < 10 || content.compare(0, 6, "\x93NUMPY") != 0)
    build_fail(EDGERT_ERR_FORMAT, "'%s' is not a .npy file (no \\x93NUMPY magic)", path.c_str());
  uint8_t major = static_cast<uint8_t>(content[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(content[8]) | (static_cast<uint8_t>(content[9]) << 8);
    header_start = 10;
  } else {
    if (content.size() < 12) build_fail(EDGERT_ERR_FORMAT, "'%s': truncated .npy header", path.c_str());
    header_len = static_cast<uint32_t>(static_cast<uint8_t>(content[8]) | (static_cast<uint8_t>(content[9]) << 8) |
                                       (static_cast<uint8_t>(content[10]) << 16) |
                                       (static_cast<uint32_t>(static_cast<uint8_t>(content[11])) << 24));
    header_start = 12;
  }
  if (header_start + header_len > content.size())
    build_fail(EDGERT_ERR_FORMAT, "'%s': .npy header runs past the end of the file", path.c_str());
  std::string header = content.substr(header_start, header_len);
  std::string descr_field = header_field(header, "descr", path);
  size_t q1 = descr_field.find('\''), q2 = descr_field.find('\'', q1 + 1);
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
  if (order.compare(order.find_first_not_of(' '), 4, "True") == 0)
    build_fail(EDGERT_ERR_UNSUPPORTED, "'%s': Fortran-ordered .npy files are not supported", path.c_str());
  std::string shape_field = header_field(header, "shape", path);
  size_t open = shape_field.find('('), close = shape_field.find(')');
  std::stringstream dims(shape_field.substr(open + 1, close - open - 1));
  std::string item;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    t.shape.push_back(std::stoll(item));
  }
  size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
  size_t data_start = header_start + header_len;
  if (content.size() - data_start != bytes)
    build_fail(EDGERT_ERR_FORMAT, "'%s': shape %s of %s needs %zu bytes, the file holds %zu", path.c_str(),
               shape_string(t.shape).c_str(), dtype_name(t.dtype), bytes, content.size() - data_start);
  t.data.assign(content.begin() + static_cast<std::ptrdiff_t>(data_start), content.end());
  return t;
}

HostTensor read_tensor_file(const std::string& path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return read_tensor_npy(path);
  return read_tensor_pb(path);
}

void write_tensor_pb(const std::string& path, const HostTensor& t) {
  onnx::TensorProto proto;
  proto.set_name(t.name);
  proto.set_data_type(t.dtype);
  for (int64_t d : t.shape) proto.add_dims(d);
  proto.set_raw_data(std::string(t.data.begin(), t.data.end()));
  std::ofstream out(path, std::ios::binary);
  if (!out || !proto.SerializeToOstream(&out))
    build_fail(EDGERT_ERR_IO, "cannot write '%s': %s", path.c_str(), std::strerror(errno));
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
  std::ofstream out(path, std::ios::binary);
  if (!out) build_fail(EDGERT_ERR_IO, "cannot write '%s': %s", path.c_str(), std::strerror(errno));
  out.write("\x93NUMPY\x01\x00", 8);
  char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
}

}  // namespace edgert::cli
