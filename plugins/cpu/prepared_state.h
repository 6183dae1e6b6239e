// Prepared weights stored in the engine (plugin.h, ABI 5), in the CPU plugin's format: the
// arrays an Op packs in prepare (GEMM panels of A, GEMV panels, Winograd's U), recorded in the
// order it packs them, each with the key that says what it holds (layout, ISA, sizes).
//
// The packing functions are the only places that know an array's layout, so they are where
// state is recorded and taken back: while an Op prepares for export, every array they finish
// is recorded; while a fresh Op prepares with the engine's bytes, each of them first asks for
// the next stored array with its key and borrows it instead of packing. The Op itself only
// reads its arrays through their values(); nothing else in it changes. A key or size that does
// not match, bytes past the end, a wrong tactic: the array (and every later one) is packed as
// without stored state, so hostile or stale bytes cost memory, never correctness of the layout.
//
// The bytes:  Header, then `count` Records, then each record's floats at its offset (a multiple
// of 64 from the start of the bytes, which the engine maps 64-byte aligned).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgert::cpu::prepared {

// What a stored array holds: its kind, then what makes its layout (for PackedA: ISA, m, k, kc;
// for PackedPanels: k, n). Equal keys and sizes mean the same layout of the same-shaped source.
struct Key {
  int64_t kind = 0;
  int64_t a = 0, b = 0, c = 0, d = 0;
  bool operator==(const Key& o) const { return kind == o.kind && a == o.a && b == o.b && c == o.c && d == o.d; }
};
enum Kind : int64_t {
  kPackedA = 1,
  kGemvPanels = 2,
  kQgemmRows = 3,       // gemm::PackedQRows' s8 panels: m, k, panel rows
  kQgemmRowSums = 4,    // its s32 row sums: m, k
  kQDepthwiseTaps = 5,  // the integer depthwise's s32 weights (4 taps each): channels, kernel_h, chunks, kernel_w
  kQDepthwiseSums = 6,  // its s32 weight sums per channel: channels, taps
  kQgemvColumns = 7,    // gemm::PackedQColumns' s8 panels: m, k, panel rows
};

// Collects what an Op packs during one prepare, for export_prepared.
class Recorder {
 public:
  void add(const Key& key, const float* data, size_t floats) { arrays_.push_back({key, data, floats}); }
  bool empty() const { return arrays_.empty(); }
  // Size of the serialized bytes, and the bytes themselves (into `out`, at least size() bytes).
  size_t size() const;
  void write(int64_t tactic, void* out) const;

 private:
  struct Array {
    Key key;
    const float* data;
    size_t floats;
  };
  std::vector<Array> arrays_;
};

// Hands stored arrays back, in order, to a fresh Op preparing at the tactic they were made for.
class Reader {
 public:
  // Checks the header; a reader of bytes that do not parse, or of another tactic, gives nothing.
  Reader(const void* bytes, size_t size, int64_t tactic);
  // The next stored array when its key and size match, else null (and null from then on).
  const float* take(const Key& key, size_t floats);
  // Whether the header parsed: false for absent bytes, another format or another tactic.
  bool usable() const { return bytes_ != nullptr; }

 private:
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  uint64_t count_ = 0, next_ = 0;
  bool spent_ = true;
};

// The recorder or reader of the prepare running on this thread, set for its duration by the
// plugin's adapter; the packing functions consult them (prepare packs on the calling thread
// before any parallel part). Null outside such a prepare.
class Scope {
 public:
  explicit Scope(Recorder* recorder) : saved_recorder_(recorder_), saved_reader_(reader_) {
    recorder_ = recorder;
    reader_ = nullptr;
  }
  explicit Scope(Reader* reader) : saved_recorder_(recorder_), saved_reader_(reader_) {
    recorder_ = nullptr;
    reader_ = reader;
  }
  ~Scope() {
    recorder_ = saved_recorder_;
    reader_ = saved_reader_;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  static Recorder* recorder() { return recorder_; }
  static Reader* reader() { return reader_; }

 private:
  static thread_local Recorder* recorder_;
  static thread_local Reader* reader_;
  Recorder* saved_recorder_;
  Reader* saved_reader_;
};

// For the packing functions: the stored array for `key` if the current prepare has one.
inline const float* take(const Key& key, size_t floats) {
  Reader* reader = Scope::reader();
  return reader ? reader->take(key, floats) : nullptr;
}
// For the packing functions: a finished array, recorded when the current prepare exports.
inline void record(const Key& key, const float* data, size_t floats) {
  if (Recorder* recorder = Scope::recorder()) recorder->add(key, data, floats);
}

// Arrays of other element types (the INT8 kernels' s8 panels and s32 sums) travel as their
// bytes; `bytes` must be a multiple of 4 (the format counts 4-byte units).
inline const void* take_bytes(const Key& key, size_t bytes) { return take(key, bytes / sizeof(float)); }
inline void record_bytes(const Key& key, const void* data, size_t bytes) {
  record(key, static_cast<const float*>(data), bytes / sizeof(float));
}

}  // namespace edgert::cpu::prepared
