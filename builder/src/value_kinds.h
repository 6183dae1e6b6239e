// Which values are sequences or optionals, where the model does not declare it: the outputs of
// the sequence and optional ops, and what If, Loop and Identity pass on. Marks the nodes that
// read or write such values, which the runtime runs itself (kernel_selection.h).
#pragma once

#include "ir.h"

namespace edgert::builder {

// The ops on sequences and optionals (runtime/src/sequence_ops.h).
bool is_sequence_op(const Node& node);

void infer_value_kinds(Model& model);

}  // namespace edgert::builder
