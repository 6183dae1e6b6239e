#include "onnx_inspect.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "build_error.h"
#include "error.h"
#include "kernel_selection.h"
#include "node_view.h"
#include "onnx_import.h"
#include "plugin_loader.h"

namespace edgert::cli {
namespace {

using nlohmann::ordered_json;
using builder::Graph;
using builder::Node;
using builder::Value;

std::string op_name(const Node& node) { return (node.domain.empty() ? "" : node.domain + ".") + node.op_type; }

ordered_json value_json(const Value& v) {
  ordered_json shape = ordered_json::array();
  for (const builder::Dim& d : v.shape) {
    if (d.value >= 0) shape.push_back(d.value);
    else shape.push_back(d.name.empty() ? "?" : d.name);
  }
  return {{"name", v.name}, {"dtype", dtype_name(v.dtype)}, {"shape", v.rank_known ? shape : ordered_json(nullptr)}};
}

// Why no plugin took `node`: a kernel for the op that declined it, or none at all.
std::string unsupported_reason(const Node& node, const std::vector<const LoadedPlugin*>& plugins) {
  std::string declined;
  for (const LoadedPlugin* p : plugins)
    for (int32_t k = 0; k < p->table->num_kernels; ++k) {
      const edgert_kernel& kernel = p->table->kernels[k];
      if (std::strcmp(kernel.op_type, node.op_type.c_str()) == 0)
        declined += (declined.empty() ? "" : ", ") + p->name + "/" + kernel.name;
    }
  if (!declined.empty())
    return "kernel " + declined + " declines these inputs or attributes (dtype, rank or an attribute it lacks)";
  std::string searched;
  for (const LoadedPlugin* p : plugins) searched += (searched.empty() ? "" : ", ") + p->name;
  return "no plugin has a kernel for " + op_name(node) + " (searched: " + (searched.empty() ? "none" : searched) + ")";
}

// select_kernels without stopping at the first node no plugin takes: every node gets a status.
// Main-graph shapes are inferred as the build infers them, so later nodes see real inputs.
ordered_json node_support(builder::Model& model, const std::vector<const LoadedPlugin*>& plugins) {
  ordered_json nodes = ordered_json::array();
  for (size_t g = 0; g < model.graphs.size(); ++g) {
    Graph& graph = model.graphs[g];
    for (Node& node : graph.nodes) {
      ordered_json n = {{"graph", g}, {"name", node.name}, {"op", op_name(node)}, {"status", "supported"},
                        {"plugin", nullptr}, {"kernel", nullptr}, {"reason", nullptr}};
      if (const char* builtin = builtin_kernel(node)) {
        n["status"] = "builtin";
        n["plugin"] = builder::kBuiltinPluginName;
        n["kernel"] = builtin;
        nodes.push_back(n);
        continue;
      }
      const LoadedPlugin* plugin = nullptr;
      const edgert_kernel* kernel = builder::find_kernel(graph, node, plugins, &plugin);
      if (!kernel) {
        n["status"] = "unsupported";
        n["reason"] = unsupported_reason(node, plugins);
        nodes.push_back(n);
        continue;
      }
      n["plugin"] = plugin->name;
      n["kernel"] = kernel->name;
      if (plugin != plugins.front()) {
        n["status"] = "fallback";
        n["reason"] = plugins.front()->name + " (preferred on this machine) has no kernel that takes it";
      }
      // The kernel's first-listed tactic, as an untuned build takes: prepare sizes outputs for it.
      node.tactic = 0;
      if (kernel->tactics) {
        builder::NodeView view(graph, node);
        edgert_tactic first{};
        if (kernel->tactics(kernel, view.node(), view.inputs(), &first, 1) > 0) node.tactic = first.id;
      }
      if (g == 0) {
        try {
          builder::infer_node_outputs(graph, node, *plugin, *kernel);
        } catch (const builder::BuildError& e) {
          n["status"] = "rejected";
          n["reason"] = e.what();
        }
      }
      nodes.push_back(n);
    }
  }
  return nodes;
}

std::string dims_text(const ordered_json& t) {
  if (t["shape"].is_null()) return "[?]";
  std::string s = "[";
  for (size_t i = 0; i < t["shape"].size(); ++i) {
    const auto& d = t["shape"][i];
    s += (i ? "x" : "") + (d.is_string() ? d.get<std::string>() : std::to_string(d.get<int64_t>()));
  }
  return s + "]";
}

std::string taken_by(const ordered_json& node) {
  return node["plugin"].is_null() ? std::string("-")
                                  : node["plugin"].get<std::string>() + "/" + node["kernel"].get<std::string>();
}

}  // namespace

bool looks_like_onnx_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof head);
  if (in.gcount() == 8 && std::memcmp(head + 4, "EDGT", 4) == 0) return false;
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) return true;
  in.clear();
  in.seekg(0);
  onnx::ModelProto proto;
  return in && proto.ParseFromIstream(&in) && proto.has_graph() && proto.opset_import_size() > 0;
}

