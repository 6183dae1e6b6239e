// The loader's promise: a bad engine file is an error message, never a crash or a hang.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "board.h"
#include "engine_file.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "test_support.h"

namespace edgert::test {
namespace {

class EngineFileTest : public ::testing::Test {
 protected:
  void SetUp() override { engine_ = build_engine_bytes(make_small_model(), dir_.path()); }

  edgert_load_options options() const {
    edgert_load_options o;
    edgert_load_options_init(&o);
    o.plugin_path = plugins_.c_str();
    return o;
  }

  // Re-seals `bytes` with a correct checksum, so the checks after the checksum are reached.
  static void reseal(std::vector<uint8_t>& bytes) {
    if (bytes.size() < sizeof(EngineTrailer)) return;
    EngineTrailer trailer;
    size_t body = bytes.size() - sizeof trailer;
    std::memcpy(&trailer, bytes.data() + body, sizeof trailer);
    trailer.checksum = engine_checksum(bytes.data(), bytes.size());
    std::memcpy(bytes.data() + body, &trailer, sizeof trailer);
  }

  // Wraps a hand-made FlatBuffer in a valid container (no weights).
  static std::vector<uint8_t> seal(const flatbuffers::FlatBufferBuilder& fbb, size_t weight_bytes = 0) {
    size_t fb = fbb.GetSize();
    size_t weights_offset = (fb + 63) / 64 * 64;
    std::vector<uint8_t> bytes(weights_offset + weight_bytes + sizeof(EngineTrailer), 0);
    std::memcpy(bytes.data(), fbb.GetBufferPointer(), fb);
    EngineTrailer trailer{};
    std::memcpy(trailer.magic, kTrailerMagic, 8);
    trailer.flatbuffer_size = fb;
    trailer.weights_offset = weights_offset;
    trailer.weights_size = weight_bytes;
    trailer.trailer_version = 1;
    std::memcpy(bytes.data() + bytes.size() - sizeof trailer, &trailer, sizeof trailer);
    reseal(bytes);
    return bytes;
  }

  static flatbuffers::Offset<fb::BoardRef> host_board(flatbuffers::FlatBufferBuilder& fbb, const std::string& arch) {
    BoardHardware hw{arch, {}, "none"};
    return fb::CreateBoardRef(fbb, fbb.CreateString("handmade"), fbb.CreateString(board_fingerprint(hw)),
                              fbb.CreateString(arch), fbb.CreateVectorOfStrings(std::vector<std::string>{}));
  }

