// The ops on ONNX sequences and optionals, which the runtime runs itself: the plugin ABI carries
// tensors only. SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
// SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap (a subgraph per element),
// Optional, OptionalHasElement, OptionalGetElement, and Identity of a sequence or optional.
// Sequences are OwnedValues of the executor (copied in, so an input's tensors may go after the
// op); an optional without a value is a value of dtype UNDEFINED.
#pragma once

#include <vector>

#include "graph_executor.h"

namespace edgert {

edgert_status run_sequence_op(GraphExecutor& executor, const LoadedNode& node, const std::vector<edgert_tensor>& values,
                              edgert_error* error);

}  // namespace edgert
