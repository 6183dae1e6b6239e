#include "engine_handle.h"

#include <sys/mman.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include "engine_file.h"
#include "error.h"

namespace edgert::daemon {

EngineFootprint read_engine_footprint(const std::string& path) {
  EngineFile file;
  edgert_error error{};
  if (!file.open(path, &error)) throw std::runtime_error(error.message);
  EngineFootprint f;
  f.file_bytes = file.size();
  const fb::Engine* e = file.engine();
  const fb::Graph* main = e->graphs()->Get(0);
  // Upper bound until the engine carries a memory plan: every activation alive at once, sized
  // at the optimization profile's maximum where a dimension is dynamic.
  std::map<std::string, std::vector<int64_t>> max_shapes;
  if (e->profiles() && e->profiles()->size() && e->profiles()->Get(0)->inputs())
    for (const fb::ShapeRange* r : *e->profiles()->Get(0)->inputs())
      max_shapes[r->input()->str()] = std::vector<int64_t>(r->max()->begin(), r->max()->end());
  int64_t scale = 1;
  for (const auto& [name, dims] : max_shapes)
    for (int64_t d : dims) scale = std::max<int64_t>(scale, d);
  if (main->tensors())
    for (const fb::Tensor* t : *main->tensors()) {
      if (t->weight() >= 0 || !t->rank_known() || !t->shape()) continue;
      uint64_t bytes = edgert::dtype_size(t->dtype() ? t->dtype() : EDGERT_DTYPE_FLOAT32);
      for (const fb::Dim* d : *t->shape()) bytes *= static_cast<uint64_t>(d->value() >= 0 ? d->value() : scale);
      f.activation_bytes += bytes;
    }
  return f;
}

EngineHandle::EngineHandle(const std::string& path, const std::string& plugin_path, const std::string& board,
                           bool mlock_weights)
    : path_(path), id_(path.substr(path.rfind('/') + 1)) {
  footprint_ = read_engine_footprint(path);
  edgert_load_options options;
  edgert_load_options_init(&options);
  options.plugin_path = plugin_path.empty() ? nullptr : plugin_path.c_str();
  options.expected_board = board.empty() ? nullptr : board.c_str();
  edgert_error error{};
  if (edgert_engine_load(path.c_str(), &options, &engine_, &error) != EDGERT_OK) throw std::runtime_error(error.message);
  if (edgert_context_create(engine_, &context_, &error) != EDGERT_OK) {
    edgert_engine_release(engine_);
    throw std::runtime_error(error.message);
  }
  if (edgert_engine_num_inputs(engine_) != 1) {
    edgert_context_release(context_);
    edgert_engine_release(engine_);
    throw std::runtime_error("engine '" + path + "' has " + std::to_string(edgert_engine_num_inputs(engine_)) +
                             " inputs; a camera pipeline needs exactly one image input");
  }
  edgert_engine_input_info(engine_, 0, &input_);
  for (int32_t i = 0; i < edgert_engine_num_outputs(engine_); ++i) {
    edgert_tensor_info info{};
    edgert_engine_output_info(engine_, i, &info);
    output_names_.push_back(info.name);
  }
  outputs_.resize(output_names_.size());
  if (mlock_weights) lock_mapping_in_ram();
}

// The runtime maps the engine file privately; pinning that mapping keeps swap (zram on small
// boards) away from the weights every frame reads. Found through /proc/self/maps because the
// C API does not expose the mapping's address.
void EngineHandle::lock_mapping_in_ram() {
  char resolved[PATH_MAX];
  if (!realpath(path_.c_str(), resolved)) return;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < strlen(resolved) || line.compare(line.size() - strlen(resolved), std::string::npos, resolved) != 0)
      continue;
    unsigned long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &start, &end) != 2) continue;
    if (mlock(reinterpret_cast<void*>(start), end - start) != 0)
      throw std::runtime_error("cannot lock engine '" + path_ + "' in RAM (mlock): " + strerror(errno) +
                               "; raise LimitMEMLOCK= or set mlock_weights: false");
    locked_bytes_ += end - start;
  }
}

EngineHandle::~EngineHandle() {
  if (context_) edgert_context_release(context_);
  if (engine_) edgert_engine_release(engine_);
}

const std::vector<edgert_tensor>& EngineHandle::run(const edgert_tensor& input) {
  edgert_error error{};
  if (edgert_context_run(context_, &input, 1, &error) != EDGERT_OK) throw std::runtime_error(error.message);
  for (size_t i = 0; i < outputs_.size(); ++i) edgert_context_output(context_, static_cast<int32_t>(i), &outputs_[i]);
  return outputs_;
}

}  // namespace edgert::daemon
