#include "engine_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "error.h"

namespace edgert {
namespace {

// Generous bounds that no real model reaches but that keep a hostile file from making the
// verifier or the loader spend unbounded time or memory.
constexpr flatbuffers::uoffset_t kMaxVerifierDepth = 64;
constexpr flatbuffers::uoffset_t kMaxVerifierTables = 10'000'000;

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace

uint64_t engine_checksum(const void* file, size_t size, bool drop_read_pages) {
  size_t body = size - sizeof(EngineTrailer);
  EngineTrailer trailer;
  std::memcpy(&trailer, static_cast<const uint8_t*>(file) + body, sizeof trailer);
  trailer.checksum = 0;
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  if (!drop_read_pages) {
    XXH64_update(&state, file, body);
  } else {
    // A window at a time, each dropped from the resident set once hashed: the check never holds
    // the whole file, so it does not set the process's peak memory.
    constexpr size_t kWindow = size_t{4} << 20;
    const uint8_t* bytes = static_cast<const uint8_t*>(file);
    for (size_t offset = 0; offset < body; offset += kWindow) {
      const size_t length = std::min(kWindow, body - offset);
      XXH64_update(&state, bytes + offset, length);
      madvise(const_cast<uint8_t*>(bytes) + offset, length, MADV_DONTNEED);
    }
  }
  XXH64_update(&state, &trailer, sizeof trailer);
  return XXH64_digest(&state);
}

EngineFile::~EngineFile() {
  if (mapping_) munmap(mapping_, size_);
}

bool EngineFile::open(const std::string& path, edgert_error* error) {
  path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    set_error(error, EDGERT_ERR_IO, "cannot open engine '%s': %s", path.c_str(), std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    set_error(error, EDGERT_ERR_IO, "engine '%s' is not a regular file", path.c_str());
    ::close(fd);
    return false;
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < sizeof(EngineTrailer)) {
    ::close(fd);
    set_error(error, EDGERT_ERR_FORMAT,
              "engine '%s' is truncated: %zu bytes, smaller than the %zu-byte trailer", path.c_str(),
              size_, sizeof(EngineTrailer));
    return false;
  }
  // MAP_PRIVATE + PROT_READ: weights are used in place and never written.
  void* mapping = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) {
    set_error(error, EDGERT_ERR_IO, "cannot mmap engine '%s': %s", path.c_str(), std::strerror(errno));
    return false;
  }
  mapping_ = mapping;
  base_ = static_cast<const uint8_t*>(mapping);
  return verify(error);
}

void EngineFile::drop_resident_pages() const {
  if (mapping_) madvise(mapping_, size_, MADV_DONTNEED);
}

bool EngineFile::open_memory(const void* data, size_t size, const std::string& label,
                             edgert_error* error) {
  path_ = label;
  base_ = static_cast<const uint8_t*>(data);
  size_ = size;
  // Weights are aligned relative to the file start; the start itself must be aligned for that
  // to mean anything (malloc and mmap both give at least this).
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    set_error(error, EDGERT_ERR_INVALID_ARGUMENT, "engine buffer '%s' is not 16-byte aligned", label.c_str());
    return false;
  }
  if (size_ < sizeof(EngineTrailer)) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' is truncated: %zu bytes, smaller than the %zu-byte trailer",
              path_.c_str(), size_, sizeof(EngineTrailer));
    return false;
  }
  return verify(error);
}

