// edgert conformance DIR... : the ONNX backend node tests, end to end through the real path
// (import, kernel selection, engine file on disk, mmap + verify, dlopen'd plugins, run).
// Each test runs in a forked child with a time limit, so a crashing or hanging kernel is
// reported as that test's failure instead of ending the run.
#include <dirent.h>
#include <onnx/onnx_pb.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "board_profile.h"
#include "build_error.h"
#include "commands.h"
#include "engine_builder.h"
#include "engine_writer.h"
#include "execution_context.h"
#include "loaded_engine.h"
#include "tensor_compare.h"
#include "tensor_io.h"
#include "test_values.h"

namespace edgert::cli {
namespace {

struct Settings {
  double rtol = 1e-3, atol = 1e-7;
  std::string plugin_path;
  config::BoardProfile board;
  int timeout_s = 120;
};

struct TestResult {
  std::string name;
  std::string status;  // pass | fail | unsupported | skipped
  std::string detail;
  std::vector<std::string> ops;
};

bool is_dir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Out of scope, per the spine issue: IO that is not plain tensors (sequences, maps, optionals,
// strings) and training ops. Returns the reason, or "" when in scope.
std::string scope_problem(const onnx::ModelProto& model, std::vector<std::string>& ops) {
  std::set<std::string> seen;
  std::function<void(const onnx::GraphProto&)> collect = [&](const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      seen.insert(n.op_type());
      for (const auto& a : n.attribute())
        if (a.has_g()) collect(a.g());
    }
  };
  collect(model.graph());
  ops.assign(seen.begin(), seen.end());
  for (const auto* list : {&model.graph().input(), &model.graph().output()})
    for (const auto& v : *list) {
      // Sequences and optionals of tensors are in scope; maps and strings are not.
      const onnx::TypeProto* type = &v.type();
      if (type->has_optional_type()) type = &type->optional_type().elem_type();
      if (type->has_sequence_type()) type = &type->sequence_type().elem_type();
      if (type->has_map_type()) return "'" + v.name() + "' is a map";
      if (type->has_tensor_type() && type->tensor_type().elem_type() == onnx::TensorProto::STRING)
        return "'" + v.name() + "' is a string tensor";
    }
  for (const auto& n : model.graph().node()) {
    if (n.domain() == "ai.onnx.preview.training" || n.op_type() == "Gradient")
      return "training op " + n.op_type();
  }
  return "";
}

TestResult run_one(const std::string& dir, const Settings& settings, const std::string& scratch) {
  TestResult r;
  r.name = dir.substr(dir.rfind('/') + 1);
  std::string model_path = dir + "/model.onnx";
  {
    onnx::ModelProto proto;
    std::ifstream in(model_path, std::ios::binary);
    if (!proto.ParseFromIstream(&in)) {
      r.status = "fail";
      r.detail = "cannot parse model.onnx";
      return r;
    }
    std::string problem = scope_problem(proto, r.ops);
    if (!problem.empty()) {
      r.status = "skipped";
      r.detail = "out of scope: " + problem;
      return r;
    }
  }
  std::string engine_path = scratch + "/" + r.name + ".engine";
  try {
    builder::BuildOptions build;
    build.model_path = model_path;
    build.board = settings.board;
    if (!settings.plugin_path.empty()) build.plugin_path = settings.plugin_path.c_str();
    builder::BuildResult built = builder::build_engine(build);
    builder::write_file_atomically(engine_path, built.engine);
  } catch (const builder::BuildError& e) {
    r.status = e.status() == EDGERT_ERR_UNSUPPORTED ? "unsupported" : "fail";
    r.detail = std::string(e.status() == EDGERT_ERR_UNSUPPORTED ? "" : "build: ") + e.what();
    return r;
  }
  edgert_load_options load;
  edgert_load_options_init(&load);
  load.plugin_path = settings.plugin_path.empty() ? nullptr : settings.plugin_path.c_str();
  edgert_error error{};
  auto engine = LoadedEngine::load(engine_path, load, &error);
  unlink(engine_path.c_str());
  if (!engine) {
    r.status = "fail";
    r.detail = std::string("load: ") + error.message;
    return r;
  }
  ExecutionContext context(*engine);
  int sets = 0;
  for (const std::string& set : list_dir(dir)) {
    if (set.rfind("test_data_set_", 0) != 0) continue;
    ++sets;
    std::string set_dir = dir + "/" + set;
    const LoadedGraph& graph = engine->main_graph();
    std::vector<TestValue> inputs;
    for (size_t i = 0; file_exists(set_dir + "/input_" + std::to_string(i) + ".pb"); ++i) {
      const ValueKind kind = i < engine->input_tensors().size() ? graph.tensors[engine->input_tensors()[i]].kind
                                                                : ValueKind::Tensor;
      inputs.push_back(read_test_value(set_dir + "/input_" + std::to_string(i) + ".pb", kind));
    }
    // ONNX stores bfloat16 test data as uint16 (numpy has no bfloat16): same bits, relabel.
    for (size_t i = 0; i < inputs.size() && i < engine->input_tensors().size(); ++i)
      for (HostTensor& t : inputs[i].tensors)
        if (t.dtype == EDGERT_DTYPE_UINT16 && graph.tensors[engine->input_tensors()[i]].dtype == EDGERT_DTYPE_BFLOAT16)
          t.dtype = EDGERT_DTYPE_BFLOAT16;
    std::vector<edgert_tensor> views;
    for (TestValue& v : inputs) views.push_back(v.view());
    if (views.size() != engine->input_names().size()) {
      r.status = "fail";
      r.detail = set + ": " + std::to_string(views.size()) + " input files for " +
                 std::to_string(engine->input_names().size()) + " engine inputs";
      return r;
    }
    if (context.run(views.data(), static_cast<int32_t>(views.size()), &error) != EDGERT_OK) {
      r.status = error.status == EDGERT_ERR_UNSUPPORTED ? "unsupported" : "fail";
      r.detail = set + ": " + error.message;
      return r;
    }
    for (size_t o = 0; file_exists(set_dir + "/output_" + std::to_string(o) + ".pb"); ++o) {
      if (o >= engine->output_names().size()) {
        r.status = "fail";
        r.detail = set + ": reference has more outputs than the engine";
        return r;
      }
      const LoadedTensor& declared = graph.tensors[engine->output_tensors()[o]];
      TestValue expected = read_test_value(set_dir + "/output_" + std::to_string(o) + ".pb", declared.kind);
      for (HostTensor& t : expected.tensors)
        if (t.dtype == EDGERT_DTYPE_UINT16 && declared.dtype == EDGERT_DTYPE_BFLOAT16) t.dtype = EDGERT_DTYPE_BFLOAT16;
      const std::string& name = engine->output_names()[o];
      std::string problem = compare_test_value(context.output(static_cast<int32_t>(o)), expected, name, settings.rtol,
                                               settings.atol);
      if (!problem.empty()) {
        r.status = "fail";
        r.detail = set + ": output " + std::to_string(o) + " '" + name + "': " + problem;
        return r;
      }
    }
  }
  r.status = sets ? "pass" : "fail";
  if (!sets) r.detail = "no test_data_set_* folder";
  return r;
}

// run_one with every error turned into a failed result.
TestResult run_guarded(const std::string& dir, const Settings& settings, const std::string& scratch) {
  try {
    return run_one(dir, settings, scratch);
  } catch (const std::exception& e) {
    TestResult r;
    r.name = dir.substr(dir.rfind('/') + 1);
    r.status = "fail";
    r.detail = e.what();
    return r;
  }
}

// Runs one test in a child process; the child sends its result back as one JSON line.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string dir;
  std::string output;
  std::chrono::steady_clock::time_point started;
};

Child spawn(const std::string& dir, const Settings& settings, const std::string& scratch) {
  int fds[2];
  if (pipe(fds) != 0) builder::build_fail(EDGERT_ERR_IO, "pipe: %s", std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) builder::build_fail(EDGERT_ERR_IO, "fork: %s", std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    TestResult r = run_guarded(dir, settings, scratch);
    nlohmann::json j = {{"test", r.name}, {"status", r.status}, {"detail", r.detail}, {"ops", r.ops}};
    std::string line = j.dump() + "\n";
    ssize_t unused = write(fds[1], line.data(), line.size());
    (void)unused;
    _exit(0);
  }
  close(fds[1]);
  Child c;
  c.pid = pid;
  c.fd = fds[0];
  c.dir = dir;
  c.started = std::chrono::steady_clock::now();
  return c;
}

TestResult reap(Child& c, bool timed_out, int timeout_s) {
  if (timed_out) kill(c.pid, SIGKILL);
  int status = 0;
  waitpid(c.pid, &status, 0);
  char buffer[4096];
  ssize_t n;
  while ((n = read(c.fd, buffer, sizeof buffer)) > 0) c.output.append(buffer, static_cast<size_t>(n));
  close(c.fd);
  TestResult r;
  r.name = c.dir.substr(c.dir.rfind('/') + 1);
  if (timed_out) {
    r.status = "fail";
    r.detail = "timed out after " + std::to_string(timeout_s) + " s";
  } else if (WIFSIGNALED(status) || c.output.empty()) {
    r.status = "fail";
    r.detail = WIFSIGNALED(status) ? std::string("crashed with signal ") + strsignal(WTERMSIG(status))
                                   : "child exited without a result";
  } else {
    auto j = nlohmann::json::parse(c.output, nullptr, false);
    if (j.is_discarded()) {
      r.status = "fail";
      r.detail = "unreadable result";
    } else {
      r.status = j["status"];
      r.detail = j["detail"];
      r.ops = j["ops"].get<std::vector<std::string>>();
    }
  }
  return r;
}

// jobs == 0: every test in this process, one after the other, without the crash and time-limit
// isolation of a child (for emulators that cannot fork, such as qemu-user on some kernels).
std::vector<TestResult> run_all(const std::vector<std::string>& dirs, const Settings& settings, int jobs,
                                const std::string& scratch, bool quiet) {
  std::vector<TestResult> results;
  std::vector<Child> running;
  size_t next = 0;
  auto report = [&](const TestResult& r) {
    if (!quiet || r.status == "fail" || r.status == "unsupported") {
      std::string upper = r.status;
      std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
      std::printf("%-11s %s%s%s\n", upper.c_str(), r.name.c_str(), r.detail.empty() ? "" : ": ", r.detail.c_str());
      std::fflush(stdout);
    }
    results.push_back(r);
  };
  while (jobs == 0 && next < dirs.size()) report(run_guarded(dirs[next++], settings, scratch));
  while (next < dirs.size() || !running.empty()) {
    while (next < dirs.size() && static_cast<int>(running.size()) < jobs) running.push_back(spawn(dirs[next++], settings, scratch));
    std::vector<pollfd> fds;
    for (const Child& c : running) fds.push_back({c.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      bool done = false, timed_out = false;
      if (fds.size() > i && (fds[i].revents & (POLLIN | POLLHUP))) {
        char buffer[4096];
        ssize_t n = read(c.fd, buffer, sizeof buffer);
        if (n > 0) c.output.append(buffer, static_cast<size_t>(n));
        else done = true;
      }
      if (!done && std::chrono::steady_clock::now() - c.started > std::chrono::seconds(settings.timeout_s))
        done = timed_out = true;
      if (done) {
        report(reap(c, timed_out, settings.timeout_s));
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  std::sort(results.begin(), results.end(), [](const TestResult& a, const TestResult& b) { return a.name < b.name; });
  return results;
}

// Why known gaps are gaps, from a file of "PREFIX<tab>WHY" lines ('#' comments): a test whose
// name starts with PREFIX gets WHY before its status detail in the report.
std::vector<std::pair<std::string, std::string>> read_explanations(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> explanations;
  if (path.empty()) return explanations;
  std::ifstream in(path);
  if (!in) builder::build_fail(EDGERT_ERR_IO, "cannot read --explain file '%s'", path.c_str());
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (line.empty() || line[0] == '#') continue;
    if (tab == std::string::npos)
      builder::build_fail(EDGERT_ERR_FORMAT, "'%s': line '%s' is not PREFIX<tab>WHY", path.c_str(), line.c_str());
    explanations.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return explanations;
}

// The Markdown report: `command` is how it was made, `expect_file` the statuses file the test
// suite holds these tests to (empty: none named).
void write_report(const std::string& path, const std::vector<TestResult>& results, const std::string& summary,
                  const std::string& command, const std::string& expect_file,
                  const std::vector<std::pair<std::string, std::string>>& explanations) {
  struct Count {
    int pass = 0, total = 0;
  };
  std::map<std::string, Count> by_op;
  for (const TestResult& r : results) {
    if (r.status == "skipped") continue;
    for (const std::string& op : r.ops) {
      by_op[op].total++;
      if (r.status == "pass") by_op[op].pass++;
    }
  }
  std::ostringstream out;
  out << "# ONNX node-test conformance\n\n"
      << "Generated by `" << command << "` (rtol 1e-3, atol 1e-7).\n\n" << summary << "\n\n";
  if (!expect_file.empty())
    out << "The test suite holds every test to its status in `" << expect_file
        << "` (beside this file; `--expect`, README.md's Conformance section).\n\n";
  out << "## Every test that did not pass\n\n| test | status | reason |\n|---|---|---|\n";
  for (const TestResult& r : results) {
    if (r.status == "pass") continue;
    std::string reason = r.detail;
    for (char& c : reason)
      if (c == '|') c = '/';
    // Paths of this machine's scratch folders say nothing to a reader.
    size_t tmp = reason.find("/tmp/edgert-conformance-");
    if (tmp != std::string::npos) reason = reason.substr(0, tmp) + "<scratch>" + reason.substr(reason.find('/', tmp + 24));
    // Nor do the folders plugins were found in: the file name is kept.
    for (size_t lib; (lib = reason.find("/libedgert_plugin_")) != std::string::npos;) {
      size_t start = reason.find_last_of(" (", lib);
      start = start == std::string::npos ? 0 : start + 1;
      reason.erase(start, lib + 1 - start);
    }
    for (const auto& [prefix, why] : explanations)
      if (r.name.rfind(prefix, 0) == 0) {
        reason = why + " (" + reason + ")";
        break;
      }
    out << "| " << r.name << " | " << r.status << " | " << reason << " |\n";
  }
  out << "\n## Pass rate by op\n\nA test counts for every op its model uses (expanded function tests use several).\n"
      << "Out-of-scope tests (string/sequence/optional IO, training ops) are excluded.\n\n"
      << "| op | passed | in-scope tests | rate |\n|---|---:|---:|---:|\n";
  for (const auto& [op, c] : by_op) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.0f%%", 100.0 * c.pass / c.total);
    out << "| " << op << " | " << c.pass << " | " << c.total << " | " << rate << " |\n";
  }
  write_file_checked(path, out.str());
}

// --expect FILE: every test's status as the suite last agreed it, one `name status` line each
// ('#' starts a comment). Throws BuildError naming the file and line of a malformed entry.
std::map<std::string, std::string> read_expected(const std::string& path) {
  std::ifstream in(path);
  if (!in) builder::build_fail(EDGERT_ERR_IO, "cannot read --expect file '%s'", path.c_str());
  std::map<std::string, std::string> expected;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find(' ');
    std::string name = line.substr(0, space), status = space == std::string::npos ? "" : line.substr(space + 1);
    if (status != "pass" && status != "fail" && status != "unsupported" && status != "skipped")
      builder::build_fail(EDGERT_ERR_FORMAT, "%s:%d: '%s' must be 'TEST STATUS' with STATUS pass, fail, unsupported or "
                          "skipped", path.c_str(), number, line.c_str());
    if (!expected.emplace(name, status).second)
      builder::build_fail(EDGERT_ERR_FORMAT, "%s:%d: test '%s' is listed twice", path.c_str(), number, name.c_str());
  }
  return expected;
}

void write_expected(const std::string& path, const std::vector<TestResult>& results, const std::string& command) {
  std::ostringstream out;
  out << "# The status of every ONNX node test under `edgert conformance` (pass, fail, unsupported, skipped):\n"
      << "# conformance.onnx_node_tests fails when any test's status differs from its line here, a test\n"
      << "# that newly passes included. After a change meant to alter statuses, regenerate with\n"
      << "#   " << command << "\n"
      << "# and commit the file with the change; tests/conformance/RESULTS.md gives the reasons.\n";
  for (const TestResult& r : results) out << r.name << " " << r.status << "\n";
  write_file_checked(path, out.str());
}

// Every test whose status differs from `expected`, printed one a line; returns how many.
// `whole_folders`: a folder of test folders was given, so an expected test that did not run
// is missing from it rather than left out on purpose.
size_t report_differences(const std::map<std::string, std::string>& expected, const std::vector<TestResult>& results,
                          bool whole_folders, const std::string& path) {
  std::vector<std::string> lines;
  std::set<std::string> ran;
  for (const TestResult& r : results) {
    ran.insert(r.name);
    auto it = expected.find(r.name);
    const std::string detail = r.detail.empty() ? "" : ": " + r.detail;
    if (it == expected.end())
      lines.push_back("NEW TEST         " + r.name + ": not in the file, got " + r.status + detail);
    else if (it->second != r.status)
      lines.push_back(std::string(r.status == "pass" ? "NOW PASSES       " : it->second == "pass" ? "NO LONGER PASSES "
                                                                                                 : "CHANGED          ") +
                      r.name + ": expected " + it->second + ", got " + r.status + detail);
  }
  if (whole_folders)
    for (const auto& [name, status] : expected)
      if (!ran.count(name)) lines.push_back("MISSING          " + name + ": expected " + status + ", no such test folder");
  if (lines.empty()) {
    std::printf("every test's status is as expected (%s, %zu tests)\n", path.c_str(), expected.size());
    return 0;
  }
  std::printf("%zu test(s) differ from the expected statuses in %s:\n", lines.size(), path.c_str());
  for (const std::string& line : lines) std::printf("  %s\n", line.c_str());
  return lines.size();
}

}  // namespace

void add_conformance_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> dirs;
    std::string json, report, plugin_path, board = "x86_64-generic", expect, write_expect, explain;
    double min_pass_rate = 0;
    int jobs = -1;
    bool quiet = false;
    Settings settings;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("conformance", "Run ONNX backend node tests (model.onnx + test_data_set_*)");
  cmd->add_option("dirs", options->dirs, "Test folders, or folders of test folders")->required();
  cmd->add_option("--json", options->json, "Write per-test results as JSON");
  cmd->add_option("--report", options->report, "Write a Markdown report: failures, skips, pass rate by op");
  cmd->add_option("--explain", options->explain,
                  "File of 'PREFIX<tab>WHY' lines: the report gives WHY for the failures of tests named PREFIX...");
  cmd->add_option("--rtol", options->settings.rtol, "Relative tolerance")->capture_default_str();
  cmd->add_option("--atol", options->settings.atol, "Absolute tolerance")->capture_default_str();
  cmd->add_option("--timeout", options->settings.timeout_s, "Seconds per test")->capture_default_str();
  cmd->add_option("-j,--jobs", options->jobs,
                  "Tests run at once, each in a child process (default: CPU count); 0: all in this process, in turn");
  cmd->add_option("--min-pass-rate", options->min_pass_rate,
                  "Exit 1 unless passed / in-scope reaches this fraction (0..1)");
  cmd->add_option("--expect", options->expect,
                  "File of 'TEST STATUS' lines: exit 1 naming every test whose status differs (a test that now "
                  "passes too, so the file is kept current)");
  cmd->add_option("--write-expect", options->write_expect, "Write every test's status to FILE in --expect's format");
  cmd->add_option("--plugin-path", options->plugin_path, "Colon-separated plugin directories");
  cmd->add_option("--board", options->board, "Board profile")->capture_default_str();
  cmd->add_flag("-q,--quiet", options->quiet, "Print only failures and the summary (-v: every test again)");
  cmd->callback([options] {
    Settings settings = options->settings;
    settings.plugin_path = options->plugin_path;
    settings.board = config::load_board_profile(config::find_board_profile(options->board));
    std::map<std::string, std::string> expected;
    if (!options->expect.empty()) expected = read_expected(options->expect);
    std::vector<std::string> tests;
    bool whole_folders = false;
    for (const std::string& d : options->dirs) {
      if (file_exists(d + "/model.onnx")) {
        tests.push_back(d);
        continue;
      }
      if (!is_dir(d)) builder::build_fail(EDGERT_ERR_IO, "'%s' is not a test folder", d.c_str());
      whole_folders = true;
      for (const std::string& name : list_dir(d))
        if (file_exists(d + "/" + name + "/model.onnx")) tests.push_back(d + "/" + name);
    }
    char scratch_template[] = "/tmp/edgert-conformance-XXXXXX";
    if (!mkdtemp(scratch_template)) builder::build_fail(EDGERT_ERR_IO, "mkdtemp: %s", std::strerror(errno));
    int jobs = options->jobs >= 0 ? options->jobs : static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    std::vector<TestResult> results = run_all(tests, settings, jobs, scratch_template, options->quiet && !g_verbose);
    rmdir(scratch_template);

    int passed = 0, failed = 0, unsupported = 0, skipped = 0;
    for (const TestResult& r : results) {
      if (r.status == "pass") ++passed;
      else if (r.status == "skipped") ++skipped;
      else if (r.status == "unsupported") ++unsupported;
      else ++failed;
    }
    int in_scope = passed + failed + unsupported;
    double rate = in_scope ? static_cast<double>(passed) / in_scope : 0;
    if (!options->json.empty()) {
      nlohmann::ordered_json j = nlohmann::ordered_json::array();
      for (const TestResult& r : results) j.push_back({{"test", r.name}, {"status", r.status}, {"detail", r.detail}, {"ops", r.ops}});
      write_file_checked(options->json, j.dump(1) + "\n");
    }
    char summary[256];
    std::snprintf(summary, sizeof summary, "in scope: %d of %zu tests; pass rate %.1f%% (%d unsupported, %d wrong or crashed)",
                  in_scope, results.size(), 100 * rate, unsupported, failed);
    if (!options->report.empty()) {
      std::string command = "edgert conformance";
      for (const std::string& d : options->dirs) command += " " + d;
      const std::string& statuses = !options->write_expect.empty() ? options->write_expect : options->expect;
      if (!options->explain.empty()) command += " --explain " + options->explain;
      write_report(options->report, results, summary, command + " --report " + options->report,
                   statuses.empty() ? "" : std::filesystem::path(statuses).filename().string(),
                   read_explanations(options->explain));
    }
    std::printf("%s\n", summary);
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed + unsupported, skipped);
    if (rate < options->min_pass_rate || in_scope == 0) g_exit_status = 1;
    if (!options->write_expect.empty()) {
      std::string command = "edgert conformance";
      for (const std::string& d : options->dirs) command += " " + d;
      write_expected(options->write_expect, results, command + " -q --write-expect " + options->write_expect);
    }
    if (!options->expect.empty() && report_differences(expected, results, whole_folders, options->expect) > 0) {
      std::printf("if the change is meant, regenerate the file (and commit it with the change):\n  edgert conformance");
      for (const std::string& d : options->dirs) std::printf(" %s", d.c_str());
      std::printf(" -q --write-expect %s\n", options->expect.c_str());
      g_exit_status = 1;
    }
  });
}

}  // namespace edgert::cli
