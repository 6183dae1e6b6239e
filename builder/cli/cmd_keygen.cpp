// edgert keygen NAME [--dir DIR]: an ed25519 key pair for `edgert build --sign`.
#include <cstdio>

#include "commands.h"
#include "engine_signing.h"

namespace edgert::cli {

void add_keygen_command(CLI::App& app) {
  struct Options {
    std::string name, dir = ".";
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("keygen", "Make an ed25519 key pair for signing engines (NAME.key, NAME.pub)");
  cmd->add_option("name", options->name, "Key name: recorded in every engine it signs")->required();
  cmd->add_option("--dir", options->dir, "Directory to write NAME.key and NAME.pub into")->capture_default_str();
  cmd->callback([options] {
    signing::generate_key_pair(options->dir, options->name);
    std::string base = options->dir + "/" + options->name;
    std::printf("wrote %s.key (secret, mode 0600) and %s.pub\n", base.c_str(), base.c_str());
    std::printf("sign with: edgert build MODEL.onnx ... --sign %s.key\n", base.c_str());
    std::printf("trust on a board: copy %s.pub into /etc/edgert/trusted-keys.d/ and set require_signed: true\n",
                base.c_str());
  });
}

}  // namespace edgert::cli
