/*
 * libedgert-builder: an ONNX model into an engine for one board, as `edgert build` makes it.
 *
 *   edgert_builder       one build's settings: the model, the board and the options.
 *   edgert_built_engine  what a build made: the engine file's bytes and a JSON report.
 *
 * Options carry the names of `edgert build`'s long flags, without the dashes, and the flag's
 * value as text: ("board", "jetson-orin-nano"), ("fp16", "1"), ("min-shapes", "x:1x3x8x8").
 * One vocabulary for the CLI, this library and the Python package, so a setting cannot exist in
 * one of them and not the others; `edgert build --help` documents every option. A flag that
 * repeats (min-shapes, opt-shapes, max-shapes, layer-precisions) takes one call per value.
 * Switches take "1", "true", "on" or "0", "false", "off".
 *
 * Every call that can fail returns an edgert_status; on failure the edgert_error passed in (may
 * be NULL) receives a message that says what failed and where (file, node, option).
 * A builder is used by one thread at a time; builders on different threads are independent.
 */
#ifndef EDGERT_BUILDER_H
#define EDGERT_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "edgert/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct edgert_builder edgert_builder;
typedef struct edgert_built_engine edgert_built_engine;
typedef struct edgert_calibration_feed edgert_calibration_feed;

/* INT8 calibration inputs, one sample per call: index 0, 1, ... Add each model input's tensor
 * to `feed` (edgert_calibration_feed_add; a model with one input may leave the name NULL), or set
 * *done to 1 when there are no more. An error status ends the build with the message in
 * `error`. */
typedef edgert_status (*edgert_calibration_next)(void* user, int64_t index, edgert_calibration_feed* feed,
                                                 int32_t* done, edgert_error* error);

/* One line of the build's progress (what `edgert build -v` prints). */
typedef void (*edgert_build_log)(void* user, const char* line);

EDGERT_API const char* edgert_builder_version(void);

/* A builder for the model at `model_path` (read when the build runs), board "native" until the
 * "board" option names another. Free it with edgert_builder_release. */
EDGERT_API edgert_status edgert_builder_create(const char* model_path, edgert_builder** builder,
                                               edgert_error* error);
EDGERT_API void edgert_builder_release(edgert_builder* builder);

/* Sets (or, for a repeating option, adds) one option. An unknown name or a value the option
 * cannot take is refused here; what depends on the model or the board is checked by the build. */
EDGERT_API edgert_status edgert_builder_set_option(edgert_builder* builder, const char* name, const char* value,
                                                   edgert_error* error);

/* Calibrates INT8 on the samples `next` gives (instead of the "calib" option's directory).
 * `user` is passed back to it and must live until the build returns. NULL: no callback. */
EDGERT_API edgert_status edgert_builder_set_calibration(edgert_builder* builder, edgert_calibration_next next,
                                                        void* user, edgert_error* error);

/* Copies one input tensor into the sample being fed: `bytes` bytes of `dtype` values in
 * row-major order for the shape `dims[0..rank)`. */
EDGERT_API edgert_status edgert_calibration_feed_add(edgert_calibration_feed* feed, const char* name,
                                                     edgert_dtype dtype, const int64_t* dims, int32_t rank,
                                                     const void* data, size_t bytes, edgert_error* error);

/* Progress lines go to `log` (NULL: none). */
EDGERT_API void edgert_builder_set_log(edgert_builder* builder, edgert_build_log log, void* user);

/* Runs the build. On success *engine owns the result; free it with edgert_built_engine_release.
 * The builder may be changed and built again afterwards. */
EDGERT_API edgert_status edgert_builder_build(edgert_builder* builder, edgert_built_engine** engine,
                                              edgert_error* error);

/* The engine file's bytes; they live as long as `engine`. */
EDGERT_API const uint8_t* edgert_built_engine_data(const edgert_built_engine* engine, size_t* size);

/* What the build did, as JSON: {"model", "board", "native_board", "nodes", "bytes", "warnings": [..],
 * "summary": [lines `edgert build` prints], "fp16_nodes", "int8": {..}, "calibration": {..},
 * "tuning": {..}, "signed_by"}. Lives as long as `engine`. */
EDGERT_API const char* edgert_built_engine_report(const edgert_built_engine* engine);

/* Writes the engine to `path` atomically: a temporary file renamed over it, so a reader never
 * sees half an engine and a failed write leaves the old file. */
EDGERT_API edgert_status edgert_built_engine_save(const edgert_built_engine* engine, const char* path,
                                                  edgert_error* error);
EDGERT_API void edgert_built_engine_release(edgert_built_engine* engine);

/* What the engine file at `path` holds, as the JSON `edgert inspect --json` prints, read without
 * loading its plugins. On success *json is a NUL-terminated string to free with
 * edgert_builder_free_text. */
EDGERT_API edgert_status edgert_inspect_engine_file(const char* path, char** json, edgert_error* error);
EDGERT_API void edgert_builder_free_text(char* text);

#ifdef __cplusplus
}
#endif

#endif /* EDGERT_BUILDER_H */
