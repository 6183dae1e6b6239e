#include "engine_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "build_error.h"
#include "engine_file.h"
#include "kernel_selection.h"

namespace edgert::builder {
namespace {

namespace fbs = edgert::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Regions get indices as the graphs name them and offsets once all are known (place()), in an
// order for the page cache: a load maps the file, and a page fault maps the whole folio around
// the byte read (up to megabytes with the large folios of current kernels), so what kernels
// read while running (small constants: biases, scales, shapes; prepared weights) lies together
// at the front, the large original weights that kernels read (or pack once) behind it, and
// last the original weights no kernel reads at all (their readers hold prepared weights).
struct WeightPlan {
  // Tensors of at most this size count as small.
  static constexpr size_t kSmallBytes = 64 * 1024;
  enum Rank { kSmall = 0, kPrepared = 1, kLarge = 2, kUnread = 3 };
  std::vector<std::pair<uint64_t, const std::vector<uint8_t>*>> regions;  // offset, bytes
  std::vector<Rank> rank;
  std::map<const std::vector<uint8_t>*, int32_t> index_of;  // shared data is stored once
  uint64_t size = 0;
  uint64_t unread_bytes = 0;

  // `unread`: no kernel reads this use of the data; data shared with a read use is read.
  int32_t add(const std::vector<uint8_t>* data, bool prepared = false, bool unread = false) {
    const Rank r = prepared ? kPrepared : unread ? kUnread : data->size() <= kSmallBytes ? kSmall : kLarge;
    auto it = index_of.find(data);
    if (it != index_of.end()) {
      rank[it->second] = std::min(rank[it->second], r);
      return it->second;
    }
    regions.emplace_back(0, data);
    rank.push_back(r);
    int32_t index = static_cast<int32_t>(regions.size() - 1);
    index_of[data] = index;
    return index;
  }
  // Assigns every region's offset, by rank, each rank in the order added.
  void place() {
    size = 0;
    unread_bytes = 0;
    for (int r = kSmall; r <= kUnread; ++r)
      for (size_t i = 0; i < regions.size(); ++i) {
        if (rank[i] != r) continue;
        const uint64_t offset = (size + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
        regions[i].first = offset;
        size = offset + regions[i].second->size();
        if (r == kUnread) unread_bytes += regions[i].second->size();
      }
  }
};

// Per value of `graph`: true when it is read only as inputs that their nodes' prepared weights
// replace (Node::prepared_replaces), so no kernel reads its bytes. Only for engines without
// optimization profiles: a node prepared at another profile's tactic, or at shapes where its
// tactic does not apply, reads the original weights.
std::vector<bool> replaced_by_prepared_weights(const Graph& graph) {
  std::vector<int> uses(graph.values.size(), 0), replaced(graph.values.size(), 0);
  for (const Node& n : graph.nodes) {
    for (size_t pos = 0; pos < n.inputs.size(); ++pos) {
      const int32_t t = n.inputs[pos];
      if (t < 0) continue;
      ++uses[t];
      if (n.prepared && pos < 64 && ((n.prepared_replaces >> pos) & 1u)) ++replaced[t];
    }
    for (const Attribute& a : n.attributes)
      if (a.tensor >= 0) ++uses[a.tensor];
  }
  for (int32_t t : graph.outputs) ++uses[t];
  std::vector<bool> unread(graph.values.size(), false);
  for (size_t t = 0; t < graph.values.size(); ++t) unread[t] = uses[t] > 0 && replaced[t] == uses[t];
  return unread;
}

// `unread_possible`: constants may be marked unread (replaced_by_prepared_weights).
Offset<fbs::Graph> write_graph(FlatBufferBuilder& fbb, const Model& model, const Graph& graph, WeightPlan& weights,
                               const std::map<std::string, int32_t>& plugin_index, bool unread_possible) {
  std::vector<bool> referenced(graph.values.size(), false);
  std::set<std::string> read_below;  // read by subgraphs at any depth: constants only they read
  for (const Node& n : graph.nodes) {
    for (int32_t t : n.inputs)
      if (t >= 0) referenced[t] = true;
    for (const Attribute& a : n.attributes) {
      if (a.tensor >= 0) referenced[a.tensor] = true;
      if (a.graph >= 0) outer_names(model, a.graph, read_below);
    }
  }
  for (int32_t t : graph.outputs) referenced[t] = true;
  if (!read_below.empty())
    for (size_t i = 0; i < graph.values.size(); ++i)
      if (read_below.count(graph.values[i].name)) referenced[i] = true;

  std::vector<bool> unread(graph.values.size(), false);
  if (unread_possible) unread = replaced_by_prepared_weights(graph);
  std::vector<Offset<fbs::Tensor>> tensors;
  for (size_t i = 0; i < graph.values.size(); ++i) {
    const Value& v = graph.values[i];
    std::vector<Offset<fbs::Dim>> dims;
    for (const Dim& d : v.shape)
      dims.push_back(fbs::CreateDim(fbb, d.value, d.name.empty() ? 0 : fbb.CreateString(d.name)));
    const bool read_by_a_subgraph = read_below.count(v.name) > 0;
    int32_t weight =
        v.is_constant() && referenced[i] ? weights.add(v.data.get(), false, unread[i] && !read_by_a_subgraph) : -1;
    tensors.push_back(fbs::CreateTensor(fbb, fbb.CreateString(v.name), v.dtype, fbb.CreateVector(dims),
                                        v.rank_known, weight, static_cast<int8_t>(v.space),
                                        static_cast<int8_t>(v.kind)));
  }
  std::vector<Offset<fbs::Node>> nodes;
  for (const Node& n : graph.nodes) {
    std::vector<Offset<fbs::Attribute>> attributes;
    for (const Attribute& a : n.attributes) {
      auto name = fbb.CreateString(a.name);
      auto s = a.type == EDGERT_ATTR_STRING
                   ? fbb.CreateVector(reinterpret_cast<const uint8_t*>(a.s.data()), a.s.size())
                   : 0;
      auto ints = a.type == EDGERT_ATTR_INTS ? fbb.CreateVector(a.ints) : 0;
      auto floats = a.type == EDGERT_ATTR_FLOATS ? fbb.CreateVector(a.floats) : 0;
      auto strings = a.type == EDGERT_ATTR_STRINGS ? fbb.CreateVectorOfStrings(a.strings) : 0;
      attributes.push_back(fbs::CreateAttribute(fbb, name, static_cast<fbs::AttributeType>(a.type), a.i, a.f, s, ints,
                                                floats, strings, a.tensor, a.graph));
    }
    auto it = plugin_index.find(n.plugin);
    if (it == plugin_index.end()) build_fail(EDGERT_ERR_INTERNAL, "node '%s' has no selected plugin", n.name.c_str());
    nodes.push_back(fbs::CreateNode(fbb, fbb.CreateString(n.name), fbb.CreateString(n.domain),
                                    fbb.CreateString(n.op_type), n.opset, it->second, fbb.CreateString(n.kernel),
                                    n.tactic, fbb.CreateVector(n.inputs), fbb.CreateVector(n.outputs),
                                    fbb.CreateVector(attributes),
                                    n.tactic_name.empty() ? 0 : fbb.CreateString(n.tactic_name),
                                    n.profile_tactics.empty() ? 0 : fbb.CreateVector(n.profile_tactics),
                                    n.profile_tactic_names.empty() ? 0 : fbb.CreateVectorOfStrings(n.profile_tactic_names),
                                    n.kernel_state_bytes > 0 ? static_cast<uint64_t>(n.kernel_state_bytes) : 0,
                                    n.prepared ? weights.add(n.prepared.get(), true) : -1,
                                    n.precision_note.empty() ? 0 : fbb.CreateString(n.precision_note)));
  }
  return fbs::CreateGraph(fbb, fbb.CreateString(graph.name), fbb.CreateVector(tensors), fbb.CreateVector(nodes),
                          fbb.CreateVector(graph.inputs), fbb.CreateVector(graph.outputs));
}

void write_all(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) build_fail(EDGERT_ERR_IO, "cannot write '%s': %s", path.c_str(), std::strerror(errno));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

std::vector<uint8_t> serialize_engine(const WriterInputs& in, std::vector<uint8_t> reuse) {
  const Model& model = *in.model;
  FlatBufferBuilder fbb(1 << 16);

  // Plugins in order of first use, each with the kernels the engine needs from it.
  std::map<std::string, int32_t> plugin_index;
  std::vector<std::string> plugin_order;
  std::map<std::string, std::vector<std::string>> kernels_of;
  for (const Graph& g : model.graphs)
    for (const Node& n : g.nodes) {
      if (!plugin_index.count(n.plugin)) {
        plugin_index[n.plugin] = static_cast<int32_t>(plugin_order.size());
        plugin_order.push_back(n.plugin);
      }
      auto& list = kernels_of[n.plugin];
      bool seen = false;
      for (const std::string& k : list) seen = seen || k == n.kernel;
      if (!seen) list.push_back(n.kernel);
    }
  std::vector<Offset<fbs::PluginRef>> plugins;
  for (const std::string& name : plugin_order) {
    if (name == kBuiltinPluginName) {
      plugins.push_back(fbs::CreatePluginRef(fbb, fbb.CreateString(name), EDGERT_PLUGIN_ABI_VERSION,
                                             fbb.CreateString(EDGERT_VERSION), fbb.CreateVectorOfStrings(kernels_of[name])));
      continue;
    }
    const LoadedPlugin* loaded = nullptr;
    for (const LoadedPlugin* p : in.plugins)
      if (p->name == name) loaded = p;
    if (!loaded) build_fail(EDGERT_ERR_INTERNAL, "plugin '%s' is not loaded", name.c_str());
    plugins.push_back(fbs::CreatePluginRef(fbb, fbb.CreateString(name), loaded->table->abi_version,
                                           fbb.CreateString(loaded->table->version),
                                           fbb.CreateVectorOfStrings(kernels_of[name])));
  }

  WeightPlan weights;
  std::vector<Offset<fbs::Graph>> graphs;
  for (const Graph& g : model.graphs)
    graphs.push_back(write_graph(fbb, model, g, weights, plugin_index, &g == &model.graphs[0] && in.profiles.empty()));

  const Graph& main = model.graphs[0];
  std::vector<Offset<fbs::Binding>> inputs, outputs;
  for (int32_t t : main.inputs) inputs.push_back(fbs::CreateBinding(fbb, fbb.CreateString(main.values[t].name), t));
  for (int32_t t : main.outputs) outputs.push_back(fbs::CreateBinding(fbb, fbb.CreateString(main.values[t].name), t));

  weights.place();
  std::vector<fbs::WeightRegion> regions;
  for (const auto& [offset, data] : weights.regions) regions.emplace_back(offset, data->size());

  const config::BoardProfile& board = *in.board;
  auto board_ref = fbs::CreateBoardRef(fbb, fbb.CreateString(board.name), fbb.CreateString(board.fingerprint()),
                                       fbb.CreateString(board.hardware.architecture),
                                       fbb.CreateVectorOfStrings(board.hardware.cpu_features),
                                       fbb.CreateString(board.hardware.gpu.empty() ? "none" : board.hardware.gpu));
  std::vector<Offset<fbs::OptimizationProfile>> profiles;
  for (const auto& profile : in.profiles) {
    std::vector<Offset<fbs::ShapeRange>> ranges;
    for (const auto& [name, range] : profile)
      ranges.push_back(fbs::CreateShapeRange(fbb, fbb.CreateString(name), fbb.CreateVector(range.min),
                                             fbb.CreateVector(range.opt), fbb.CreateVector(range.max)));
    profiles.push_back(fbs::CreateOptimizationProfile(fbb, fbb.CreateVector(ranges)));
  }
  std::vector<Offset<fbs::MemoryPlan>> plans;
  for (size_t p = 0; p < in.memory_plans.size(); ++p) {
    const MemoryPlan* mp = in.memory_plans[p];
    plans.push_back(fbs::CreateMemoryPlan(fbb, mp->arena_bytes, mp->alignment, fbb.CreateVector(mp->offsets),
                                          fbb.CreateVector(mp->sizes), mp->workspace_bytes, mp->device_arena_bytes,
                                          mp->unified_arena_bytes, mp->device_workspace_bytes,
                                          p < in.kernel_state_bytes.size() ? in.kernel_state_bytes[p] : 0));
  }
  Offset<fbs::SelfTest> self_test = 0;
  if (in.self_test) {
    auto tensors = [&](const std::vector<SelfTestTensor>& list) {
      std::vector<Offset<fbs::SelfTestTensor>> out;
      for (const SelfTestTensor& t : list)
        out.push_back(fbs::CreateSelfTestTensor(fbb, fbb.CreateString(t.name), fbb.CreateVector(t.shape),
                                                fbb.CreateVector(t.data)));
      return fbb.CreateVector(out);
    };
    auto ins = tensors(in.self_test->inputs);
    auto outs = tensors(in.self_test->outputs);
    self_test = fbs::CreateSelfTest(fbb, in.self_test->seed, ins, outs);
  }
  Offset<fbs::Signature> signature = 0;
  if (in.signer) {
    std::vector<uint8_t> zeros(64, 0);  // signing::kSignatureBytes, filled by sign_engine
    signature = fbs::CreateSignature(fbb, fbb.CreateString("ed25519"), fbb.CreateString(in.signer->name),
                                     fbb.CreateVector(in.signer->public_key), fbb.CreateVector(zeros));
  }
  std::string source = model.source_path.substr(model.source_path.rfind('/') + 1);
  auto engine = fbs::CreateEngine(fbb, kEngineFormatVersion, fbb.CreateString(std::string("edgert ") + EDGERT_VERSION),
                                  board_ref, fbb.CreateVector(plugins), fbb.CreateVector(inputs),
                                  fbb.CreateVector(outputs), fbb.CreateVector(graphs), fbb.CreateVectorOfStructs(regions),
                                  fbb.CreateString(source), fbb.CreateVector(profiles), fbb.CreateVector(plans),
                                  self_test, signature, weights.unread_bytes);
  fbs::FinishEngineBuffer(fbb, engine);

  uint64_t fb_size = fbb.GetSize();
  uint64_t weights_offset = (fb_size + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  uint64_t weights_size = (weights.size + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  // Every byte is written below, so a reused buffer keeps its pages and only the gaps between
  // the parts are cleared (zeroing and faulting in a fresh 47 MB buffer was a tenth of a warm
  // resnet18 build).
  std::vector<uint8_t> bytes = std::move(reuse);
  const size_t total = weights_offset + weights_size + sizeof(EngineTrailer);
  // Room for the self-test vector (at most 1 MiB, self_test.h) that the builder adds in a second
  // serialization, so that one grows into this buffer instead of moving 47 MB to a new one.
  if (bytes.capacity() < total) bytes.reserve(total + (size_t{2} << 20));
  bytes.resize(total);
  std::memcpy(bytes.data(), fbb.GetBufferPointer(), fb_size);
  uint64_t cleared_to = fb_size;  // bytes before this are written
  std::vector<std::pair<uint64_t, const std::vector<uint8_t>*>> by_offset = weights.regions;
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [offset, data] : by_offset) {
    const uint64_t at = weights_offset + offset;
    if (at > cleared_to) std::memset(bytes.data() + cleared_to, 0, at - cleared_to);
    if (!data->empty()) std::memcpy(bytes.data() + at, data->data(), data->size());
    cleared_to = std::max(cleared_to, at + data->size());
  }
  const uint64_t body_end = weights_offset + weights_size;
  if (body_end > cleared_to) std::memset(bytes.data() + cleared_to, 0, body_end - cleared_to);

  EngineTrailer trailer{};
  std::memcpy(trailer.magic, kTrailerMagic, sizeof trailer.magic);
  trailer.flatbuffer_size = fb_size;
  trailer.weights_offset = weights_offset;
  trailer.weights_size = weights_size;
  trailer.trailer_version = 1;
  size_t body = bytes.size() - sizeof(EngineTrailer);
  std::memcpy(bytes.data() + body, &trailer, sizeof trailer);
  trailer.checksum = engine_checksum(bytes.data(), bytes.size());
  std::memcpy(bytes.data() + body, &trailer, sizeof trailer);
  return bytes;
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) build_fail(EDGERT_ERR_IO, "cannot create '%s': %s", tmp.c_str(), std::strerror(errno));
  try {
    write_all(fd, bytes.data(), bytes.size(), tmp);
    if (fsync(fd) != 0) build_fail(EDGERT_ERR_IO, "cannot fsync '%s': %s", tmp.c_str(), std::strerror(errno));
  } catch (...) {
    ::close(fd);
    unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    build_fail(EDGERT_ERR_IO, "cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(err));
  }
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace edgert::builder
