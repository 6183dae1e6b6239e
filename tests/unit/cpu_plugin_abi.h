// The CPU plugin reached through its C ABI alone (dlopen + edgert_plugin_entry), for the INT8
// tactics test and the INT8-vs-FP32 benchmark: nodes with owned attributes, tensors of any dtype
// as bytes, and one tactic run as the builder and runtime run it (tactics() seeing only the
// constants' data, then prepare(tactic) and execute() with everything). Needs no runtime
// library, so these programs build from the plugin alone.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "edgert/plugin.h"

namespace edgert::test {

// The plugin, loaded once from `dir` and never closed (its thread pool's workers run its code
// until the process exits).
inline const edgert_plugin& cpu_plugin_in(const std::string& dir) {
  static const edgert_plugin* plugin = [&] {
    const std::string path = dir + "/libedgert_plugin_cpu.so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw std::runtime_error("cannot load " + path + ": " + dlerror());
    auto entry = reinterpret_cast<edgert_plugin_entry_fn>(dlsym(handle, EDGERT_PLUGIN_ENTRY_SYMBOL));
    if (!entry) throw std::runtime_error(path + " has no " EDGERT_PLUGIN_ENTRY_SYMBOL);
    return entry();
  }();
  return *plugin;
}

inline const edgert_kernel& kernel_named(const edgert_plugin& plugin, const char* name) {
  for (int32_t i = 0; i < plugin.num_kernels; ++i)
    if (std::strcmp(plugin.kernels[i].name, name) == 0) return plugin.kernels[i];
  throw std::runtime_error(std::string("the cpu plugin has no kernel ") + name);
}

// Threads for the kernels that follow (0: the plugin's default).
inline void set_threads(const edgert_plugin& plugin, int threads) {
  edgert_plugin_config config{sizeof(edgert_plugin_config), threads, 0};
  edgert_error error{};
  if (plugin.configure && plugin.configure(&config, &error) != EDGERT_OK) throw std::runtime_error(error.message);
}

// A node with owned attribute storage.
class NodeSpec {
 public:
  NodeSpec(const char* domain, const char* op, int inputs, int outputs = 1)
      : domain_(domain), op_(op), inputs_(inputs), outputs_(outputs) {}
  NodeSpec& ints(const char* name, std::vector<int64_t> v) {
    int_storage_.push_back(std::move(v));
    edgert_attribute a{};
    a.name = name;
    a.type = EDGERT_ATTR_INTS;
    a.ints = int_storage_.back().data();
    a.count = int_storage_.back().size();
    attrs_.push_back(a);
    return *this;
  }
  NodeSpec& integer(const char* name, int64_t v) {
    edgert_attribute a{};
    a.name = name;
    a.type = EDGERT_ATTR_INT;
    a.i = v;
    attrs_.push_back(a);
    return *this;
  }
  NodeSpec& real(const char* name, float v) {
    edgert_attribute a{};
    a.name = name;
    a.type = EDGERT_ATTR_FLOAT;
    a.f = v;
    attrs_.push_back(a);
    return *this;
  }
  NodeSpec& string(const char* name, const std::string& v) {
    string_storage_.push_back(v);
    edgert_attribute a{};
    a.name = name;
    a.type = EDGERT_ATTR_STRING;
    a.s = string_storage_.back().c_str();
    a.s_len = string_storage_.back().size();
    attrs_.push_back(a);
    return *this;
  }
  NodeSpec& floats(const char* name, std::vector<float> v) {
    float_storage_.push_back(std::move(v));
    edgert_attribute a{};
    a.name = name;
    a.type = EDGERT_ATTR_FLOATS;
    a.floats = float_storage_.back().data();
    a.count = float_storage_.back().size();
    attrs_.push_back(a);
    return *this;
  }
  edgert_node node() const {
    return edgert_node{"test_node", domain_, op_, 17, inputs_, outputs_, static_cast<int32_t>(attrs_.size()),
                       attrs_.data(), nullptr, 0};
  }
  const char* op() const { return op_; }

 private:
  const char* domain_;
  const char* op_;
  int inputs_, outputs_;
  std::vector<edgert_attribute> attrs_;
  std::deque<std::vector<int64_t>> int_storage_;
  std::deque<std::vector<float>> float_storage_;
  std::deque<std::string> string_storage_;
};

// What a kernel exports for `tactic` (edgert_kernel.export_prepared) given `views` (constants'
// data set): the bytes an engine stores, and the inputs they replace.
struct PreparedBytes {
  std::shared_ptr<uint8_t> data;
  size_t size = 0;
  uint64_t replaced_inputs = 0;  // what the kernel says it no longer reads given the bytes
};

inline PreparedBytes export_prepared_bytes(const edgert_kernel& k, const edgert_node& node,
                                           const std::vector<edgert_tensor>& views, int64_t tactic) {
  PreparedBytes out;
  edgert_error error{};
  if (!k.export_prepared) return out;
  edgert_status s =
      k.export_prepared(&k, &node, tactic, views.data(), nullptr, 0, &out.size, &out.replaced_inputs, &error);
  EXPECT_EQ(s, EDGERT_OK) << error.message;
  if (s != EDGERT_OK || out.size == 0) return PreparedBytes{};
  out.data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (out.size + 63) / 64 * 64)), &std::free);
  size_t written = 0;
  s = k.export_prepared(&k, &node, tactic, views.data(), out.data.get(), out.size, &written, &out.replaced_inputs,
                        &error);
  EXPECT_EQ(s, EDGERT_OK) << error.message;
  EXPECT_EQ(written, out.size);
  return out;
}