  TempDir dir_;
  std::string plugins_ = cpu_plugin_dir();
  std::vector<uint8_t> engine_;
};

TEST_F(EngineFileTest, ValidEngineLoadsAndComputesTheModel) {
  edgert_error error{};
  auto engine = LoadedEngine::load_memory(engine_.data(), engine_.size(), options(), &error);
  ASSERT_TRUE(engine) << error.message;
  ExecutionContext context(*engine);
  float x[4] = {1.0f, 1.0f, 4.0f, -1.0f};
  edgert_tensor input{EDGERT_DTYPE_FLOAT32, 2, {1, 4}, x};
  ASSERT_EQ(context.run(&input, 1, &error), EDGERT_OK) << error.message;
  const edgert_tensor& y = context.output(0);
  ASSERT_EQ(y.dtype, EDGERT_DTYPE_FLOAT32);
  ASSERT_EQ(y.rank, 2);
  const float* v = static_cast<const float*>(y.data);
  // relu(x * w + b) with w = [1, -2, 0.5, 3], b = [0.25, 0.25, -1, 0]
  EXPECT_FLOAT_EQ(v[0], 1.25f);
  EXPECT_FLOAT_EQ(v[1], 0.0f);
  EXPECT_FLOAT_EQ(v[2], 1.0f);
  EXPECT_FLOAT_EQ(v[3], 0.0f);
}

TEST_F(EngineFileTest, EveryTruncationIsRejectedWithAMessage) {
  for (size_t length = 0; length < engine_.size(); length += (length < 256 || length > engine_.size() - 256) ? 1 : 37) {
    EngineFile file;
    edgert_error error{};
    ASSERT_FALSE(file.open_memory(engine_.data(), length, "cut.engine", &error)) << "length " << length;
    EXPECT_TRUE(error.status == EDGERT_ERR_FORMAT || error.status == EDGERT_ERR_CHECKSUM) << error.message;
    EXPECT_NE(std::strstr(error.message, "truncated"), nullptr) << "length " << length << ": " << error.message;
  }
}

TEST_F(EngineFileTest, EveryBitFlipIsCaughtByTheChecksumOrStructureChecks) {
  size_t body = engine_.size() - sizeof(EngineTrailer);
  for (size_t pos = 0; pos < engine_.size(); pos += (pos < body ? 7 : 1)) {
    std::vector<uint8_t> flipped = engine_;
    flipped[pos] ^= static_cast<uint8_t>(1u << (pos % 8));
    EngineFile file;
    edgert_error error{};
    EXPECT_FALSE(file.open_memory(flipped.data(), flipped.size(), "flipped", &error)) << "byte " << pos;
    EXPECT_NE(error.message[0], '\0');
  }
}

TEST_F(EngineFileTest, ResealedCorruptionNeverCrashesTheLoader) {
  // With the checksum fixed up, corruption reaches the verifier and structural checks; loading
  // may fail or (for bytes that do not matter) succeed, but must not crash.
  std::mt19937 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> bytes = engine_;
    size_t body = bytes.size() - sizeof(EngineTrailer);
    for (int k = 0; k < 1 + trial % 4; ++k) bytes[rng() % body] = static_cast<uint8_t>(rng());
    reseal(bytes);
    edgert_error error{};
    auto engine = LoadedEngine::load_memory(bytes.data(), bytes.size(), options(), &error);
    if (!engine) {
      ++rejected;
      EXPECT_NE(error.message[0], '\0');
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(EngineFileTest, RandomFilesAreRejected) {
  std::mt19937 rng(11);
  for (size_t size : {0ul, 1ul, 63ul, 64ul, 65ul, 200ul, 4096ul}) {
    std::vector<uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    EngineFile file;
    edgert_error error{};
    EXPECT_FALSE(file.open_memory(bytes.data(), bytes.size(), "random", &error)) << size;
    EXPECT_NE(error.message[0], '\0');
  }
}

TEST_F(EngineFileTest, GarbageHeaderWithValidTrailerFailsVerification) {
  std::vector<uint8_t> bytes(512 + sizeof(EngineTrailer), 0xAB);
  EngineTrailer trailer{};
  std::memcpy(trailer.magic, kTrailerMagic, 8);
  trailer.flatbuffer_size = 512;
  trailer.weights_offset = 512;
  trailer.weights_size = 0;
  trailer.trailer_version = 1;
  std::memcpy(bytes.data() + 512, &trailer, sizeof trailer);
  reseal(bytes);
  EngineFile file;
  edgert_error error{};
  EXPECT_FALSE(file.open_memory(bytes.data(), bytes.size(), "garbage", &error));
  EXPECT_EQ(error.status, EDGERT_ERR_FORMAT);
  EXPECT_NE(std::strstr(error.message, "identifier"), nullptr) << error.message;
}

TEST_F(EngineFileTest, NewerFormatVersionIsRefusedByName) {
  flatbuffers::FlatBufferBuilder fbb;
  auto graph = fb::CreateGraph(fbb);
  auto e = fb::CreateEngine(fbb, 99, fbb.CreateString("future"), host_board(fbb, host_architecture()), 0, 0, 0,
                            fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Graph>>{graph}));
  fb::FinishEngineBuffer(fbb, e);
  auto bytes = seal(fbb);
  EngineFile file;
  edgert_error error{};
  EXPECT_FALSE(file.open_memory(bytes.data(), bytes.size(), "future.engine", &error));
  EXPECT_EQ(error.status, EDGERT_ERR_VERSION);
  EXPECT_NE(std::strstr(error.message, "format version 99"), nullptr) << error.message;
}

// Version 1 files (before Concat inputs could be planned in place) still open; 0 never existed.
TEST_F(EngineFileTest, OlderFormatVersionsOpenAndZeroIsRefused) {
  for (uint32_t version : {kOldestEngineFormatVersion, 0u}) {
    flatbuffers::FlatBufferBuilder fbb;
    auto graph = fb::CreateGraph(fbb);
    auto e = fb::CreateEngine(fbb, version, fbb.CreateString("old"), host_board(fbb, host_architecture()), 0, 0, 0,
                              fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Graph>>{graph}));
    fb::FinishEngineBuffer(fbb, e);
    auto bytes = seal(fbb);
    EngineFile file;
    edgert_error error{};
    const bool opened = file.open_memory(bytes.data(), bytes.size(), "old.engine", &error);
    EXPECT_EQ(opened, version == kOldestEngineFormatVersion) << version << ": " << error.message;
    if (!opened) {
      EXPECT_NE(std::strstr(error.message, "format version 0"), nullptr) << error.message;
    }
  }
}

TEST_F(EngineFileTest, WeightRegionOutsideTheFileIsRefused) {
  flatbuffers::FlatBufferBuilder fbb;
  auto graph = fb::CreateGraph(fbb);
  std::vector<fb::WeightRegion> regions = {fb::WeightRegion(0, 1u << 30)};
  auto e = fb::CreateEngine(fbb, kEngineFormatVersion, fbb.CreateString("x"), host_board(fbb, host_architecture()), 0,
                            0, 0, fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Graph>>{graph}),
                            fbb.CreateVectorOfStructs(regions));
  fb::FinishEngineBuffer(fbb, e);
  auto bytes = seal(fbb, 64);
  EngineFile file;
  edgert_error error{};
  EXPECT_FALSE(file.open_memory(bytes.data(), bytes.size(), "weights.engine", &error));
  EXPECT_EQ(error.status, EDGERT_ERR_FORMAT);
  EXPECT_NE(std::strstr(error.message, "outside"), nullptr) << error.message;
}

// A node's prepared weights are a weight region the kernel reads in place: an index past the
// weight table is refused before any kernel sees a pointer.
TEST_F(EngineFileTest, PreparedWeightsOutsideTheWeightTableAreRefused) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Node>> nodes = {
      fb::CreateNode(fbb, fbb.CreateString("relu"), fbb.CreateString(""), fbb.CreateString("Relu"), 17, 0,
                     fbb.CreateString("ref-relu"), 0, 0, 0, 0, 0, 0, 0, 0, /*prepared=*/1)};
  auto graph = fb::CreateGraph(fbb, fbb.CreateString("main"), 0, fbb.CreateVector(nodes));
  std::vector<flatbuffers::Offset<fb::PluginRef>> plugins = {fb::CreatePluginRef(fbb, fbb.CreateString("cpu"))};
  std::vector<fb::WeightRegion> regions = {fb::WeightRegion(0, 64)};
  auto e = fb::CreateEngine(fbb, kEngineFormatVersion, fbb.CreateString("x"), host_board(fbb, host_architecture()),
                            fbb.CreateVector(plugins), 0, 0,
                            fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Graph>>{graph}),
                            fbb.CreateVectorOfStructs(regions));
  fb::FinishEngineBuffer(fbb, e);
  auto bytes = seal(fbb, 64);
  EngineFile file;
  edgert_error error{};
  EXPECT_FALSE(file.open_memory(bytes.data(), bytes.size(), "prepared.engine", &error));
  EXPECT_EQ(error.status, EDGERT_ERR_FORMAT);
  EXPECT_NE(std::strstr(error.message, "has prepared weights 1, which is no weight region (the engine has 1)"), nullptr)
      << error.message;
}

