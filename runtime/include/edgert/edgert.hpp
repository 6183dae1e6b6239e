// A thin RAII layer over edgert.h: owners that release on scope exit, and errors as exceptions
// for C++ callers who prefer them. Adds no behaviour of its own.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "edgert/edgert.h"

namespace edgert {

class Error : public std::runtime_error {
 public:
  explicit Error(const edgert_error& e) : std::runtime_error(e.message), status_(e.status) {}
  edgert_status status() const { return status_; }

 private:
  edgert_status status_;
};

inline void check(edgert_status status, const edgert_error& error) {
  if (status != EDGERT_OK) throw Error(error);
}

class Engine {
 public:
  explicit Engine(const std::string& path, const edgert_load_options* options = nullptr) {
    edgert_error error{};
    edgert_engine* raw = nullptr;
    check(edgert_engine_load(path.c_str(), options, &raw, &error), error);
    engine_.reset(raw);
  }
  const edgert_engine* get() const { return engine_.get(); }
  int32_t num_inputs() const { return edgert_engine_num_inputs(get()); }
  int32_t num_outputs() const { return edgert_engine_num_outputs(get()); }
  edgert_tensor_info input_info(int32_t i) const {
    edgert_tensor_info info{};
    edgert_engine_input_info(get(), i, &info);
    return info;
  }
  edgert_tensor_info output_info(int32_t i) const {
    edgert_tensor_info info{};
    edgert_engine_output_info(get(), i, &info);
    return info;
  }

 private:
  struct Release {
    void operator()(edgert_engine* e) const { edgert_engine_release(e); }
  };
  std::unique_ptr<edgert_engine, Release> engine_;
};

// Must not outlive the Engine it was made from.
class Context {
 public:
  explicit Context(const Engine& engine) {
    edgert_error error{};
    edgert_context* raw = nullptr;
    check(edgert_context_create(engine.get(), &raw, &error), error);
    context_.reset(raw);
  }
  void run(const std::vector<edgert_tensor>& inputs) {
    edgert_error error{};
    check(edgert_context_run(context_.get(), inputs.data(), static_cast<int32_t>(inputs.size()), &error), error);
  }
  // Valid until the next run.
  edgert_tensor output(int32_t index) const {
    edgert_tensor t{};
    edgert_context_output(context_.get(), index, &t);
    return t;
  }
  // Device engines: bind caller memory, enqueue on a stream, wait (edgert.h).
  void bind_input(int32_t index, const edgert_tensor& tensor, edgert_memory_space space) {
    edgert_error error{};
    check(edgert_context_bind_input(context_.get(), index, &tensor, space, &error), error);
  }
  void bind_output(int32_t index, void* data, size_t capacity, edgert_memory_space space) {
    edgert_error error{};
    check(edgert_context_bind_output(context_.get(), index, data, capacity, space, &error), error);
  }
  void enqueue(void* stream = nullptr) {
    edgert_error error{};
    check(edgert_context_enqueue(context_.get(), stream, &error), error);
  }
  void synchronize() {
    edgert_error error{};
    check(edgert_context_synchronize(context_.get(), &error), error);
  }
  edgert_context* get() const { return context_.get(); }

 private:
  struct Release {
    void operator()(edgert_context* c) const { edgert_context_release(c); }
  };
  std::unique_ptr<edgert_context, Release> context_;
};

}  // namespace edgert
