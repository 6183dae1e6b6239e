// The engine file container around the FlatBuffer: trailer layout, checksum, and the
// verified read-only mapping the executor works from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "edgert/types.h"
#include "engine_generated.h"

namespace edgert {

// Bumped when a reader of the previous version could not read the file. Version 2: a
// memory plan may place a Concat's inputs inside its output (version 1 readers refuse that
// as overlapping tensors); version 1 files read as before.
constexpr uint32_t kEngineFormatVersion = 2;
constexpr uint32_t kOldestEngineFormatVersion = 1;
constexpr size_t kWeightAlignment = 64;
constexpr char kTrailerMagic[8] = {'E', 'D', 'G', 'T', 'T', 'R', 'L', '1'};

// The last 64 bytes of every engine file. Little-endian, packed by construction.
struct EngineTrailer {
  char magic[8];
  uint64_t flatbuffer_size;  // the FlatBuffer occupies [0, flatbuffer_size)
  uint64_t weights_offset;   // file offset of the weights section, multiple of 64
  uint64_t weights_size;
  uint64_t checksum;         // XXH64 (seed 0) of the whole file with this field taken as zero
  uint32_t trailer_version;  // 1
  uint32_t reserved0;
  uint64_t reserved[2];
};
static_assert(sizeof(EngineTrailer) == 64, "trailer layout is part of the file format");

// XXH64 of a whole engine file (`size` includes the trailer) with the trailer's checksum field
// taken as zero, so every byte, the trailer's own fields included, is covered.
// `drop_read_pages`: `file` is a private file mapping (page-aligned) whose pages are dropped
// from the resident set as they are hashed.
uint64_t engine_checksum(const void* file, size_t size, bool drop_read_pages = false);

// A read-only mmap of an engine file that passed every structural check: trailer, checksum,
// identifier, FlatBuffers verifier, format version, and every index and weight region in
// range. Only after that does anything dereference the FlatBuffer.
class EngineFile {
 public:
  EngineFile() = default;
  ~EngineFile();
  EngineFile(const EngineFile&) = delete;
  EngineFile& operator=(const EngineFile&) = delete;

  // Maps and verifies `path`; on failure fills `error` (what and where) and returns false.
  bool open(const std::string& path, edgert_error* error);
  // Verifies a buffer already in memory (tests, fuzzing). The buffer must outlive this object.
  bool open_memory(const void* data, size_t size, const std::string& label, edgert_error* error);

  const fb::Engine* engine() const { return engine_; }
  const uint8_t* weights_base() const { return base_ + trailer_.weights_offset; }
  const uint8_t* bytes() const { return base_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Takes the mapping's pages out of this process's resident set (they stay in the page cache;
  // a read faults them back in). Nothing for an engine in memory (open_memory).
  void drop_resident_pages() const;

 private:
  bool verify(edgert_error* error);

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;
  EngineTrailer trailer_{};
  const fb::Engine* engine_ = nullptr;
};

}  // namespace edgert
