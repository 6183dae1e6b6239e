// Static memory planning (TensorRT's activation arena, TFLite's ArenaPlanner): every
// activation of the main graph whose size is known at build time gets a fixed offset in one
// arena, and tensors whose lifetimes do not overlap share bytes.
//
// Lifetimes follow the execution order: a tensor lives from the node writing it to the last
// node reading it (a node running a subgraph counts as reading what the subgraph and its own
// subgraphs read by name; engine outputs live to the end). Placement is best-fit in execution order: each
// tensor takes the smallest gap between the tensors alive with it, or the end of the arena.
// Element-wise ops whose kernels tolerate aliasing write over an input read for the last time
// (in place). A Concat along a leading axis gets its inputs written straight into their place
// in its output (the copy elided; the Concat kernel skips inputs already in place), when it is
// the only reader of each (concats_in_place in memory_planner.cpp has the conditions).
//
// Not planned (left to the runtime's caching allocator): engine inputs (the caller's memory),
// constants (the mmap), tensors with dynamic or data-dependent shapes, outputs of If / Loop /
// Scan. An engine with dynamic inputs is therefore planned only for its static tensors: a plan
// at the profile's max shapes would reserve the worst case for every run, and the cached
// allocator already stops allocating once shapes repeat.
#pragma once

#include <cstdint>
#include <vector>

#include "ir.h"

namespace edgert::builder {

struct MemoryPlan {
  uint64_t alignment = 64;           // every offset is a multiple; the arena base is too
  uint64_t arena_bytes = 0;
  uint64_t workspace_bytes = 0;      // largest scratch any host node asks for, allocated once
  // Tensors in device or unified memory (Value::space) are planned in arenas of their own.
  uint64_t device_arena_bytes = 0, unified_arena_bytes = 0;
  uint64_t device_workspace_bytes = 0;  // largest scratch any device node asks for
  std::vector<int64_t> offsets;      // per value of graphs[0]: arena offset, -1 when not planned
  std::vector<uint64_t> sizes;       // per value: bytes reserved (0 when not planned)
  // Statistics for -v and RESULTS.md.
  uint64_t activation_bytes = 0;     // sum of the planned tensors' sizes: the arena without reuse
  uint64_t largest_tensor_bytes = 0; // no plan can be smaller than this
  int32_t planned_tensors = 0;
  int32_t in_place = 0;
  int32_t concats_in_place = 0;      // Concat nodes whose inputs were planned inside the output

  uint64_t& arena_bytes_of(edgert_memory_space space) {
    return space == EDGERT_MEMORY_DEVICE ? device_arena_bytes : space == EDGERT_MEMORY_UNIFIED ? unified_arena_bytes
                                                                                               : arena_bytes;
  }
};

// Needs kernels selected and shapes inferred (node.plugin, value shapes, node.workspace_bytes).
MemoryPlan plan_memory(const Model& model);

}  // namespace edgert::builder
