// What an engine file holds, read without loading its plugins, as the JSON `edgert inspect
// --json` prints (the fields are listed in README): header, board, plugins, inputs and outputs,
// nodes with their fused parts, tactics and precisions, memory plan and profiles.
#pragma once

#include <nlohmann/json.hpp>

#include "engine_file.h"

namespace edgert::cli {

nlohmann::ordered_json engine_json(const EngineFile& file);

}  // namespace edgert::cli