TEST_F(EngineFileTest, EngineForAnotherArchitectureNamesBoth) {
  flatbuffers::FlatBufferBuilder fbb;
  auto graph = fb::CreateGraph(fbb);
  std::string other = host_architecture() == "x86_64" ? "aarch64" : "x86_64";
  auto e = fb::CreateEngine(fbb, kEngineFormatVersion, fbb.CreateString("x"), host_board(fbb, other), 0, 0, 0,
                            fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Graph>>{graph}));
  fb::FinishEngineBuffer(fbb, e);
  auto bytes = seal(fbb);
  edgert_error error{};
  EXPECT_FALSE(LoadedEngine::load_memory(bytes.data(), bytes.size(), options(), &error));
  EXPECT_EQ(error.status, EDGERT_ERR_BOARD);
  EXPECT_NE(std::strstr(error.message, other.c_str()), nullptr) << error.message;
  EXPECT_NE(std::strstr(error.message, host_architecture().c_str()), nullptr) << error.message;

  edgert_load_options expert = options();
  expert.allow_board_mismatch = 1;
  EXPECT_TRUE(LoadedEngine::load_memory(bytes.data(), bytes.size(), expert, &error)) << error.message;
}

TEST_F(EngineFileTest, MissingFileNamesThePath) {
  EngineFile file;
  edgert_error error{};
  EXPECT_FALSE(file.open(dir_.file("absent.engine"), &error));
  EXPECT_EQ(error.status, EDGERT_ERR_IO);
  EXPECT_NE(std::strstr(error.message, "absent.engine"), nullptr) << error.message;
}

}  // namespace
}  // namespace edgert::test
