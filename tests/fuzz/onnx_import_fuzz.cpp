// libFuzzer target: arbitrary bytes as an ONNX model must be imported or refused with a
// BuildError that says why; never a crash, a hang, a leak or another exception escaping
// (std::bad_alloc from a size the file claims, std::out_of_range from an index it holds).
// Seeds: the ONNX node tests' models.
#include <cstdint>
#include <cstdlib>

#include "build_error.h"
#include "fuzz_input_file.h"
#include "onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInputFile file(data, size);
  try {
    edgert::builder::import_onnx(file.path());
  } catch (const edgert::builder::BuildError& e) {
    if (e.what()[0] == '\0') std::abort();  // every refusal must say why
  }
  return 0;
}
