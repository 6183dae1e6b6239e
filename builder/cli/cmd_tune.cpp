// edgert tune --host USER@BOARD MODEL.onnx --board PROFILE --timing-cache FILE: times the
// model's tactics on the board with the board's own edgert and merges the records into FILE
// (board_tuning.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "board_catalog.h"
#include "board_tuning.h"
#include "build_error.h"
#include "commands.h"
#include "plugin_loader.h"
#include "timing_cache.h"

namespace edgert::cli {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string last_line(const std::string& text) {
  std::string t = trim(text);
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `edgert --version` on the board: reachable, has edgert, the same version as this one.
std::string check_board_edgert(const BoardTuning& r) {
  const std::string& host = r.board.host;
  std::string out, err;
  int status = r.board.run({r.remote_edgert, "--version"}, &out, &err);
  if (status == kCommandNotFound && err.find("edgert: cannot run " + r.board.ssh) != std::string::npos)
    builder::build_fail(EDGERT_ERR_IO, "cannot run '%s' here: %s (install openssh-client)", r.board.ssh.c_str(),
                        last_line(err).c_str());
  if (status == kSshFailed)
    builder::build_fail(EDGERT_ERR_IO,
                        "cannot reach %s over ssh: %s; check the host name, -p PORT, -i KEY and that sshd runs there "
                        "(ssh runs with BatchMode=yes: no password prompts)",
                        host.c_str(), err.empty() ? "ssh exited 255" : last_line(err).c_str());
  if (status == kCommandNotFound)
    builder::build_fail(EDGERT_ERR_IO,
                        "%s has no '%s' on the PATH of an ssh command (%s); install the edgert package of version "
                        "%s there, or name its edgert with --remote-edgert PATH",
                        host.c_str(), r.remote_edgert.c_str(), last_line(err).c_str(), EDGERT_VERSION);
  if (status != 0)
    builder::build_fail(EDGERT_ERR_IO, "'%s --version' on %s failed (exit %d): %s", r.remote_edgert.c_str(),
                        host.c_str(), status, last_line(err + out).c_str());
  const std::string theirs = trim(out), ours = std::string("edgert ") + EDGERT_VERSION;
  if (theirs != ours)
    builder::build_fail(EDGERT_ERR_VERSION,
                        "%s runs %s, this is %s: timing records are keyed by plugin version, so the board's would "
                        "not match what this edgert looks up; install %s on the board (or tune and build with the "
                        "same version on both)",
                        host.c_str(), theirs.empty() ? "an edgert that prints no version" : theirs.c_str(),
                        ours.c_str(), ours.c_str());
  return theirs;
}

// `edgert boards --json` on the board: it must be the profile's architecture with its CPU
// features, and its plugins must be the versions of this machine's.
nlohmann::json check_board_machine(const BoardTuning& r) {
  const std::string& host = r.board.host;
  std::string out, err;
  int status = r.board.run({r.remote_edgert, "boards", "--json"}, &out, &err);
  nlohmann::json j = status == 0 ? nlohmann::json::parse(out, nullptr, false) : nlohmann::json();
  if (status != 0 || !j.is_object() || !j.contains("machine"))
    builder::build_fail(EDGERT_ERR_IO, "'%s boards --json' on %s failed (exit %d): %s", r.remote_edgert.c_str(),
                        host.c_str(), status, last_line(err + out).c_str());
  const nlohmann::json& m = j["machine"];
  const std::string arch = m.value("architecture", "");
  const std::string native = m.contains("native") ? m["native"].value("name", "") : "";
  if (arch != r.profile.hardware.architecture)
    builder::build_fail(EDGERT_ERR_BOARD,
                        "%s is %s, but board profile '%s' is %s: the board cannot time tactics for it (on %s, "
                        "--board native is '%s')",
                        host.c_str(), arch.c_str(), r.profile.name.c_str(), r.profile.hardware.architecture.c_str(),
                        host.c_str(), native.c_str());
  std::vector<std::string> features = m.value("cpu_features", std::vector<std::string>());
  for (const std::string& f : r.profile.hardware.cpu_features)
    if (std::find(features.begin(), features.end(), f) == features.end())
      builder::build_fail(EDGERT_ERR_BOARD,
                          "%s lacks CPU feature '%s', which board profile '%s' lists: it cannot time tactics for it "
                          "(is it the right profile? on %s, --board native is '%s')",
                          host.c_str(), f.c_str(), r.profile.name.c_str(), host.c_str(), native.c_str());

  edgert_error error{};
  std::vector<const LoadedPlugin*> ours =
      load_all_plugins(plugin_search_path(r.plugin_path.empty() ? nullptr : r.plugin_path.c_str()), &error);
  for (const LoadedPlugin* p : ours) {
    const std::string version = p->table->version ? p->table->version : "";
    for (const auto& theirs : m.value("plugins", nlohmann::json::array())) {
      if (theirs.value("name", "") != p->name) continue;
      if (theirs.value("version", "") != version)
        builder::build_fail(EDGERT_ERR_VERSION,
                            "%s's plugin '%s' is version %s, this machine's is %s: timing records are keyed by "
                            "plugin version, so the board's would not match what a build here looks up; install "
                            "the same packages on both",
                            host.c_str(), p->name.c_str(), theirs.value("version", "").c_str(), version.c_str());
    }
  }
  return m;
}

// Removes the board's scratch directory however tune_on_board leaves.
struct RemoteScratch {
  const RemoteShell& board;
  std::string dir;
  ~RemoteScratch() {
    if (dir.empty()) return;
    std::string ignored_out, ignored_err;
    board.run({"rm", "-rf", dir}, &ignored_out, &ignored_err);
  }
};

}  // namespace

TemporaryFile::~TemporaryFile() {
  if (!path_.empty()) unlink(path_.c_str());
}

const std::string& TemporaryFile::make(const char* path_template) {
  std::string name = path_template;
  int fd = mkstemp(name.data());
  if (fd < 0) builder::build_fail(EDGERT_ERR_IO, "cannot make a temporary file %s: %s", path_template, std::strerror(errno));
  close(fd);
  if (!path_.empty()) unlink(path_.c_str());
  path_ = name;
  return path_;
}

BoardTuningResult tune_on_board(const BoardTuning& r) {
  const std::string& host = r.board.host;
  if (r.timing_cache.empty()) builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "tuning on %s needs a timing cache file", host.c_str());
  if (access(r.model.c_str(), R_OK) != 0)
    builder::build_fail(EDGERT_ERR_IO, "cannot read model '%s'", r.model.c_str());
  if (access(r.profile.source_path.c_str(), R_OK) != 0)
    builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                        "board profile '%s' is not a file (%s): tuning on a board needs the profile it is built for, by "
                        "name or path, not native",
                        r.profile.name.c_str(), r.profile.source_path.c_str());
  // Opened (and created) first: a cache that cannot be written fails before the board works.
  builder::TimingCache cache = builder::TimingCache::open(r.timing_cache);
  if (cache.read_only())
    builder::build_fail(EDGERT_ERR_IO, "timing cache '%s' is read-only: the board's records could not be merged",
                        r.timing_cache.c_str());

  BoardTuningResult result;
  result.threads = r.threads > 0 ? r.threads : r.profile.cpu_cores;
  result.board_edgert = check_board_edgert(r);
  nlohmann::json machine = check_board_machine(r);
  std::printf("[1/4] %s: %s, %s, %d CPUs\n", host.c_str(), result.board_edgert.c_str(),
              machine.value("architecture", "?").c_str(), machine.value("cpu_count", 0));

  std::string out, err;
  if (r.board.run({"mktemp", "-d", "-t", "edgert-tune.XXXXXX"}, &out, &err) != 0 || trim(out).empty())
    builder::build_fail(EDGERT_ERR_IO, "cannot make a scratch directory on %s: %s", host.c_str(), last_line(err).c_str());
  RemoteScratch scratch{r.board, trim(out)};
  const std::string remote_model = scratch.dir + "/" + base_name(r.model);
  const std::string remote_profile = scratch.dir + "/" + r.profile.name + ".yaml";
  const std::string remote_cache = scratch.dir + "/timing.cache";
  const std::string remote_engine = scratch.dir + "/board.engine";
  std::printf("[2/4] copying %s and board profile %s to %s:%s\n", r.model.c_str(), r.profile.name.c_str(), host.c_str(),
              scratch.dir.c_str());
  for (const auto& [local, remote] : {std::pair{r.model, remote_model}, std::pair{r.profile.source_path, remote_profile}})
    if (r.board.copy_to(local, remote, &err) != 0)
      builder::build_fail(EDGERT_ERR_IO, "scp of %s to %s failed: %s", local.c_str(), host.c_str(), last_line(err).c_str());

  std::printf("[3/4] timing tactics on %s for board %s at %d thread(s): %s build there\n", host.c_str(),
              r.profile.name.c_str(), result.threads, r.remote_edgert.c_str());
  std::fflush(stdout);
  int status = r.board.run({r.remote_edgert, "build", remote_model, "--board", remote_profile, "--timing-cache",
                            remote_cache, "--threads", std::to_string(result.threads), "--no-self-test", "-o",
                            remote_engine});
  if (status != 0)
    builder::build_fail(EDGERT_ERR_IO, "the build on %s failed (exit %d); its messages are above", host.c_str(), status);

  TemporaryFile board_cache;
  const std::string board_cache_path = board_cache.make("/tmp/edgert-tune-XXXXXX");
  if (r.board.copy_from(remote_cache, board_cache_path, &err) != 0)
    builder::build_fail(EDGERT_ERR_IO, "scp of %s:%s back failed: %s", host.c_str(), remote_cache.c_str(),
                        last_line(err).c_str());
  if (!r.board_engine.empty() && r.board.copy_from(remote_engine, r.board_engine, &err) != 0)
    builder::build_fail(EDGERT_ERR_IO, "scp of %s:%s back failed: %s", host.c_str(), remote_engine.c_str(),
                        last_line(err).c_str());

  const std::string fingerprint = r.profile.fingerprint();
  for (const auto& [key, record] : builder::TimingCache::open(board_cache_path).entries()) {
    if (key.board != fingerprint || key.threads != result.threads) continue;  // the board's file holds only these
    if (!cache.find(key)) ++result.new_records;
    cache.put(key, record);
    ++result.records;
  }
  cache.save();
  std::printf("[4/4] merged %zu record(s) from %s (%zu new) for board %s (fingerprint %s, %d thread(s)) into %s\n",
              result.records, host.c_str(), result.new_records, r.profile.name.c_str(), fingerprint.c_str(),
              result.threads, r.timing_cache.c_str());
  if (!r.board_engine.empty()) std::printf("the engine %s built: %s\n", host.c_str(), r.board_engine.c_str());
  return result;
}

