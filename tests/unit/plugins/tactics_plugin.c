/*
 * A plugin whose Relu kernel lists three tactics of known, very different speeds, so tests can
 * check that the builder times them and keeps the fastest, which is not the first listed:
 *   7 "f32-relu-slow-test"     listed first, spins 2 ms per run
 *   9 "f32-relu-fastest-neon"  no spin either, but named for an ISA x86 boards lack: the
 *                              builder must never choose it for them
 *   3 "f32-relu-fast-test"     no spin
 *   0 "reference"              listed last (as the CPU plugin does), spins 1 ms per run
 * All three compute Relu exactly. It also records what configure() received, for the tests of
 * the thread options (tactictest_configured_threads, found with dlsym).
 */
#include <stdlib.h>
#include <time.h>

#include "edgert/plugin.h"

#define EXPORT __attribute__((visibility("default")))

static int32_t g_configured_threads = -1;
static int32_t g_configured_pin = -1;

EXPORT int32_t tactictest_configured_threads(void) { return g_configured_threads; }
EXPORT int32_t tactictest_configured_pin(void) { return g_configured_pin; }

static const edgert_tactic kTactics[] = {
    {7, "f32-relu-slow-test"}, {9, "f32-relu-fastest-neon"}, {3, "f32-relu-fast-test"}, {0, "reference"}};
enum { kNumTactics = sizeof kTactics / sizeof kTactics[0] };

typedef struct relu_state {
  int64_t tactic;
} relu_state;

static void spin_us(long us) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000L < us);
}

static int32_t relu_supports(const edgert_kernel* self, const edgert_node* node, const edgert_tensor* inputs) {
  (void)self;
  return node->num_inputs == 1 && node->num_outputs == 1 &&
         (inputs[0].dtype == EDGERT_DTYPE_FLOAT32 || inputs[0].dtype == EDGERT_DTYPE_UNDEFINED);
}

static int32_t relu_tactics(const edgert_kernel* self, const edgert_node* node, const edgert_tensor* inputs,
                            edgert_tactic* out, int32_t capacity) {
  (void)self;
  (void)node;
  (void)inputs;
  for (int32_t i = 0; i < capacity && i < kNumTactics; ++i) out[i] = kTactics[i];
  return kNumTactics;
}

static edgert_status relu_prepare(const edgert_kernel* self, const edgert_node* node, int64_t tactic,
                                  const edgert_tensor* inputs, edgert_tensor* outputs, void** state,
                                  edgert_prepare_info* info, edgert_error* error) {
  (void)self;
  (void)node;
  (void)error;
  if (tactic != 7 && tactic != 9 && tactic != 3 && tactic != 0) return EDGERT_ERR_INVALID_ARGUMENT;
  if (inputs[0].dtype != EDGERT_DTYPE_FLOAT32 || inputs[0].rank < 0) return EDGERT_ERR_UNSUPPORTED;
  outputs[0].dtype = EDGERT_DTYPE_FLOAT32;
  outputs[0].rank = inputs[0].rank;
  for (int32_t d = 0; d < inputs[0].rank; ++d) outputs[0].dims[d] = inputs[0].dims[d];
  if (!*state) {
    *state = malloc(sizeof(relu_state));
    if (!*state) return EDGERT_ERR_OUT_OF_MEMORY;
  }
  ((relu_state*)*state)->tactic = tactic;
  info->workspace_bytes = 0;
  info->data_dependent = 0;
  return EDGERT_OK;
}

static edgert_status relu_execute(const edgert_kernel* self, void* state, const edgert_node* node,
                                  const edgert_tensor* inputs, edgert_tensor* outputs, void* workspace,
                                  void* stream, edgert_error* error) {
  (void)self;
  (void)stream;
  (void)node;
  (void)workspace;
  (void)error;
  int64_t tactic = ((const relu_state*)state)->tactic;
  if (tactic == 7) spin_us(2000);
  if (tactic == 0) spin_us(1000);
  int64_t n = 1;
  for (int32_t d = 0; d < inputs[0].rank; ++d) n *= inputs[0].dims[d];
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return EDGERT_OK;
}

static void relu_release(const edgert_kernel* self, void* state) {
  (void)self;
  free(state);
}

static edgert_status tactictest_configure(const edgert_plugin_config* config, edgert_error* error) {
  (void)error;
  g_configured_threads = config->num_threads;
  g_configured_pin = config->pin_threads;
  return EDGERT_OK;
}

/* Above the CPU plugin's score, so its Relu wins when both are on the plugin path. */
static int32_t tactictest_score(void) { return 100; }

static const edgert_kernel kKernels[] = {
    {"", "Relu", "tactictest-relu", 0, relu_supports, relu_tactics, relu_prepare, relu_execute, relu_release, 0, 0},
};

static const edgert_plugin kPlugin = {EDGERT_PLUGIN_ABI_VERSION, "tactictest", "1.0.0", tactictest_score, 1,
                                      kKernels, tactictest_configure, 0};

EXPORT const edgert_plugin* edgert_plugin_entry(void) { return &kPlugin; }
