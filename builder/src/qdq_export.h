// Explicit quantization written back into the float graph (edgert quantize --export-qdq), so
// other runtimes run the quantization edgert runs: a QuantizeLinear -> DequantizeLinear pair
// after every activation the int8 rewrite holds in uint8 (int8_rewrite.h, with the scale and
// zero point it uses there), and each int8 convolution's (and Gemm's) weights as per-channel int8
// and its bias as int32 behind a DequantizeLinear, in ONNX Runtime's QDQ format. A Relu or Clip
// the rewrite absorbs stays in the graph before its pair: ONNX Runtime drops it there as well.
#pragma once

#include "int8_rewrite.h"

namespace edgert::builder {

// Edits `graph` (its nodes stay topologically sorted); fills `report` as rewrite_int8 would for
// the same table. Returns the number of Q/DQ pairs inserted.
int insert_qdq(Graph& graph, const QuantizationTable& quantization, const Int8RewriteOptions& options,
               Int8RewriteReport* report);

}  // namespace edgert::builder
