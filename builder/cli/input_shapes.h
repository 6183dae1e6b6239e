// `--shapes NAME:1x3x224x224,...` for run and bench (trtexec's spelling): the shape of each input
// to synthesise, or to check a given input against. The flag may be repeated and each value may
// hold a comma-joined list; a name given twice keeps its last shape, as in trtexec.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "loaded_engine.h"
#include "tensor_io.h"

namespace edgert::cli {

using InputShapes = std::map<std::string, std::vector<int64_t>>;

// Parses every --shapes value. A name ends at its last ':' (TF exports put ':' in names);
// dims are non-negative integers joined by 'x'. Throws BuildError naming the bad item.
InputShapes parse_input_shapes(const std::vector<std::string>& values);

// The engine's inputs, in its order: the tensor given for a name when there is one (checked
// against --shapes when both name it), else synthesised (synthetic_input) at the --shapes
// shape or, when `synthesise_unshaped`, at the engine's own (static or the profile's opt).
// Throws BuildError on a --shapes or --input name the engine lacks, a given tensor of
// another shape than --shapes says, and an input left without data (naming the engine's
// inputs and both ways to give one).
std::vector<HostTensor> engine_inputs(const LoadedEngine& engine, std::map<std::string, HostTensor> given,
                                      const InputShapes& shapes, bool synthesise_unshaped, std::mt19937& rng);

}  // namespace edgert::cli