ordered_json inspect_onnx_model(const std::string& path, const std::string& plugin_path) {
  builder::Model model = builder::import_onnx(path);

  // The plugins a build would use, in the build's order (engine_builder.cpp): those that can
  // run here (score > 0), best score first.
  std::vector<std::string> search_path = plugin_search_path(plugin_path.empty() ? nullptr : plugin_path.c_str());
  edgert_error error{};
  std::vector<const LoadedPlugin*> loaded = load_all_plugins(search_path, &error);
  if (loaded.empty()) {
    std::string dirs;
    for (const std::string& d : search_path) dirs += (dirs.empty() ? "" : ", ") + d;
    builder::build_fail(EDGERT_ERR_PLUGIN, "no usable plugin found in %s%s%s (--plugin-path names others)",
                        dirs.c_str(), error.message[0] ? ": " : "", error.message);
  }
  auto score = [](const LoadedPlugin* p) { return p->table->score ? p->table->score() : 0; };
  std::vector<const LoadedPlugin*> plugins;
  for (const LoadedPlugin* p : loaded)
    if (!p->table->score || score(p) > 0) plugins.push_back(p);
  std::stable_sort(plugins.begin(), plugins.end(),
                   [&](const LoadedPlugin* a, const LoadedPlugin* b) { return score(a) > score(b); });

  // IO before selection: the shapes as the model declares them, dynamic dimensions by name.
  const Graph& main = model.graphs[0];
  ordered_json inputs = ordered_json::array(), outputs = ordered_json::array();
  for (int32_t t : main.inputs) inputs.push_back(value_json(main.values[t]));
  for (int32_t t : main.outputs) outputs.push_back(value_json(main.values[t]));
  size_t weights = 0, weight_bytes = 0;
  for (const Graph& g : model.graphs)
    for (const Value& v : g.values)
      if (v.is_constant()) {
        ++weights;
        weight_bytes += v.data->size();
      }

  ordered_json nodes = plugins.empty() ? ordered_json::array() : node_support(model, plugins);

  struct OpCount {
    size_t count = 0, not_taken = 0;
    std::set<std::string> kernels;
  };
  std::map<std::string, OpCount> by_op;
  std::map<std::string, size_t> by_status;
  std::set<std::string> unsupported_ops;
  for (const auto& n : nodes) {
    OpCount& c = by_op[n["op"].get<std::string>()];
    ++c.count;
    const std::string status = n["status"];
    ++by_status[status];
    if (status == "unsupported" || status == "rejected") {
      ++c.not_taken;
      unsupported_ops.insert(n["op"].get<std::string>());
    }
    if (!n["plugin"].is_null()) c.kernels.insert(taken_by(n));
  }
  std::vector<std::pair<std::string, OpCount>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.count > b.second.count; });

  ordered_json j;
  j["file"] = path;
  std::ifstream size_probe(path, std::ios::binary | std::ios::ate);
  j["file_bytes"] = static_cast<uint64_t>(size_probe.tellg());
  j["format"] = "onnx";
  j["producer"] = model.producer;
  j["opsets"] = ordered_json::object();
  for (const auto& [domain, version] : model.opsets) j["opsets"][domain.empty() ? "ai.onnx" : domain] = version;
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["plugins"] = ordered_json::array();
  for (const LoadedPlugin* p : loaded) {
    bool usable = std::find(plugins.begin(), plugins.end(), p) != plugins.end();
    j["plugins"].push_back({{"name", p->name}, {"version", p->table->version ? p->table->version : ""},
                            {"abi_version", p->table->abi_version}, {"path", p->path}, {"score", score(p)},
                            {"usable", usable}});
  }
  j["ops"] = ordered_json::array();
  for (const auto& [op, c] : ops)
    j["ops"].push_back({{"op", op}, {"count", c.count}, {"kernels", c.kernels}, {"not_taken", c.not_taken}});
  j["nodes"] = nodes;
  j["unsupported_ops"] = unsupported_ops;
  j["totals"] = {{"graphs", model.graphs.size()},
                 {"nodes", nodes.size()},
                 {"weights", weights},
                 {"weight_bytes", weight_bytes},
                 {"supported", by_status["supported"]},
                 {"builtin", by_status["builtin"]},
                 {"fallback", by_status["fallback"]},
                 {"unsupported", by_status["unsupported"]},
                 {"rejected", by_status["rejected"]}};
  j["buildable"] = by_status["unsupported"] == 0 && by_status["rejected"] == 0;
  return j;
}