void add_tune_command(CLI::App& app) {
  struct Options {
    BoardTuning tuning;
    std::string board;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Time a model's tactics on the board itself over ssh and merge the records into a timing cache");
  cmd->add_option("model", o->tuning.model, "ONNX model file")->required();
  cmd->add_option("--host", o->tuning.board.host, "USER@BOARD (anything ssh accepts, ~/.ssh/config aliases too)")
      ->required();
  cmd->add_option("--board", o->board, "The board's profile: a name or a YAML path (edgert boards lists them)")
      ->required();
  cmd->add_option("--timing-cache,--timingCacheFile", o->tuning.timing_cache,
                  "Timing cache here to merge the board's records into (created if missing)")
      ->required();
  cmd->add_option("--threads", o->tuning.threads,
                  "Kernel threads to time with on the board (0: the profile's cpu.cores); part of the cache key")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("-p,--port", o->tuning.board.port, "ssh port");
  cmd->add_option("-i,--identity", o->tuning.board.identity, "ssh identity file");
  cmd->add_option("-o,--ssh-option", o->tuning.board.options, "Extra ssh -o option (repeatable)")
      ->allow_extra_args(false);  // one value per -o: a positional after it is not swallowed
  cmd->add_option("--remote-edgert", o->tuning.remote_edgert, "edgert on the board")->capture_default_str();
  cmd->add_option("--board-engine", o->tuning.board_engine, "Also bring back the engine the board built here");
  cmd->add_option("--plugin-path", o->tuning.plugin_path, "Plugins here (their versions must be the board's)");
  cmd->callback([o] {
    if (o->board == "native")
      builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT,
                          "--board native means this machine; name the board's profile (edgert boards lists them; on "
                          "the board, edgert boards says which one native picks there)");
    o->tuning.profile = config::resolve_board(o->board).profile;
    tune_on_board(o->tuning);
  });
}

}  // namespace edgert::cli
