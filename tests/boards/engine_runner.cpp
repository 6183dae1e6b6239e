// edgert_engine_runner: runs an engine once through the public C API only (libedgert + dlopened
// plugins), reading inputs from .npy files and writing each output as <name>.npy.
//
// It exists for the cross tests: the full `edgert` CLI needs the builder (ONNX, protobuf), while
// this program needs nothing but libedgert, so it cross-builds for every board and runs under
// qemu-aarch64-static. Inputs are given in engine input order.
//
//   edgert_engine_runner ENGINE [--board NAME] [--allow-board-mismatch] [--plugin-path DIRS]
//                        [--output-dir DIR] INPUT.npy...
#include <edgert/edgert.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct NpyDtype {
  const char* descr;
  edgert_dtype dtype;
  size_t size;
};

const NpyDtype kNpyDtypes[] = {
    {"<f4", EDGERT_DTYPE_FLOAT32, 4}, {"<f8", EDGERT_DTYPE_FLOAT64, 8}, {"<f2", EDGERT_DTYPE_FLOAT16, 2},
    {"<i8", EDGERT_DTYPE_INT64, 8},   {"<i4", EDGERT_DTYPE_INT32, 4},   {"<i2", EDGERT_DTYPE_INT16, 2},
    {"|i1", EDGERT_DTYPE_INT8, 1},    {"|u1", EDGERT_DTYPE_UINT8, 1},   {"<u2", EDGERT_DTYPE_UINT16, 2},
    {"<u4", EDGERT_DTYPE_UINT32, 4},  {"<u8", EDGERT_DTYPE_UINT64, 8},  {"|b1", EDGERT_DTYPE_BOOL, 1},
};

const NpyDtype* dtype_by_descr(const std::string& d) {
  for (const NpyDtype& t : kNpyDtypes)
    if (d == t.descr) return &t;
  return nullptr;
}

const NpyDtype* dtype_by_enum(edgert_dtype d) {
  for (const NpyDtype& t : kNpyDtypes)
    if (d == t.dtype) return &t;
  return nullptr;
}

struct NpyArray {
  edgert_tensor tensor{};
  std::vector<unsigned char> bytes;
};

// Reads a C-order .npy (versions 1-3). Returns an empty string on success, else what is wrong.
std::string read_npy(const std::string& path, NpyArray* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot open";
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) return path + ": not a .npy file";
  size_t header_len, header_start;
  if (data[6] == 1) {
    header_len = static_cast<unsigned char>(data[8]) | static_cast<unsigned char>(data[9]) << 8;
    header_start = 10;
  } else {
    if (data.size() < 12) return path + ": truncated header";
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
    header_start = 12;
  }
  if (header_start + header_len > data.size()) return path + ": truncated header";
  std::string header = data.substr(header_start, header_len);
  auto field = [&](const std::string& key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) return "";
    size_t colon = header.find(':', k);
    return colon == std::string::npos ? "" : header.substr(colon + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) return path + ": no descr in header";
  const NpyDtype* dt = dtype_by_descr(descr.substr(q1 + 1, q2 - q1 - 1));
  if (!dt) return path + ": unsupported dtype " + descr.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") == 0 || field("fortran_order").find(" True") == 0)
    return path + ": Fortran order is not supported";
  std::string shape = field("shape");
  size_t open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos) return path + ": no shape in header";
  std::stringstream dims(shape.substr(open + 1, close - open - 1));
  std::string item;
  size_t count = 1;
  out->tensor.rank = 0;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    if (out->tensor.rank == EDGERT_MAX_RANK) return path + ": rank too large";
    int64_t d = std::stoll(item);
    out->tensor.dims[out->tensor.rank++] = d;
    count *= static_cast<size_t>(d);
  }
  size_t body = header_start + header_len;
  if (data.size() - body != count * dt->size)
    return path + ": holds " + std::to_string(data.size() - body) + " data bytes, shape needs " +
           std::to_string(count * dt->size);
  out->bytes.assign(data.begin() + body, data.end());
  out->tensor.dtype = dt->dtype;
  out->tensor.data = out->bytes.data();
  return "";
}

