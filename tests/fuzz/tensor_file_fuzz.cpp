// libFuzzer target: arbitrary bytes as an input tensor file (`edgert run --input`), read both as
// .npy and as an ONNX TensorProto (.pb), must give a tensor whose bytes match its shape or be
// refused with a BuildError; never a crash, a hang, an allocation the file's size cannot back,
// or another exception escaping. Seeds: the node tests' input_0.pb files and a few .npy files.
#include <cstdint>
#include <cstdlib>

#include "build_error.h"
#include "edgert/dtype_info.h"
#include "fuzz_input_file.h"
#include "tensor_io.h"

namespace {

void read_as(edgert::cli::HostTensor (*reader)(const std::string&), const std::string& path) {
  try {
    edgert::cli::HostTensor t = reader(path);
    const size_t element = edgert_dtype_size(t.dtype);
    if (element != 0 && t.data.size() != static_cast<size_t>(t.numel()) * element) std::abort();
  } catch (const edgert::builder::BuildError& e) {
    if (e.what()[0] == '\0') std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInputFile file(data, size);
  read_as(edgert::cli::read_tensor_npy, file.path());
  read_as(edgert::cli::read_tensor_pb, file.path());
  return 0;
}
