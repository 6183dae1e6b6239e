// libFuzzer target: arbitrary bytes as an engine file must be rejected with a message or
// loaded; never a crash, a hang or a leak. Half the inputs get their checksum fixed up first,
// so mutations reach the FlatBuffers verifier and the structural checks behind it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine_file.h"
#include "loaded_engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= sizeof(edgert::EngineTrailer) && (size % 2 == 0)) {
    edgert::EngineTrailer trailer;
    size_t body = size - sizeof trailer;
    std::memcpy(&trailer, bytes.data() + body, sizeof trailer);
    trailer.checksum = edgert::engine_checksum(bytes.data(), bytes.size());
    std::memcpy(bytes.data() + body, &trailer, sizeof trailer);
  }
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = std::getenv("EDGERT_PLUGIN_PATH");
  edgert_error error{};
  auto engine = edgert::LoadedEngine::load_memory(bytes.data(), bytes.size(), options, &error);
  if (!engine && error.message[0] == '\0') std::abort();  // every refusal must say why
  return 0;
}
