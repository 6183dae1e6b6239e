// The C++ side of a CPU kernel: an Op class per node, adapted to the C ABI by make_kernel().
//
// Inside the plugin, failures are thrown as KernelError and turned into a status plus
// message at the ABI boundary (kernel_adapter in kernel.cpp); nothing is thrown across it.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.h"
#include "edgert/plugin.h"
#include "op_support.h"

namespace edgert::cpu {

using plugin::Attributes;
using plugin::fail;
using plugin::is_present;
using plugin::KernelError;
using plugin::normalize_axis;
using plugin::numel;
using plugin::read_ints;
using plugin::set_output;
using plugin::set_shape;
using plugin::Shape;
using plugin::shape_of;
using plugin::shape_string;

double read_scalar(const edgert_tensor& t, const char* what);

template <typename T>
T* data_as(const edgert_tensor& t) {
  return static_cast<T*>(t.data);
}

// One instance per node, created on the first prepare and kept in the kernel state.
class Op {
 public:
  virtual ~Op() = default;
  // The tactic the engine chose for this node (0 = the reference implementation); set by the
  // adapter before every prepare, so an Op reads it in prepare and keeps what it decides.
  void set_tactic(int64_t tactic) { tactic_ = tactic; }
  int64_t tactic() const { return tactic_; }
  // Validate, set every output's dtype and shape, size the workspace. Inputs' data may be NULL
  // at build time; an Op that needs it calls read_ints() which reports NEEDS_DATA.
  virtual void prepare(const edgert_node& node, const edgert_tensor* inputs, edgert_tensor* outputs,
                       edgert_prepare_info& info) = 0;
  virtual void execute(const edgert_node& node, const edgert_tensor* inputs, edgert_tensor* outputs,
                       void* workspace) = 0;
  // Bytes this Op keeps from one prepare to the next beyond the engine's constants (packed or
  // transformed weights, tables): reported as edgert_prepare_info::kernel_state_bytes, which the
  // engine's footprint and the daemon's budget count. An Op that keeps such memory must say so.
  virtual size_t state_bytes() const { return 0; }
  // After a prepare that packed (or borrowed) its weights: bit i set when input i is read by
  // neither execute nor any later prepare, all of it being in the packed arrays. What an engine
  // holding those arrays (prepared_state.h) need not keep resident; 0 when unsure.
  virtual uint64_t inputs_replaced() const { return 0; }

 private:
  int64_t tactic_ = 0;
};

// A candidate implementation of a node. `name` must be a string with static storage (the ABI
// hands the pointer out): dtype-op-variant-isa, e.g. "f32-conv-im2col-6x16-avx2".
struct TacticSpec {
  int64_t id;
  const char* name;
};

using OpFactory = std::unique_ptr<Op> (*)();
using SupportsFn = int32_t (*)(const edgert_node*, const edgert_tensor*);
// The tactics worth timing for this node on this machine, best guess first: a builder that does
// not time them takes the first. Tactic 0 (reference) need not be listed. Inputs are as in
// SupportsFn (dtype may be undefined, data NULL unless constant).
using TacticsFn = std::vector<TacticSpec> (*)(const edgert_node*, const edgert_tensor*);

struct KernelSpec {
  const char* domain;
  const char* op_type;
  const char* name;
  OpFactory factory;
  SupportsFn supports;  // may be null: supports every node of op_type
  TacticsFn tactics;    // may be null: only the reference tactic, id 0
};

template <typename OpT>
std::unique_ptr<Op> create_op() {
  return std::make_unique<OpT>();
}

// The kernels a family file contributes; see kernel_families.h.
class KernelRegistry {
 public:
  template <typename OpT>
  void add(const char* op_type, const char* name, SupportsFn supports = nullptr, TacticsFn tactics = nullptr) {
    specs_.push_back({"", op_type, name, &create_op<OpT>, supports, tactics});
  }
  template <typename OpT>
  void add_in_domain(const char* domain, const char* op_type, const char* name,
                     SupportsFn supports = nullptr, TacticsFn tactics = nullptr) {
    specs_.push_back({domain, op_type, name, &create_op<OpT>, supports, tactics});
  }
  const std::vector<KernelSpec>& specs() const { return specs_; }

 private:
  std::vector<KernelSpec> specs_;
};

}  // namespace edgert::cpu