std::string write_npy(const std::string& path, const edgert_tensor& t) {
  const NpyDtype* dt = dtype_by_enum(t.dtype);
  if (!dt) return path + ": output dtype " + std::to_string(t.dtype) + " has no .npy spelling";
  std::string shape = "(";
  size_t count = 1;
  for (int i = 0; i < t.rank; ++i) {
    shape += std::to_string(t.dims[i]) + (t.rank == 1 ? "," : (i + 1 < t.rank ? ", " : ""));
    count *= static_cast<size_t>(t.dims[i]);
  }
  shape += ")";
  std::string header = std::string("{'descr': '") + dt->descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return path + ": cannot create";
  out.write("\x93NUMPY\x01\x00", 8);
  unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff), static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out << header;
  out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(count * dt->size));
  return out ? "" : path + ": write failed";
}

int usage() {
  std::fprintf(stderr,
               "usage: edgert_engine_runner ENGINE [--board NAME] [--allow-board-mismatch] [--plugin-path DIRS]\n"
               "                            [--output-dir DIR] INPUT.npy...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string engine_path, board, plugin_path, output_dir = ".";
  bool allow_mismatch = false;
  std::vector<std::string> input_paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--board" && i + 1 < argc) board = argv[++i];
    else if (a == "--plugin-path" && i + 1 < argc) plugin_path = argv[++i];
    else if (a == "--output-dir" && i + 1 < argc) output_dir = argv[++i];
    else if (a == "--allow-board-mismatch") allow_mismatch = true;
    else if (a.size() > 1 && a[0] == '-') return usage();
    else if (engine_path.empty()) engine_path = a;
    else input_paths.push_back(a);
  }
  if (engine_path.empty()) return usage();

  edgert_load_options options;
  edgert_load_options_init(&options);
  options.expected_board = board.empty() ? nullptr : board.c_str();
  options.plugin_path = plugin_path.empty() ? nullptr : plugin_path.c_str();
  options.allow_board_mismatch = allow_mismatch ? 1 : 0;
  edgert_error error{};
  edgert_engine* engine = nullptr;
  if (edgert_engine_load(engine_path.c_str(), &options, &engine, &error) != EDGERT_OK) {
    std::fprintf(stderr, "edgert_engine_runner: %s\n", error.message);
    return 1;
  }
  int rc = 1;
  edgert_context* context = nullptr;
  std::vector<NpyArray> inputs(input_paths.size());
  std::vector<edgert_tensor> tensors;
  int num_inputs = edgert_engine_num_inputs(engine);
  if (static_cast<int>(input_paths.size()) != num_inputs) {
    std::fprintf(stderr, "edgert_engine_runner: engine has %d inputs, %zu files given\n", num_inputs, input_paths.size());
    goto done;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string e = read_npy(input_paths[i], &inputs[i]);
    if (!e.empty()) {
      std::fprintf(stderr, "edgert_engine_runner: %s\n", e.c_str());
      goto done;
    }
    tensors.push_back(inputs[i].tensor);
  }
  if (edgert_context_create(engine, &context, &error) != EDGERT_OK ||
      edgert_context_run(context, tensors.data(), num_inputs, &error) != EDGERT_OK) {
    std::fprintf(stderr, "edgert_engine_runner: %s\n", error.message);
    goto done;
  }
  for (int i = 0; i < edgert_engine_num_outputs(engine); ++i) {
    edgert_tensor_info info;
    edgert_tensor out;
    if (edgert_engine_output_info(engine, i, &info) != EDGERT_OK || edgert_context_output(context, i, &out) != EDGERT_OK) {
      std::fprintf(stderr, "edgert_engine_runner: output %d unavailable\n", i);
      goto done;
    }
    std::string e = write_npy(output_dir + "/" + info.name + ".npy", out);
    if (!e.empty()) {
      std::fprintf(stderr, "edgert_engine_runner: %s\n", e.c_str());
      goto done;
    }
    std::printf("%s: dtype %d rank %d\n", info.name, out.dtype, out.rank);
  }
  std::printf("board %s: ok\n", edgert_engine_board(engine));
  rc = 0;
done:
  if (context) edgert_context_release(context);
  edgert_engine_release(engine);
  return rc;
}
