// Makes bad engines for the hot-swap tests out of good ones: each mode changes one thing and,
// except `corrupt`, recomputes the trailer checksum so that the check under test is the one
// that has to catch it.
//   engine_tamper MODE IN OUT
//   corrupt    flip a byte in the middle (checksum left stale)
//   selftest   shift the stored self-test outputs (the engine itself is intact)
//   signature  flip a byte of the ed25519 signature
//   content    flip a byte of the first weight region (a signed engine's signature breaks)
//   plugin     rename the first required plugin to one that does not exist
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine_file.h"

using namespace edgert;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: engine_tamper corrupt|selftest|signature|content|plugin IN OUT\n");
    return 2;
  }
  std::string mode = argv[1];
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof(EngineTrailer)) return 1;
  const fb::Engine* e = fb::GetEngine(bytes.data());
  auto offset_of = [&](const void* p) { return static_cast<size_t>(static_cast<const uint8_t*>(p) - bytes.data()); };
  bool fix_checksum = true;
  if (mode == "corrupt") {
    bytes[bytes.size() / 2] ^= 0x40;
    fix_checksum = false;
  } else if (mode == "selftest") {
    if (!e->self_test() || !e->self_test()->outputs() || !e->self_test()->outputs()->size()) {
      std::fprintf(stderr, "no self-test vector\n");
      return 1;
    }
    const auto* data = e->self_test()->outputs()->Get(0)->data();
    size_t at = offset_of(data->data());
    for (uint32_t i = 0; i < data->size(); ++i) {
      float v;
      std::memcpy(&v, &bytes[at + 4 * i], 4);
      v = v * 1.5f + 0.25f;
      std::memcpy(&bytes[at + 4 * i], &v, 4);
    }
  } else if (mode == "signature") {
    if (!e->signature() || !e->signature()->signature()) {
      std::fprintf(stderr, "unsigned engine\n");
      return 1;
    }
    bytes[offset_of(e->signature()->signature()->data()) + 10] ^= 0x01;
  } else if (mode == "content") {
    EngineTrailer trailer;
    std::memcpy(&trailer, &bytes[bytes.size() - sizeof trailer], sizeof trailer);
    bytes[trailer.weights_offset + 3] ^= 0x01;
  } else if (mode == "plugin") {
    const auto* name = e->plugins()->Get(0)->name();
    bytes[offset_of(name->data())] = 'z';
  } else {
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  if (fix_checksum) {
    EngineTrailer trailer;
    std::memcpy(&trailer, &bytes[bytes.size() - sizeof trailer], sizeof trailer);
    trailer.checksum = engine_checksum(bytes.data(), bytes.size());
    std::memcpy(&bytes[bytes.size() - sizeof trailer], &trailer, sizeof trailer);
  }
  std::ofstream(argv[3], std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return 0;
}