void print_onnx_model(const ordered_json& j, bool every_node) {
  std::string opsets;
  for (const auto& [domain, version] : j["opsets"].items())
    opsets += (opsets.empty() ? "" : ", ") + domain + " " + std::to_string(version.get<int64_t>());
  std::printf("model %s (%llu bytes, ONNX%s%s; opsets %s)\n", j["file"].get<std::string>().c_str(),
              static_cast<unsigned long long>(j["file_bytes"].get<uint64_t>()),
              j["producer"].get<std::string>().empty() ? "" : " from ", j["producer"].get<std::string>().c_str(),
              opsets.c_str());
  for (const auto& t : j["inputs"])
    std::printf("input  %s %s %s\n", t["name"].get<std::string>().c_str(), t["dtype"].get<std::string>().c_str(),
                dims_text(t).c_str());
  for (const auto& t : j["outputs"])
    std::printf("output %s %s %s\n", t["name"].get<std::string>().c_str(), t["dtype"].get<std::string>().c_str(),
                dims_text(t).c_str());
  for (const auto& p : j["plugins"])
    std::printf("plugin %s %s (ABI %u, score %d%s): %s\n", p["name"].get<std::string>().c_str(),
                p["version"].get<std::string>().c_str(), p["abi_version"].get<unsigned>(), p["score"].get<int>(),
                p["usable"].get<bool>() ? "" : ", cannot run here", p["path"].get<std::string>().c_str());
  const auto& totals = j["totals"];
  std::printf("%zu nodes in %zu graph(s), %zu weights (%zu bytes)\n", totals["nodes"].get<size_t>(),
              totals["graphs"].get<size_t>(), totals["weights"].get<size_t>(), totals["weight_bytes"].get<size_t>());
  std::printf("%-28s %6s  %s\n", "op", "count", "taken by");
  for (const auto& op : j["ops"]) {
    std::string kernels;
    for (const auto& k : op["kernels"]) kernels += (kernels.empty() ? "" : ", ") + k.get<std::string>();
    size_t not_taken = op["not_taken"].get<size_t>();
    if (not_taken) kernels += (kernels.empty() ? "" : "; ") + std::string("NOT SUPPORTED (") + std::to_string(not_taken) + ")";
    std::printf("%-28s %6zu  %s\n", op["op"].get<std::string>().c_str(), op["count"].get<size_t>(), kernels.c_str());
  }
  for (const auto& n : j["nodes"]) {
    const std::string status = n["status"];
    if (!every_node && (status == "supported" || status == "builtin")) continue;
    // "cpu/ref-relu", "fallback: cpu/ref-relu (why)", "unsupported: why"
    std::string what = status == "supported" || status == "builtin" ? "" : status + ": ";
    if (!n["plugin"].is_null()) what += taken_by(n);
    if (!n["reason"].is_null())
      what += n["plugin"].is_null() ? n["reason"].get<std::string>() : " (" + n["reason"].get<std::string>() + ")";
    std::printf("  %-9s %-32s %-20s %s\n", ("graph " + std::to_string(n["graph"].get<int>())).c_str(),
                n["name"].get<std::string>().c_str(), n["op"].get<std::string>().c_str(), what.c_str());
  }
  std::printf("kernels: %zu of %zu nodes supported, %zu builtin, %zu by a fallback plugin, %zu unsupported, %zu rejected\n",
              totals["supported"].get<size_t>(), totals["nodes"].get<size_t>(), totals["builtin"].get<size_t>(),
              totals["fallback"].get<size_t>(), totals["unsupported"].get<size_t>(), totals["rejected"].get<size_t>());
  if (j["buildable"].get<bool>()) {
    std::printf("edgert build would find a kernel for every node\n");
  } else {
    std::string ops;
    for (const auto& op : j["unsupported_ops"]) ops += (ops.empty() ? "" : ", ") + op.get<std::string>();
    std::printf("edgert build would fail: no kernel for %s\n", ops.c_str());
  }
}

}  // namespace edgert::cli
