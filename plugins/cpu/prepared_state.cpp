#include "prepared_state.h"

#include <cstring>

namespace edgert::cpu::prepared {
namespace {

constexpr char kMagic[8] = {'E', 'D', 'G', 'T', 'P', 'R', 'E', 'P'};
constexpr uint32_t kVersion = 1;
constexpr size_t kAlignment = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  int64_t tactic;
  uint64_t count;
};
struct Record {
  Key key;
  uint64_t floats;
  uint64_t offset;  // from the start of the bytes; a multiple of kAlignment
};
static_assert(sizeof(Header) == 32 && sizeof(Record) == 56, "the stored layout is fixed");

size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

thread_local Recorder* Scope::recorder_ = nullptr;
thread_local Reader* Scope::reader_ = nullptr;

size_t Recorder::size() const {
  size_t end = align_up(sizeof(Header) + arrays_.size() * sizeof(Record));
  for (const Array& a : arrays_) end = align_up(end) + a.floats * sizeof(float);
  return end;
}

void Recorder::write(int64_t tactic, void* out) const {
  uint8_t* bytes = static_cast<uint8_t*>(out);
  std::memset(bytes, 0, size());
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kVersion;
  header.tactic = tactic;
  header.count = arrays_.size();
  std::memcpy(bytes, &header, sizeof header);
  size_t end = align_up(sizeof(Header) + arrays_.size() * sizeof(Record));
  for (size_t i = 0; i < arrays_.size(); ++i) {
    const Array& a = arrays_[i];
    end = align_up(end);
    const Record record{a.key, a.floats, end};
    std::memcpy(bytes + sizeof(Header) + i * sizeof(Record), &record, sizeof record);
    std::memcpy(bytes + end, a.data, a.floats * sizeof(float));
    end += a.floats * sizeof(float);
  }
}

Reader::Reader(const void* bytes, size_t size, int64_t tactic) {
  Header header{};
  if (!bytes || size < sizeof header) return;
  std::memcpy(&header, bytes, sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.version != kVersion || header.tactic != tactic ||
      header.count > (size - sizeof header) / sizeof(Record))
    return;
  bytes_ = static_cast<const uint8_t*>(bytes);
  size_ = size;
  count_ = header.count;
  spent_ = false;
}

const float* Reader::take(const Key& key, size_t floats) {
  if (spent_ || next_ >= count_) {
    spent_ = true;
    return nullptr;
  }
  Record record{};
  std::memcpy(&record, bytes_ + sizeof(Header) + next_ * sizeof(Record), sizeof record);
  ++next_;
  const uint8_t* data = bytes_ + record.offset;
  // Float loads need 4-byte alignment at least; the engine gives 64 (record offsets from a
  // 64-byte aligned region), the builder's own copy malloc's 16.
  if (!(record.key == key) || record.floats != floats || record.offset % kAlignment != 0 || record.offset > size_ ||
      floats > (size_ - record.offset) / sizeof(float) || reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    spent_ = true;
    return nullptr;
  }
  return reinterpret_cast<const float*>(data);
}

}  // namespace edgert::cpu::prepared
