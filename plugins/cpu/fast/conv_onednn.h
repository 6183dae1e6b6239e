// oneDNN (Debian's libdnnl) as a third-party tactic source for Conv / FusedConv:
// f32-conv-onednn-<isa>, oneDNN's own choice of implementation (for these tensors x64:gemm:jit,
// im2col and its GEMM) for a plain NCHW input and output, weights reordered once in
// prepare into the layout it asks for, bias, residual and activation as its post-ops, run on the
// calling thread alone (Debian's oneDNN brings OpenMP workers, which fought the plugin's own
// threads for the cores: see conv_onednn.cpp). Listed
// only where the plugin was built with oneDNN (x86-64 hosts with libdnnl-dev); the tuner keeps
// it only where it measures faster than the plugin's own tactics.
#pragma once

#include <cstdint>
#include <memory>

#include "activation.h"
#include "nn_common.h"

namespace edgert::cpu {

// Whether this build has oneDNN, and whether it takes this activation as a post-op.
bool onednn_available();
bool onednn_takes(ActivationKind kind);

class OneDnnConv {
 public:
  OneDnnConv();
  ~OneDnnConv();
  OneDnnConv(const OneDnnConv&) = delete;
  OneDnnConv& operator=(const OneDnnConv&) = delete;

  // A 2-D float32 convolution of X [batch, channels, in...] with W [out_channels, channels /
  // group, k...]; `residual`: execute gets a Z (summed before the activation). False when oneDNN
  // has no implementation (the caller then runs the reference).
  bool prepare(const WindowGeometry& g, int64_t batch, int64_t channels, int64_t out_channels, int64_t group,
               const float* w, bool has_bias, bool residual, const Activation& activation);
  // y = act(conv(x, W) + bias + z); z may alias y.
  void execute(const float* x, const float* bias, const float* z, float* y) const;
  // The weights reordered in prepare (0 before prepare or without oneDNN).
  size_t state_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace edgert::cpu
