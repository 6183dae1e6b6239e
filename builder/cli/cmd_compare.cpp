// edgert compare MODEL.onnx ENGINE [--inputs DIR] [--reference DIR]: runs the engine and a
// reference (ONNX Runtime through its Node.js runner ort_reference.js, or stored outputs) on the
// same inputs and reports per output: max abs error, relative L2 error, cosine similarity, top-1
// agreement for score vectors. Polygraphy's `run --onnxrt --trt` in spirit. First it checks that
// the engine was built from the model: the engine's input and output names are the model's.
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "build_error.h"
#include "commands.h"
#include "error.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "tensor_compare.h"
#include "engine_inputs.h"
#include "tensor_io.h"

extern char** environ;

namespace edgert::cli {
namespace {

using builder::build_fail;

std::string file_name_for(const std::string& tensor_name) {
  std::string s = tensor_name;
  for (char& c : s)
    if (c == '/') c = '_';
  return s;
}

HostTensor read_named(const std::string& dir, const std::string& name) {
  std::string base = dir + "/" + file_name_for(name);
  if (file_exists(base + ".npy")) return read_tensor_npy(base + ".npy");
  if (file_exists(base + ".pb")) return read_tensor_pb(base + ".pb");
  build_fail(EDGERT_ERR_IO, "no %s.npy or %s.pb in '%s'", file_name_for(name).c_str(), file_name_for(name).c_str(),
             dir.c_str());
}

int run_process(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    build_fail(EDGERT_ERR_IO, "cannot start '%s' (Node.js runs ONNX Runtime's runner; install nodejs, or compare "
               "with stored outputs: --reference DIR): %s", argv[0], std::strerror(errno));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// ONNX Runtime's runner: the one given (--ort-runner, else $EDGERT_ORT_REFERENCE), else where
// the edgert package installs it beside this CLI (<prefix>/share/edgert/ort_reference.js), else
// in the source tree this CLI was built from (a build tree). Fails saying where it looked.
std::string find_ort_runner(const std::string& given) {
  std::vector<std::string> candidates;
  const char* env = std::getenv("EDGERT_ORT_REFERENCE");
  if (!given.empty()) {
    candidates = {given};
  } else if (env && *env) {
    candidates = {env};
  } else {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      exe[n] = '\0';
      candidates.push_back(parent_dir(parent_dir(exe)) + "/share/edgert/ort_reference.js");
    }
    candidates.push_back(EDGERT_DATA_INSTALL_DIR "/ort_reference.js");
    candidates.push_back(EDGERT_SOURCE_DIR "/tests/models/ort_reference.js");
  }
  std::string looked;
  for (const std::string& c : candidates) {
    if (file_exists(c)) return c;
    looked += (looked.empty() ? "" : ", ") + c;
  }
  build_fail(EDGERT_ERR_IO,
             "no ONNX Runtime runner: looked for %s. The edgert package installs it as "
             "%s/ort_reference.js; it runs under Node.js with onnxruntime-node (`npm install onnxruntime-node` "
             "in a folder node searches, e.g. one named in NODE_PATH). Or give stored reference outputs: --reference DIR",
             looked.c_str(), EDGERT_DATA_INSTALL_DIR);
}

std::string bracketed_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return "[" + s + "]";
}

// Fails unless the engine's input and output names are the model's (its graph inputs that are
// not initializers): an engine compared with another model would only report nonsense.
void check_pairing(const std::string& model_path, const LoadedEngine& engine, const std::string& engine_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!in) build_fail(EDGERT_ERR_IO, "cannot open model '%s': %s", model_path.c_str(), std::strerror(errno));
  if (!model.ParseFromIstream(&in) || !model.has_graph())
    build_fail(EDGERT_ERR_FORMAT, "'%s' is not an ONNX model", model_path.c_str());
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs, outputs;
  for (const auto& v : model.graph().input())
    if (!initializers.count(v.name())) inputs.push_back(v.name());
  for (const auto& v : model.graph().output()) outputs.push_back(v.name());
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (sorted(inputs) != sorted(engine.input_names()) || sorted(outputs) != sorted(engine.output_names()))
    build_fail(EDGERT_ERR_INVALID_ARGUMENT,
               "engine '%s' was not built from model '%s': the engine's inputs %s and outputs %s, the model's "
               "inputs %s and outputs %s",
               engine_path.c_str(), model_path.c_str(), bracketed_list(engine.input_names()).c_str(),
               bracketed_list(engine.output_names()).c_str(), bracketed_list(inputs).c_str(),
               bracketed_list(outputs).c_str());
}

// Fraction of rows whose argmax agrees, for [N, C] float score outputs; -1 when not applicable.
double top1_agreement(const HostTensor& a, const HostTensor& b) {
  if (a.shape.size() != 2 || a.shape[1] < 2 || a.shape != b.shape) return -1;
  if (a.dtype != EDGERT_DTYPE_FLOAT32 && a.dtype != EDGERT_DTYPE_FLOAT64) return -1;
  int64_t rows = a.shape[0], cols = a.shape[1], agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t ia = 0, ib = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if (element_as_double(a, r * cols + c) > element_as_double(a, r * cols + ia)) ia = c;
      if (element_as_double(b, r * cols + c) > element_as_double(b, r * cols + ib)) ib = c;
    }
    agree += ia == ib;
  }
  return rows ? static_cast<double>(agree) / rows : -1;
}

}  // namespace