bool EngineFile::verify(edgert_error* error) {
  const char* where = path_.c_str();
  size_t body = size_ - sizeof(EngineTrailer);
  std::memcpy(&trailer_, base_ + body, sizeof trailer_);
  if (std::memcmp(trailer_.magic, kTrailerMagic, sizeof kTrailerMagic) != 0) {
    set_error(error, EDGERT_ERR_FORMAT,
              "'%s' is not an edgert engine or is truncated: no trailer magic in its last %zu bytes",
              where, sizeof(EngineTrailer));
    return false;
  }
  if (trailer_.reserved0 != 0 || trailer_.reserved[0] != 0 || trailer_.reserved[1] != 0) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' has non-zero reserved trailer fields (corrupted?)", where);
    return false;
  }
  if (trailer_.trailer_version != 1) {
    set_error(error, EDGERT_ERR_VERSION, "engine '%s' has trailer version %u; this runtime reads 1",
              where, trailer_.trailer_version);
    return false;
  }
  if (trailer_.flatbuffer_size < 8 || trailer_.flatbuffer_size > body ||
      trailer_.weights_offset < trailer_.flatbuffer_size || trailer_.weights_offset % kWeightAlignment ||
      trailer_.weights_offset > body || trailer_.weights_size != body - trailer_.weights_offset) {
    set_error(error, EDGERT_ERR_FORMAT,
              "engine '%s' has an inconsistent layout: file %zu bytes, header %llu bytes, weights at "
              "%llu with %llu bytes (truncated or corrupted)",
              where, size_, static_cast<unsigned long long>(trailer_.flatbuffer_size),
              static_cast<unsigned long long>(trailer_.weights_offset),
              static_cast<unsigned long long>(trailer_.weights_size));
    return false;
  }
  // Mapped: the checksum leaves the pages it read out of the resident set. Most are weights that
  // kernels read in the layout stored for them (prepared weights) or pack once and never read
  // again; they stay in the page cache, and the pages a kernel does read fault back in.
  uint64_t checksum = engine_checksum(base_, size_, mapping_ != nullptr);
  if (checksum != trailer_.checksum) {
    set_error(error, EDGERT_ERR_CHECKSUM,
              "engine '%s' is corrupted: checksum %016llx of its %zu bytes does not match the recorded %016llx",
              where, static_cast<unsigned long long>(checksum), body,
              static_cast<unsigned long long>(trailer_.checksum));
    return false;
  }
  if (!fb::EngineBufferHasIdentifier(base_)) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' lacks the file identifier \"%s\"", where,
              fb::EngineIdentifier());
    return false;
  }
  flatbuffers::Verifier verifier(base_, trailer_.flatbuffer_size, kMaxVerifierDepth, kMaxVerifierTables);
  if (!fb::VerifyEngineBuffer(verifier)) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' header fails FlatBuffers verification", where);
    return false;
  }
  const fb::Engine* e = fb::GetEngine(base_);
  if (e->format_version() < kOldestEngineFormatVersion || e->format_version() > kEngineFormatVersion) {
    set_error(error, EDGERT_ERR_VERSION,
              "engine '%s' has format version %u; this runtime reads versions %u to %u (rebuild the engine "
              "with a matching edgert)",
              where, e->format_version(), kOldestEngineFormatVersion, kEngineFormatVersion);
    return false;
  }

  // Every index and region must be in range before the executor follows it.
  const auto* graphs = e->graphs();
  if (!graphs || graphs->size() == 0) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s' has no graph", where);
    return false;
  }
  // The FlatBuffers verifier checks alignment of scalars but not of vector elements; a hostile
  // file could place 8-byte elements at 4-byte offsets.
  auto misaligned = [&](const void* p, size_t align) {
    return (static_cast<size_t>(static_cast<const uint8_t*>(p) - base_) % align) != 0;
  };
  if (e->weights() && e->weights()->size() && misaligned(e->weights()->Data(), alignof(fb::WeightRegion))) {
    set_error(error, EDGERT_ERR_FORMAT, "engine '%s': the weight table is misaligned", where);
    return false;
  }
  uint32_t num_weights = e->weights() ? e->weights()->size() : 0;
  uint32_t num_plugins = e->plugins() ? e->plugins()->size() : 0;
  for (uint32_t w = 0; w < num_weights; ++w) {
    const fb::WeightRegion* r = e->weights()->Get(w);
    if (r->offset() % kWeightAlignment || r->offset() > trailer_.weights_size ||
        r->size() > trailer_.weights_size - r->offset()) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': weight region %u (offset %llu, %llu bytes) lies "
                "outside the %llu-byte weights section or is misaligned", where, w,
                static_cast<unsigned long long>(r->offset()), static_cast<unsigned long long>(r->size()),
                static_cast<unsigned long long>(trailer_.weights_size));
      return false;
    }
  }
  for (uint32_t p = 0; p < num_plugins; ++p) {
    const fb::PluginRef* ref = e->plugins()->Get(p);
    if (!ref->name() || ref->name()->size() == 0) {
      set_error(error, EDGERT_ERR_FORMAT, "engine '%s': plugin %u has no name", where, p);
      return false;
    }
  }
  for (uint32_t g = 0; g < graphs->size(); ++g) {
    const fb::Graph* graph = graphs->Get(g);
    uint32_t num_tensors = graph->tensors() ? graph->tensors()->size() : 0;
    auto tensor_ok = [&](int32_t t) { return t >= 0 && static_cast<uint32_t>(t) < num_tensors; };
    for (uint32_t t = 0; t < num_tensors; ++t) {
      const fb::Tensor* tensor = graph->tensors()->Get(t);
      uint32_t rank = tensor->shape() ? tensor->shape()->size() : 0;
      if (rank > EDGERT_MAX_RANK) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': graph %u tensor %u has rank %u > %d", where, g, t,
                  rank, EDGERT_MAX_RANK);
        return false;
      }
      if (tensor->dtype() != 0 && !dtype_is_valid(tensor->dtype())) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': graph %u tensor %u has unknown dtype %d", where,
                  g, t, tensor->dtype());
        return false;
      }
      if (tensor->weight() < 0) continue;
      if (static_cast<uint32_t>(tensor->weight()) >= num_weights || !dtype_is_valid(tensor->dtype()) ||
          !tensor->rank_known()) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': constant tensor %u of graph %u has a bad weight "
                  "index %d or dtype %d", where, t, g, tensor->weight(), tensor->dtype());
        return false;
      }
      uint64_t bytes = dtype_size(tensor->dtype());
      for (uint32_t d = 0; d < rank; ++d) {
        int64_t v = tensor->shape()->Get(d)->value();
        if (v < 0 || !checked_mul(bytes, static_cast<uint64_t>(v), &bytes)) {
          set_error(error, EDGERT_ERR_FORMAT, "engine '%s': constant tensor %u of graph %u has a dynamic "
                    "or overflowing shape", where, t, g);
          return false;
        }
      }
      if (bytes != e->weights()->Get(tensor->weight())->size()) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': constant tensor %u of graph %u needs %llu bytes, "
                  "its weight region holds %llu", where, t, g, static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(e->weights()->Get(tensor->weight())->size()));
        return false;
      }
    }
    uint32_t num_nodes = graph->nodes() ? graph->nodes()->size() : 0;
    for (uint32_t n = 0; n < num_nodes; ++n) {
      const fb::Node* node = graph->nodes()->Get(n);
      if (node->plugin() < 0 || static_cast<uint32_t>(node->plugin()) >= num_plugins || !node->op_type() ||
          !node->kernel()) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node %u of graph %u has a bad plugin index %d or "
                  "no op/kernel name", where, n, g, node->plugin());
        return false;
      }
      if (node->prepared() < -1 || (node->prepared() >= 0 && static_cast<uint32_t>(node->prepared()) >= num_weights)) {
        set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node %u of graph %u has prepared weights %d, which is no "
                  "weight region (the engine has %u)", where, n, g, node->prepared(), num_weights);
        return false;
      }
      if (node->inputs())
        for (int32_t t : *node->inputs())
          if (t != -1 && !tensor_ok(t)) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node %u of graph %u reads tensor %d, which "
                      "does not exist", where, n, g, t);
            return false;
          }
      if (node->outputs())
        for (int32_t t : *node->outputs())
          if (!tensor_ok(t)) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node %u of graph %u writes tensor %d, which "
                      "does not exist", where, n, g, t);
            return false;
          }
      if (node->attributes())
        for (const fb::Attribute* a : *node->attributes()) {
          if ((a->ints() && a->ints()->size() && misaligned(a->ints()->Data(), sizeof(int64_t))) ||
              (a->floats() && misaligned(a->floats()->Data(), sizeof(float)))) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': an attribute of node %u of graph %u is misaligned", where, n, g);
            return false;
          }
          if (!a->name()) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': node %u of graph %u has an unnamed attribute", where, n, g);
            return false;
          }
          if (a->type() == fb::AttributeType::Tensor &&
              (!tensor_ok(a->tensor()) || graph->tensors()->Get(a->tensor())->weight() < 0)) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': attribute '%s' of node %u refers to tensor %d, "
                      "which is not a constant", where, a->name()->c_str(), n, a->tensor());
            return false;
          }
          // Subgraphs only point forward, so graph references can never form a cycle.
          if (a->type() == fb::AttributeType::Graph &&
              (a->graph() <= static_cast<int32_t>(g) || static_cast<uint32_t>(a->graph()) >= graphs->size())) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': attribute '%s' of node %u refers to graph %d, "
                      "which is not a later graph", where, a->name()->c_str(), n, a->graph());
            return false;
          }
        }
    }
    for (const auto* list : {graph->inputs(), graph->outputs()})
      if (list)
        for (int32_t t : *list)
          if (!tensor_ok(t)) {
            set_error(error, EDGERT_ERR_FORMAT, "engine '%s': graph %u lists tensor %d as input or output, "
                      "which does not exist", where, g, t);
            return false;
          }
  }
  uint32_t main_tensors = graphs->Get(0)->tensors() ? graphs->Get(0)->tensors()->size() : 0;
  for (const auto* list : {e->inputs(), e->outputs()})
    if (list)
      for (const fb::Binding* b : *list)
        if (!b->name() || b->tensor() < 0 || static_cast<uint32_t>(b->tensor()) >= main_tensors) {
          set_error(error, EDGERT_ERR_FORMAT, "engine '%s': an IO binding is unnamed or refers to a missing "
                    "tensor", where);
          return false;
        }
  engine_ = e;
  return true;
}

}  // namespace edgert
