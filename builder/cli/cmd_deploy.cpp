// edgert deploy --host USER@BOARD ENGINE --pipeline P: copies an engine to a board with the
// user's own OpenSSH (keys, ~/.ssh/config, agent) and has the board's edgertd swap to it.
// Idempotent by SHA-256: an engine the board already has is not copied again, and one already
// running in the pipeline is not swapped again.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "build_error.h"
#include "commands.h"
#include "engine_signing.h"
#include "remote_shell.h"

namespace edgert::cli {
namespace {

struct DeployOptions {
  RemoteShell board;
  std::string engine, pipeline, staging = "/var/lib/edgert/staging", edgertctl = "edgertctl", socket;
};

std::vector<std::string> edgertctl(const DeployOptions& o, std::vector<std::string> args) {
  std::vector<std::string> argv = {o.edgertctl};
  if (!o.socket.empty()) argv.insert(argv.end(), {"--socket", o.socket});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

nlohmann::json remote_json(const DeployOptions& o, std::vector<std::string> args, const char* what) {
  std::string out;
  args.insert(args.begin(), "--json");
  int status = o.board.run(edgertctl(o, args), &out);
  if (status != 0)
    builder::build_fail(EDGERT_ERR_IO, "%s on %s failed (exit %d): is edgertd running there and may %s use it?", what,
                        o.board.host.c_str(), status, o.board.host.c_str());
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded()) builder::build_fail(EDGERT_ERR_IO, "%s on %s: unreadable answer: %s", what, o.board.host.c_str(), out.c_str());
  return j;
}

std::string active_engine(const nlohmann::json& pipelines, const std::string& name) {
  for (const auto& p : pipelines)
    if (p.value("name", "") == name) return p.value("engine", "");
  builder::build_fail(EDGERT_ERR_INVALID_ARGUMENT, "the board has no pipeline named '%s'", name.c_str());
}

}  // namespace

void add_deploy_command(CLI::App& app) {
  auto o = std::make_shared<DeployOptions>();
  CLI::App* cmd = app.add_subcommand("deploy", "Copy an engine to a board over ssh and hot-swap a pipeline to it");
  cmd->add_option("engine", o->engine, "Engine file")->required();
  cmd->add_option("--host", o->board.host, "USER@BOARD (anything ssh accepts, ~/.ssh/config aliases too)")->required();
  cmd->add_option("--pipeline", o->pipeline, "Pipeline to swap")->required();
  cmd->add_option("-p,--port", o->board.port, "ssh port");
  cmd->add_option("-i,--identity", o->board.identity, "ssh identity file");
  cmd->add_option("-o,--ssh-option", o->board.options, "Extra ssh -o option (repeatable)")
      ->allow_extra_args(false);  // one value per -o: a positional after it is not swallowed
  cmd->add_option("--staging", o->staging, "Directory on the board the file is copied into")->capture_default_str();
  cmd->add_option("--edgertctl", o->edgertctl, "edgertctl on the board")->capture_default_str();
  cmd->add_option("--socket", o->socket, "edgertd's control socket on the board (default: edgertctl's)");
  cmd->callback([o] {
    std::string sha = signing::sha256_file(o->engine);
    std::printf("[1/5] %s: sha256 %s\n", o->engine.c_str(), sha.c_str());
    nlohmann::json pipelines = remote_json(*o, {"pipelines"}, "edgertctl pipelines");
    if (active_engine(pipelines, o->pipeline) == sha) {
      std::printf("[2/5] %s: pipeline %s already runs %s; nothing to do\n", o->board.host.c_str(), o->pipeline.c_str(),
                  sha.substr(0, 12).c_str());
      std::printf("state: pipeline %s on %s runs engine %s\n", o->pipeline.c_str(), o->board.host.c_str(), sha.c_str());
      return;
    }
    bool installed = false;
    for (const auto& e : remote_json(*o, {"engines"}, "edgertctl engines"))
      if (e.value("sha256", "") == sha) installed = true;
    int status = 0;
    if (installed) {
      std::printf("[2/5] %s already has engine %s in its store; not copying\n", o->board.host.c_str(), sha.substr(0, 12).c_str());
      std::printf("[3/5] swapping pipeline %s to %s\n", o->pipeline.c_str(), sha.substr(0, 12).c_str());
      status = o->board.run(edgertctl(*o, {"swap", o->pipeline, sha}));
    } else {
      std::string staged = o->staging + "/" + sha + ".engine";
      std::printf("[2/5] copying to %s:%s\n", o->board.host.c_str(), staged.c_str());
      if (o->board.run({"mkdir", "-p", o->staging}, nullptr) != 0)
        builder::build_fail(EDGERT_ERR_IO, "cannot create %s on %s", o->staging.c_str(), o->board.host.c_str());
      if (o->board.copy_to(o->engine, staged) != 0) builder::build_fail(EDGERT_ERR_IO, "scp to %s failed", o->board.host.c_str());
      std::printf("[3/5] installing, verifying and swapping pipeline %s\n", o->pipeline.c_str());
      status = o->board.run(edgertctl(*o, {"deploy", staged, "--pipeline", o->pipeline, "--sha256", sha}));
      o->board.run({"rm", "-f", staged});  // the store has its own copy now
    }
    pipelines = remote_json(*o, {"pipelines"}, "edgertctl pipelines");
    std::string now = active_engine(pipelines, o->pipeline);
    std::printf("[4/5] %s\n", status == 0 ? "swap done" : "swap refused; the running engine was kept");
    std::printf("[5/5] state: pipeline %s on %s runs engine %s\n", o->pipeline.c_str(), o->board.host.c_str(), now.c_str());
    if (status != 0 || now != sha) builder::build_fail(EDGERT_ERR_IO, "deploy of %s to %s failed", sha.c_str(), o->board.host.c_str());
  });
}

}  // namespace edgert::cli
