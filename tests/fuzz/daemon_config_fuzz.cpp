// libFuzzer target: arbitrary bytes as edgertd's configuration (YAML) must load or be refused
// with a ConfigError naming file:line:column; never a crash, a hang or another exception
// escaping. Seeds: the shipped edgertd.yaml and the board overlay's.
#include <cstdint>
#include <cstdlib>

#include "config.h"
#include "fuzz_input_file.h"
#include "yaml_tree.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInputFile file(data, size);
  try {
    edgert::daemon::load_daemon_config(file.path());
  } catch (const edgert::config::ConfigError& e) {
    if (e.what()[0] == '\0') std::abort();
  }
  return 0;
}
