#include "edgert/edgert.h"

extern "C" void edgert_load_options_init(edgert_load_options* options) {
  if (!options) return;
  *options = edgert_load_options{};
  options->struct_size = sizeof(edgert_load_options);
}