void add_compare_command(CLI::App& app) {
  struct Options {
    std::string model, engine, inputs, reference, runner, save_outputs, ort_optimization;
    EngineLoadFlags load;
    double max_rel_l2 = 1e-4;
    unsigned seed = 1;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("compare", "Compare an engine's outputs with ONNX Runtime's (or stored ones)");
  cmd->add_option("model", options->model, "The ONNX model the engine was built from")->required();
  cmd->add_option("engine", options->engine, "Engine file")->required();
  cmd->add_option("--inputs", options->inputs, "Folder of NAME.npy / NAME.pb inputs (default: seeded random)");
  cmd->add_option("--reference", options->reference, "Folder of stored reference outputs (default: run ONNX Runtime)");
  cmd->add_option("--ort-runner", options->runner,
                  "Node script running ONNX Runtime (default: $EDGERT_ORT_REFERENCE, else the installed "
                  "share/edgert/ort_reference.js, else the source tree's tests/models/ort_reference.js)");
  cmd->add_option("--ort-optimization", options->ort_optimization,
                  "ONNX Runtime's graph optimization level: disabled runs a Q/DQ model's nodes as written "
                  "(default: all)")
      ->check(CLI::IsMember({"disabled", "basic", "extended", "all"}));
  cmd->add_option("--save-outputs", options->save_outputs, "Also write edgert's outputs here as .npy");
  cmd->add_option("--max-rel-l2", options->max_rel_l2, "Fail when an output's relative L2 error exceeds this")->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of the random inputs")->capture_default_str();
  options->load.add_to(cmd);
  cmd->callback([options] {
    auto engine = options->load.load(options->engine);
    check_pairing(options->model, *engine, options->engine);
    const std::string runner = options->reference.empty() ? find_ort_runner(options->runner) : "";
    edgert_error error{};

    char scratch_template[] = "/tmp/edgert-compare-XXXXXX";
    if (!mkdtemp(scratch_template)) build_fail(EDGERT_ERR_IO, "mkdtemp: %s", std::strerror(errno));
    std::string scratch = scratch_template;
    std::string input_dir = options->inputs.empty() ? scratch + "/inputs" : options->inputs;
    std::vector<HostTensor> inputs;
    std::mt19937 rng(options->seed);
    if (options->inputs.empty()) mkdir(input_dir.c_str(), 0755);
    for (size_t i = 0; i < engine->input_names().size(); ++i) {
      if (options->inputs.empty()) {
        inputs.push_back(synthetic_input(*engine, i, rng));
        write_tensor_npy(input_dir + "/" + file_name_for(inputs.back().name) + ".npy", inputs.back());
      } else {
        inputs.push_back(read_named(input_dir, engine->input_names()[i]));
      }
    }
    std::vector<edgert_tensor> views;
    for (const HostTensor& t : inputs) views.push_back(t.view());
    ExecutionContext context(*engine);
    if (context.run(views.data(), static_cast<int32_t>(views.size()), &error) != EDGERT_OK)
      build_fail(error.status, "edgert run failed: %s", error.message);

    std::string reference_dir = options->reference;
    if (reference_dir.empty()) {
      reference_dir = scratch + "/reference";
      mkdir(reference_dir.c_str(), 0755);
      std::vector<std::string> command = {"node", runner, options->model, input_dir, reference_dir};
      if (!options->ort_optimization.empty()) {
        command.push_back("--optimization");
        command.push_back(options->ort_optimization);
      }
      if (options->load.threads > 0) command.insert(command.end(), {"--threads", std::to_string(options->load.threads)});
      int rc = run_process(command);
      if (rc != 0) build_fail(EDGERT_ERR_IO, "the ONNX Runtime reference (node %s) failed with exit code %d", runner.c_str(), rc);
    }
    if (!options->save_outputs.empty()) mkdir(options->save_outputs.c_str(), 0755);

    bool all_ok = true;
    std::printf("%-28s %-16s %12s %12s %10s %8s\n", "output", "shape", "max_abs_err", "rel_l2_err", "cosine", "top1");
    for (size_t o = 0; o < engine->output_names().size(); ++o) {
      const std::string& name = engine->output_names()[o];
      HostTensor actual = HostTensor::from(context.output(static_cast<int32_t>(o)), name);
      if (!options->save_outputs.empty()) write_tensor_npy(options->save_outputs + "/" + file_name_for(name) + ".npy", actual);
      HostTensor expected = read_named(reference_dir, name);
      Comparison c = compare_tensors(actual, expected, 0, 0);
      bool shape_ok = actual.shape == expected.shape && actual.dtype == expected.dtype;
      double top1 = top1_agreement(actual, expected);
      char top1_text[16] = "-";
      if (top1 >= 0) std::snprintf(top1_text, sizeof top1_text, "%.3f", top1);
      if (!shape_ok) {
        std::printf("%-28s %s\n", name.c_str(), c.problem.c_str());
        all_ok = false;
        continue;
      }
      bool ok = c.relative_l2_error <= options->max_rel_l2 && !std::isnan(c.relative_l2_error);
      all_ok = all_ok && ok;
      std::printf("%-28s %-16s %12.3g %12.3g %10.6f %8s%s\n", name.c_str(), shape_string(actual.shape).c_str(),
                  c.max_abs_error, c.relative_l2_error, c.cosine_similarity, top1_text, ok ? "" : "  EXCEEDS");
    }
    std::string cleanup = "rm -rf '" + scratch + "'";
    if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "edgert: could not remove %s\n", scratch.c_str());
    std::printf("%s: relative L2 error %s %.1e on every output\n", all_ok ? "PASS" : "FAIL",
                all_ok ? "within" : "not within", options->max_rel_l2);
    if (!all_ok) g_exit_status = 1;
  });
}

}  // namespace edgert::cli
