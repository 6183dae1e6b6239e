// If, Loop and Scan: the ops the runtime executes itself, by running subgraphs.
// Loop-carried values and scan outputs live in host buffers between iterations, so these ops
// allocate while they run (unlike kernels); a graph with control flow is not allocation-free.
#pragma once

#include <vector>

#include "graph_executor.h"

namespace edgert {

edgert_status run_if(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                     edgert_error* error);
edgert_status run_loop(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                       edgert_error* error);
edgert_status run_scan(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                       edgert_error* error);

}  // namespace edgert
