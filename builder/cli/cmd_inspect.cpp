// edgert inspect ENGINE [--json]: what an engine holds, without loading its plugins, so an
// engine for another board can be inspected anywhere. Given an ONNX model instead, what it holds
// and which plugin kernel would take each node (onnx_inspect.h).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "build_error.h"
#include "commands.h"
#include "engine_file.h"
#include "engine_json.h"
#include "error.h"
#include "onnx_inspect.h"
#include "passes/graph_rewrite.h"

namespace edgert::cli {
namespace {

using nlohmann::ordered_json;

std::string shape_text(const ordered_json& t) {
  if (t.is_null()) return "-";
  std::string s = t["name"].get<std::string>() + " " + t["dtype"].get<std::string>() + " ";
  if (t["shape"].is_null()) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < t["shape"].size(); ++i) {
    const auto& d = t["shape"][i];
    s += (i ? "x" : "") + (d.is_string() ? d.get<std::string>() : std::to_string(d.get<int64_t>()));
  }
  return s + "]";
}

void print_text(const ordered_json& j) {
  std::printf("engine %s (%llu bytes, format %u, %s, from %s)\n", j["file"].get<std::string>().c_str(),
              static_cast<unsigned long long>(j["file_bytes"].get<uint64_t>()), j["format_version"].get<unsigned>(),
              j["producer"].get<std::string>().c_str(), j["source_model"].get<std::string>().c_str());
  std::printf("board %s (%s, fingerprint %s)\n", j["board"]["name"].get<std::string>().c_str(),
              j["board"]["architecture"].get<std::string>().c_str(), j["board"]["fingerprint"].get<std::string>().c_str());
  for (const auto& p : j["plugins"])
    std::printf("plugin %s %s (ABI %u, %zu kernels)\n", p["name"].get<std::string>().c_str(),
                p["version"].get<std::string>().c_str(), p["abi_version"].get<unsigned>(), p["kernels"].size());
  for (const auto& t : j["inputs"]) std::printf("input  %s\n", shape_text(t).c_str());
  for (const auto& t : j["outputs"]) std::printf("output %s\n", shape_text(t).c_str());
  for (const auto& g : j["graphs"]) {
    std::printf("graph %d %s: %zu nodes\n", g["index"].get<int>(), g["name"].get<std::string>().c_str(), g["nodes"].size());
    for (const auto& n : g["nodes"]) {
      std::string tactic = std::to_string(n["tactic"].get<int64_t>());
      if (n["tactic_name"].is_string()) tactic += " (" + n["tactic_name"].get<std::string>() + ")";
      const uint64_t state = n["kernel_state_bytes"].get<uint64_t>();
      const uint64_t prepared = n["prepared_bytes"].get<uint64_t>();
      const std::string state_text = (state ? ", kernel state " + std::to_string(state) + " bytes" : "") +
                                     (prepared ? ", prepared weights " + std::to_string(prepared) + " bytes" : "");
      // The precision, and why where a precision pass chose it ("int8: quantized", "float32:
      // fell back (accuracy guard)", ...): the note names the precision itself.
      const std::string precision = n["precision_note"].is_string() ? n["precision_note"].get<std::string>()
                                                                    : n["precision"].get<std::string>();
      std::printf("  %-32s %-20s %s/%s tactic %s [%s]%s\n", n["name"].get<std::string>().c_str(),
                  n["op"].get<std::string>().c_str(), n["plugin"].get<std::string>().c_str(),
                  n["kernel"].get<std::string>().c_str(), tactic.c_str(), precision.c_str(), state_text.c_str());
      for (const auto& t : n["outputs"]) {
        std::string where;
        const std::string space = t.is_object() ? t["memory_space"].get<std::string>() : "host";
        if (t.is_object() && t.contains("arena_offset") && !t["arena_offset"].is_null())
          where = " @ " + (space == "host" ? std::string() : space + " ") + "arena " +
                  std::to_string(t["arena_offset"].get<int64_t>()) + " (" + std::to_string(t["bytes"].get<uint64_t>()) +
                  " bytes)";
        else if (space != "host")
          where = " in " + space + " memory";
        std::printf("      -> %s%s\n", shape_text(t).c_str(), where.c_str());
      }
    }
  }
  const auto& totals = j["totals"];
  std::printf("totals: %u nodes, %u tensors, %u weight regions, %llu weight bytes\n", totals["nodes"].get<unsigned>(),
              totals["tensors"].get<unsigned>(), totals["weights"].get<unsigned>(),
              static_cast<unsigned long long>(totals["weight_bytes"].get<uint64_t>()));
  if (!j["memory_plan"].is_null())
    std::printf("memory: %llu-byte arena for %llu activation bytes in %llu tensors (largest %llu), %llu-byte workspace\n",
                static_cast<unsigned long long>(j["memory_plan"]["arena_bytes"].get<uint64_t>()),
                static_cast<unsigned long long>(j["memory_plan"]["activation_bytes"].get<uint64_t>()),
                static_cast<unsigned long long>(j["memory_plan"]["planned_tensors"].get<uint64_t>()),
                static_cast<unsigned long long>(j["memory_plan"]["largest_tensor_bytes"].get<uint64_t>()),
                static_cast<unsigned long long>(j["memory_plan"]["workspace_bytes"].get<uint64_t>()));
  if (!j["memory_plan"].is_null() && (totals["device_arena_bytes"].get<uint64_t>() || totals["device_workspace_bytes"].get<uint64_t>()))
    std::printf("device memory: %llu-byte arena, %llu-byte workspace\n",
                static_cast<unsigned long long>(totals["device_arena_bytes"].get<uint64_t>()),
                static_cast<unsigned long long>(totals["device_workspace_bytes"].get<uint64_t>()));
  if (totals["kernel_state_bytes"].get<uint64_t>())
    std::printf("kernel state: %llu bytes (weights packed or transformed by the kernels at load)\n",
                static_cast<unsigned long long>(totals["kernel_state_bytes"].get<uint64_t>()));
  if (totals["prepared_bytes"].get<uint64_t>())
    std::printf("prepared weights: %llu bytes of the file, in the layout their kernels read (mapped at load, not packed)\n",
                static_cast<unsigned long long>(totals["prepared_bytes"].get<uint64_t>()));
  if (totals["unread_weight_bytes"].get<uint64_t>())
    std::printf("unread weights: %llu bytes of the file no kernel reads (their prepared copies serve)\n",
                static_cast<unsigned long long>(totals["unread_weight_bytes"].get<uint64_t>()));
  std::printf("footprint: %llu bytes (the file but unread weights + kernel state + arenas + workspaces)\n",
              static_cast<unsigned long long>(totals["footprint_bytes"].get<uint64_t>()));
  for (const auto& p : j["profiles"]) {
    std::printf("profile %u:", p["index"].get<unsigned>());
    auto text = [](const ordered_json& dims) {
      std::string s = "[";
      for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i].get<int64_t>());
      return s + "]";
    };
    for (const auto& in : p["inputs"])
      std::printf(" %s min %s opt %s max %s", in["name"].get<std::string>().c_str(), text(in["min"]).c_str(),
                  text(in["opt"]).c_str(), text(in["max"]).c_str());
    std::printf("\n");
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string file, plugin_path;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show an engine's header, IO, nodes, plugins and sizes; or an ONNX "
                                                "model's IO, opsets, ops and which plugin kernel takes each node");
  cmd->add_option("file", options->file, "Engine file, or ONNX model (.onnx, or any file that is not an engine)")
      ->required();
  cmd->add_flag("--json", options->json, "Print JSON (fields: see README)");
  cmd->add_option("--plugin-path", options->plugin_path,
                  "Colon-separated plugin directories (ONNX models only: an engine is read without its plugins)");
  cmd->callback([options] {
    if (looks_like_onnx_model(options->file)) {
      ordered_json j = inspect_onnx_model(options->file, options->plugin_path);
      if (options->json) std::printf("%s\n", j.dump(2).c_str());
      else print_onnx_model(j, g_verbose);
      return;
    }
    EngineFile file;
    edgert_error error{};
    if (!file.open(options->file, &error)) builder::build_fail(error.status, "%s", error.message);
    ordered_json j = engine_json(file);
    if (options->json) std::printf("%s\n", j.dump(2).c_str());
    else print_text(j);
  });
}

}  // namespace edgert::cli
