/* A plugin from the future: its ABI version is one the runtime does not know. */
#include "edgert/plugin.h"

static const edgert_plugin kPlugin = {EDGERT_PLUGIN_ABI_VERSION + 41u, "badabi", "9.9.9", 0, 0, 0, 0, 0};

__attribute__((visibility("default"))) const edgert_plugin* edgert_plugin_entry(void) { return &kPlugin; }