// A tensor's dtype, dims and bytes; `constant`: tactics() sees its data (weights, scales).
struct Tensor {
  edgert_dtype dtype = EDGERT_DTYPE_UNDEFINED;  // UNDEFINED: an optional input left out
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  bool constant = false;

  template <typename T>
  static Tensor of(edgert_dtype dtype, std::vector<int64_t> dims, const std::vector<T>& values, bool constant = false) {
    Tensor t;
    t.dtype = dtype;
    t.dims = std::move(dims);
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    t.constant = constant;
    return t;
  }
  edgert_tensor view(bool with_data) const {
    edgert_tensor v{};
    v.dtype = dtype;
    if (dtype == EDGERT_DTYPE_UNDEFINED) return v;
    v.rank = static_cast<int32_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) v.dims[i] = dims[i];
    v.data = with_data ? const_cast<uint8_t*>(bytes.data()) : nullptr;
    return v;
  }
};

inline int64_t count_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Uniform random values of T in [lo, hi] (integers) or [lo, hi) (floats).
template <typename T>
std::vector<T> random_values(std::mt19937& rng, int64_t count, double lo, double hi) {
  std::vector<T> v(static_cast<size_t>(count));
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (T& x : v) x = static_cast<T>(dist(rng));
  } else {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (T& x : v) x = static_cast<T>(dist(rng));
  }
  return v;
}

inline std::vector<edgert_tactic> list_tactics(const edgert_kernel& k, const edgert_node& node,
                                               const std::vector<Tensor>& inputs) {
  std::vector<edgert_tensor> views;
  for (const Tensor& t : inputs) views.push_back(t.view(t.constant));
  if (!k.tactics) return {{0, "reference"}};
  std::vector<edgert_tactic> out(64);
  const int32_t n = k.tactics(&k, &node, views.data(), out.data(), static_cast<int32_t>(out.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// A node prepared at one tactic, ready to execute any number of times.
class PreparedRun {
 public:
  PreparedRun(const edgert_kernel& k, const edgert_node& node, const std::vector<Tensor>& inputs, int64_t tactic)
      : k_(k), node_(node) {
    for (const Tensor& t : inputs) views_.push_back(t.view(true));
    edgert_prepare_info info{};
    edgert_error error{};
    if (k.prepare(&k, &node_, tactic, views_.data(), &out_, &state_, &info, &error) != EDGERT_OK)
      throw std::runtime_error(std::string("prepare: ") + error.message);
    size_t element = 1;
    switch (out_.dtype) {
      case EDGERT_DTYPE_FLOAT32: case EDGERT_DTYPE_INT32: element = 4; break;
      case EDGERT_DTYPE_INT64: case EDGERT_DTYPE_FLOAT64: element = 8; break;
      case EDGERT_DTYPE_FLOAT16: case EDGERT_DTYPE_INT16: case EDGERT_DTYPE_UINT16: element = 2; break;
      default: element = 1;
    }
    int64_t n = 1;
    for (int i = 0; i < out_.rank; ++i) n *= out_.dims[i];
    output_.assign(static_cast<size_t>(n) * element, 0xA5);  // poison: every byte must be written
    out_.data = output_.data();
    const size_t ws = (info.workspace_bytes + 63) / 64 * 64;
    workspace_.reset(ws ? std::aligned_alloc(64, ws) : nullptr);
  }
  ~PreparedRun() {
    if (state_) k_.release(&k_, state_);
  }
  PreparedRun(const PreparedRun&) = delete;
  PreparedRun& operator=(const PreparedRun&) = delete;

  void execute() {
    edgert_error error{};
    if (k_.execute(&k_, state_, &node_, views_.data(), &out_, workspace_.get(), nullptr, &error) != EDGERT_OK)
      throw std::runtime_error(std::string("execute: ") + error.message);
  }
  const std::vector<uint8_t>& output() const { return output_; }
  const edgert_tensor& output_tensor() const { return out_; }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  const edgert_kernel& k_;
  edgert_node node_;
  std::vector<edgert_tensor> views_;
  edgert_tensor out_{};
  void* state_ = nullptr;
  std::vector<uint8_t> output_;
  std::unique_ptr<void, Free> workspace_;
};

// The output bytes of one run at `tactic`.
inline std::vector<uint8_t> run_tactic(const edgert_kernel& k, const edgert_node& node,
                                       const std::vector<Tensor>& inputs, int64_t tactic) {
  PreparedRun run(k, node, inputs, tactic);
  run.execute();
  return run.output();
}

}  // namespace edgert::test
