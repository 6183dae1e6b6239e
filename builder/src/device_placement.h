// Devices in the build: which plugin runs each node, FP16 on the device, and where tensors live.
//
// Placement (TensorRT's layer assignment, ONNX Runtime's execution-provider partitioning):
// every node of the main graph goes to the highest-scored plugin with a kernel for it, so on a
// board with a GPU the GPU takes whatever its plugin supports and the CPU the rest, except:
// shape arithmetic (nodes whose outputs are all integers: Shape, Gather on shapes, Concat of
// dims) stays on the CPU, where its results are read, and so does every node of a subgraph.
//
// FP16 (--fp16): device nodes run in float16 on tensor cores, except the ones that lose
// accuracy (softmax, normalizations, large reductions, exponentials) and any whose kernel does
// not take float16. Their float32 weights are stored converted; Cast nodes on the device go
// where float32 and float16 meet; engine inputs and outputs stay float32.
//
// Memory spaces: a tensor lives where the kernel writing it runs (device memory for a device
// node). Where a device and a host kernel meet, on a board whose GPU shares the CPU's memory
// (Jetson) the tensor lives in unified memory and nothing is copied (the runtime synchronizes
// the stream before the host kernel); on a discrete GPU an edgert.Copy node moves it across.
// Engine inputs live where their readers are (the runtime stages host inputs there), engine
// outputs where they are written.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir.h"
#include "plugin_loader.h"

namespace edgert::builder {

struct PlacementOptions {
  std::vector<const LoadedPlugin*> plugins;  // candidates, best score first
  bool unified_memory = false;               // the board's GPU shares the CPU's memory
  int32_t float32_prefix = 0;                // FP16: the first this many float16 candidates stay float32
  std::function<void(const std::string&)> log;
};

// Sets node.plugin and node.on_device for every node of every graph (kernel selection then
// picks the kernel and tactic within that plugin). Nodes no plugin supports are left for
// kernel selection to report.
void place_nodes(Model& model, const PlacementOptions& options);

// Moves the device nodes that take it to float16 (see above), except the first
// options.float32_prefix of them in graph order; returns how many. Needs shapes and dtypes
// inferred and nodes placed.
int convert_device_nodes_to_fp16(Model& model, const PlacementOptions& options);

// Channels-last for float16 (where cuDNN's tensor-core convolutions are fast): device nodes
// whose kernel takes the attribute layout = "NHWC" get it, their rank-4 activations stored
// [N, H, W, C] with logical dims kept; dense convolution weights are stored [M, KH, KW, C/group];
// edgert.Reformat nodes convert where such a region meets the rest (none for [N, C, 1, 1]
// tensors, whose bytes are the same in both layouts). Returns the nodes made channels-last.
int convert_device_nodes_to_channels_last(Model& model, const PlacementOptions& options);

// INT8 residual blocks on the device: a QLinearConv whose only reader is a QLinearAdd becomes
// one edgert.QLinearConvAdd (the convolution's bytes, then the add, in its epilogue: the same
// bytes, one kernel fewer; at batch 1 a kernel boundary costs as much as a small layer), where
// the device plugin takes the fused node. Returns the number of adds fused.
int fuse_int8_residual_adds(Model& model, const PlacementOptions& options);

// Sets every main-graph value's memory space and inserts edgert.Copy nodes where a discrete
// device and the host meet; returns the copies inserted.
int assign_memory_spaces(Model& model, const PlacementOptions& options);

// The op of the copies between memory spaces (runtime builtin "builtin-copy").
constexpr const char* kCopyOp = "Copy";

}  // namespace edgert::builder
