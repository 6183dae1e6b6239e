// The self-test vector the builder stores in an engine (engine.fbs SelfTest): the engine just
// written is loaded from memory, run once on a seeded random input, and its outputs recorded,
// so whoever loads the engine later (edgertd before a hot swap) can replay it and know the
// kernels on that machine compute what they computed here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine_writer.h"

namespace edgert::builder {

// Largest vector stored (inputs plus outputs): bigger models get none rather than a bloated file.
constexpr size_t kMaxSelfTestBytes = 1u << 20;

// Runs `engine` (the bytes of a complete engine file) on inputs drawn from `seed`. Returns
// nothing, with the reason in `why_not`, when the engine cannot be replayed this way: dynamic
// or non-float32 IO, a vector over kMaxSelfTestBytes, or no kernels for it on this machine.
std::optional<SelfTestVector> make_self_test(const std::vector<uint8_t>& engine, const char* plugin_path,
                                             uint64_t seed, std::string* why_not);

// The engine loaded once and run on the inputs of each seed in turn, as make_self_test draws
// them but with no size limit and integer outputs held as floats: what the FP16 accuracy
// check compares (fp16_accuracy.h).
std::optional<std::vector<SelfTestVector>> run_on_seeds(const std::vector<uint8_t>& engine, const char* plugin_path,
                                                        const std::vector<uint64_t>& seeds, std::string* why_not);

}  // namespace edgert::builder
