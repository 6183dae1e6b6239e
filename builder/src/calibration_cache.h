// The calibration cache (--calib FILE): the calibrated range of every activation tensor, kept
// so a later build of the same model skips running the calibration inputs (TensorRT's
// calibration cache in spirit). A text file, one tensor per line, so it can be read, diffed and
// kept beside the model in version control:
//
//   edgert-calibration-cache 1
//   model-sha256 3b5d...             (64 lower-case hex digits)
//   calibrator percentile:99.99      (calibrator_name(): always with its parameter)
//   edgert-version 0.4.0
//   samples 500
//   tensors 2
//   "conv1/out" -0x1.8p+1 0x1.8p+1
//   "relu \"7\"\n" 0x0p+0 0x1.2p+2
//
// Tensor lines come sorted by name (bytes), so the same ranges always give the same file.
// Ranges are C99 hex floats (%a): exact, so a cache read on another machine gives bit-identical
// ranges and hence identical quantization. Names are in double quotes with \" \\ \n \r \t and
// \xHH for other bytes below 0x20 and 0x7f; other bytes, UTF-8 included, stay as they are, so
// any ONNX name round-trips. The `tensors` count makes a file cut at a line boundary detectable.
//
// Every failure is a BuildError:
//   EDGERT_ERR_IO                when the file cannot be read or written;
//   EDGERT_ERR_FORMAT            for a file that is not a calibration cache, is malformed or
//                                truncated (the message gives the line), or lists a tensor twice;
//   EDGERT_ERR_VERSION           for another format version or another edgert version;
//   EDGERT_ERR_INVALID_ARGUMENT  for a cache of another model or made with another calibrator.
// Each message names the file, the field, what the file has and what this build expects.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "calibrators.h"

namespace edgert::builder {

// What the ranges are valid for.
struct CalibrationStamp {
  std::string model_sha256;  // SHA-256 of the ONNX file, hex (compared without regard to case)
  CalibratorChoice calibrator;
  std::string edgert_version;  // EDGERT_VERSION of the build that calibrated
  // Calibration inputs the ranges were collected from. Recorded for whoever reads the file,
  // not compared on read: a build that reuses a cache need not have the inputs at hand.
  uint64_t samples = 0;
};

struct CalibrationCache {
  CalibrationStamp stamp;
  std::map<std::string, CalibratedRange> ranges;  // by tensor name; each lo <= hi, finite
};

// Writes `cache` to a temporary file beside `path` (same directory, so the rename cannot cross
// file systems), flushes it to disk and renames it over `path`: a process killed midway leaves
// the previous file whole. Throws BuildError (IO; INVALID_ARGUMENT for a range that is not
// finite or has lo > hi, which would not read back).
void write_calibration_cache(const std::string& path, const CalibrationCache& cache);

// std::nullopt when there is no file at `path` (the caller then calibrates and writes one).
// Otherwise the cache, after checking its stamp against `expected` (model, calibrator with its
// parameter, edgert version; not samples) and every line; throws BuildError as above.
std::optional<CalibrationCache> read_calibration_cache(const std::string& path, const CalibrationStamp& expected);

// The quoted, escaped form of a tensor name used in the file (also for messages).
std::string quote_tensor_name(const std::string& name);

}  // namespace edgert::builder
