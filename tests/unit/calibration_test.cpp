// INT8 calibration: the statistics (calibration_histogram.h), the calibrators (calibrators.h),
// the quantization parameters (quantization_params.h), the calibration cache
// (calibration_cache.h) and the accuracy guard's metrics (accuracy_guard_options.h). Needs no
// model and no plugin.
#include <gtest/gtest.h>
#include <sodium.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>

#include "accuracy_guard.h"
#include "build_error.h"
#include "calibration_cache.h"
#include "calibration_histogram.h"
#include "calibrators.h"
#include "quantization_params.h"

namespace edgert::builder {
namespace {

// A fresh directory, removed with its files (no subdirectories) when the object goes away.
class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/edgert_calibration_XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~ScratchDir() {
    for (const std::string& f : files()) ::unlink(file(f).c_str());
    ::rmdir(path_.c_str());
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR* dir = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(dir))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
      ::closedir(dir);
    }
    return names;
  }

 private:
  std::string path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string sha256_hex_of(const std::string& bytes) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  char hex[2 * crypto_hash_sha256_BYTES + 1];
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  return hex;
}

std::vector<float> gaussian(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(generator);
  return values;
}

// Expects `call` to throw BuildError with `status` and every one of `parts` in its message.
template <typename Call>
void expect_build_error(Call call, edgert_status status, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no BuildError thrown; expected one with " << (parts.empty() ? "" : parts[0]);
  } catch (const BuildError& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message lacks '" << part << "': " << e.what();
  }
}

// ---- statistics ----

TEST(CalibrationHistogram, GrowingTheRangeKeepsEveryEarlierValueInItsBin) {
  CalibrationHistogram h;
  h.add({1.0f, 0.5f, -0.25f, 0.9f});  // range 1: 1.0 is in the last bin
  EXPECT_EQ(h.range(), 1.0);
  EXPECT_EQ(h.bins()[2047], 1u);
  h.add({3.0f, -2.5f});  // range doubles twice, to 4; width 1/512
  EXPECT_EQ(h.range(), 4.0);
  EXPECT_EQ(h.samples(), 6u);
  // Right-closed bins: |x| in (b w, (b + 1) w] is bin b, so |x| = k w lands in bin k - 1.
  EXPECT_EQ(h.bins()[511], 1u);   // 1.0
  EXPECT_EQ(h.bins()[255], 1u);   // 0.5
  EXPECT_EQ(h.bins()[127], 1u);   // 0.25
  EXPECT_EQ(h.bins()[460], 1u);   // 0.9 = 460.8 w
  EXPECT_EQ(h.bins()[1535], 1u);  // 3.0
  EXPECT_EQ(h.bins()[1279], 1u);  // 2.5
  uint64_t total = 0;
  for (uint64_t c : h.bins()) total += c;
  EXPECT_EQ(total, 6u);
  EXPECT_EQ(h.min(), -2.5f);
  EXPECT_EQ(h.max(), 3.0f);
}

TEST(CalibrationHistogram, AGrownHistogramEqualsOneBuiltWithItsFinalRangeFromTheStart) {
  std::vector<float> values = gaussian(50000, 7);
  CalibrationHistogram grown;
  // Batches of growing spread, so the range doubles several times along the way.
  for (size_t b = 0; b < 10; ++b) {
    std::vector<float> batch(values.begin() + b * 5000, values.begin() + (b + 1) * 5000);
    for (float& v : batch) v *= static_cast<float>(1 << b) * 0.1f;
    grown.add(batch);
  }
  CalibrationHistogram direct;
  direct.add({static_cast<float>(grown.range())});  // fixes the range first; one extra value in the last bin
  for (size_t b = 0; b < 10; ++b) {
    std::vector<float> batch(values.begin() + b * 5000, values.begin() + (b + 1) * 5000);
    for (float& v : batch) v *= static_cast<float>(1 << b) * 0.1f;
    direct.add(batch);
  }
  ASSERT_EQ(direct.range(), grown.range());
  EXPECT_GT(grown.range(), 2 * 0.1 * 4);  // it did grow
  std::vector<uint64_t> expected = direct.bins();
  expected.back() -= 1;
  EXPECT_EQ(grown.bins(), expected);
}

TEST(CalibrationHistogram, NanAndInfinityAreSkippedAndCounted) {
  CalibrationHistogram h;
  h.add({NAN, INFINITY, -INFINITY});
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.non_finite(), 3u);
  EXPECT_EQ(calibrated_range(h, {}).lo, 0.0f);
  EXPECT_EQ(calibrated_range(h, {}).hi, 0.0f);
  h.add({2.0f, NAN, -1.0f, 0.0f});
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h.samples(), 3u);
  EXPECT_EQ(h.zeros(), 1u);
  EXPECT_EQ(h.non_finite(), 4u);
  EXPECT_EQ(h.min(), -1.0f);
  EXPECT_EQ(h.max(), 2.0f);
  EXPECT_EQ(h.range(), 2.0);
}

TEST(CalibrationHistogram, ZerosBeforeTheFirstNonzeroValueStayInBinZero) {
  CalibrationHistogram h;
  h.add({0.0f, -0.0f});
  EXPECT_EQ(h.range(), 0.0);
  EXPECT_EQ(calibrated_range(h, {}).lo, 0.0f);
  EXPECT_EQ(calibrated_range(h, {}).hi, 0.0f);
  h.add({4.0f});
  EXPECT_EQ(h.bins()[0], 2u);
  EXPECT_EQ(h.bins()[2047], 1u);
  EXPECT_EQ(h.zeros(), 2u);
}

TEST(CalibrationHistogram, TheSameBatchesInTheSameOrderGiveIdenticalResults) {
  auto run = [] {
    CalibrationHistogram h;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      std::vector<float> batch = gaussian(20000, seed);
      for (float& v : batch) v *= static_cast<float>(seed);
      h.add(batch);
    }
    return h;
  };
  CalibrationHistogram a = run(), b = run();
  EXPECT_EQ(a.bins(), b.bins());
  EXPECT_EQ(a.range(), b.range());
  for (const char* name : {"entropy", "minmax", "percentile:99.9"}) {
    CalibratedRange ra = calibrated_range(a, parse_calibrator(name)), rb = calibrated_range(b, parse_calibrator(name));
    EXPECT_EQ(std::memcmp(&ra, &rb, sizeof ra), 0) << name;
  }
}

TEST(CalibrationHistogram, PercentileIsTheBinEdgeWhereTheCountCrossesIt) {
  CalibrationHistogram h;
  std::vector<float> values;
  for (int i = 1; i <= 2048; ++i) values.push_back(static_cast<float>(i));  // one value per bin, width 1
  h.add(values);
  EXPECT_EQ(h.abs_percentile(50), 1024.0);
  EXPECT_EQ(h.abs_percentile(100), 2048.0);
  EXPECT_EQ(h.abs_percentile(0.001), 1.0);
}

// ---- calibrators ----

TEST(Calibrators, NamesParseAndRoundTrip) {
  EXPECT_EQ(parse_calibrator("entropy").kind, Calibrator::kEntropy);
  EXPECT_EQ(parse_calibrator("minmax").kind, Calibrator::kMinMax);
  EXPECT_EQ(parse_calibrator("percentile").kind, Calibrator::kPercentile);
  EXPECT_EQ(parse_calibrator("percentile").percentile, 99.99);
  EXPECT_EQ(parse_calibrator("percentile:99.9").percentile, 99.9);
  EXPECT_EQ(calibrator_name(parse_calibrator("percentile")), "percentile:99.99");
  EXPECT_EQ(calibrator_name(parse_calibrator("percentile:100")), "percentile:100");
  EXPECT_EQ(calibrator_name(parse_calibrator("percentile:99.999")), "percentile:99.999");
  EXPECT_EQ(calibrator_name(parse_calibrator("percentile:50")), "percentile:50");
  EXPECT_EQ(calibrator_name(parse_calibrator("percentile:1e-5")), "percentile:1e-05");
  EXPECT_EQ(parse_calibrator("percentile:1e-5").percentile, 1e-5);
  EXPECT_EQ(calibrator_name(CalibratorChoice{}), "entropy");
  EXPECT_EQ(calibrator_name(parse_calibrator("minmax")), "minmax");
  for (const char* bad : {"kl", "Entropy", "entropy:1", "percentile:", "percentile:0", "percentile:100.5",
                          "percentile:abc", "percentile:99 ", "percentile: 99", "percentile99"})
    expect_build_error([&] { parse_calibrator(bad); }, EDGERT_ERR_INVALID_ARGUMENT, {std::string("'") + bad + "'"});
}

// N(0, 1) with a few far outliers: minmax covers them, the others clip to a few sigma.
TEST(Calibrators, OnAGaussianWithOutliersMinMaxTakesTheOutliersAndTheOthersClip) {
  std::vector<float> values = gaussian(200000, 42);
  values[10] = 40.0f;
  values[20] = -35.0f;
  values[30] = 38.0f;
  CalibrationHistogram h;
  for (size_t b = 0; b < 4; ++b) h.add(values.data() + b * 50000, 50000);

  CalibratedRange minmax = calibrated_range(h, parse_calibrator("minmax"));
  EXPECT_EQ(minmax.lo, -35.0f);
  EXPECT_EQ(minmax.hi, 40.0f);

  // Two-sided 99.99 % of N(0, 1) is 3.89; the outliers are 0.0015 % and barely move it (20 values
  // of 200000 lie beyond, so the sample's percentile wanders by a few tenths).
  CalibratedRange percentile = calibrated_range(h, parse_calibrator("percentile"));
  EXPECT_NEAR(percentile.hi, 3.89, 0.4);
  EXPECT_EQ(percentile.lo, -percentile.hi);

  CalibratedRange entropy = calibrated_range(h, {});
  EXPECT_GT(entropy.hi, 2.5f);
  EXPECT_LT(entropy.hi, 6.0f);
  EXPECT_EQ(entropy.lo, -entropy.hi);
}

TEST(Calibrators, OnUniformDataEntropyKeepsNearlyTheWholeRange) {
  std::mt19937 generator(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(200000);
  for (float& v : values) v = uniform(generator);
  CalibrationHistogram h;
  h.add(values);
  CalibratedRange entropy = calibrated_range(h, {});
  EXPECT_GT(entropy.hi, 0.97f * h.max());
  EXPECT_LT(entropy.lo, 0.97f * h.min());
}

TEST(Calibrators, ANonNegativeTensorGetsLoZeroFromEveryCalibrator) {
  std::vector<float> values = gaussian(100000, 11);
  for (float& v : values) v = std::max(v, 0.0f);  // ReLU: half of the values are exactly 0
  values[5] = 30.0f;
  CalibrationHistogram h;
  h.add(values);
  for (const char* name : {"entropy", "minmax", "percentile"}) {
    CalibratedRange range = calibrated_range(h, parse_calibrator(name));
    EXPECT_EQ(range.lo, 0.0f) << name;
    EXPECT_GT(range.hi, 2.0f) << name;
  }
  // The spike of zeros is left out of the divergence, so entropy clips the outlier, not the data.
  double threshold = entropy_threshold(h);
  EXPECT_GT(threshold, 2.5);
  EXPECT_LT(threshold, 8.0);
}

TEST(Calibrators, ATensorAwayFromZeroKeepsItsMinimumAsLo) {
  std::vector<float> values;
  for (int i = 0; i < 1000; ++i) values.push_back(5.0f + static_cast<float>(i) / 1000.0f);
  CalibrationHistogram h;
  h.add(values);
  // The 0.01st percentile is the upper edge of the bin holding 5: T is just above the minimum.
  CalibratedRange low = calibrated_range(h, parse_calibrator("percentile:0.01"));
  EXPECT_EQ(low.lo, 5.0f);
  EXPECT_GE(low.hi, low.lo);
  EXPECT_LE(low.hi, 5.0f + h.bin_width());
  for (const char* name : {"entropy", "minmax", "percentile"}) {
    CalibratedRange range = calibrated_range(h, parse_calibrator(name));
    EXPECT_EQ(range.lo, 5.0f) << name;
    EXPECT_GE(range.hi, range.lo) << name;
    EXPECT_LE(range.hi, h.max()) << name;
  }
}

TEST(Calibrators, EntropyDoesNotClipATensorFarFromZeroToASliver) {
  // A global average of positive features: every value in [0.36, 1.36], none near zero. The
  // first thresholds the search tries hold all of them in one bin, where P equals Q.
  std::mt19937 generator(5);
  std::uniform_real_distribution<float> uniform(0.36f, 1.36f);
  std::vector<float> values(5000);
  for (float& v : values) v = uniform(generator);
  CalibrationHistogram h;
  h.add(values);
  const CalibratedRange range = calibrated_range(h, {});
  EXPECT_GE(range.hi, static_cast<float>(h.abs_percentile(100.0 * (1.0 - kEntropyMaxClipped))) - h.bin_width());
  EXPECT_GT(range.hi, 1.3f);
}

// ---- quantization parameters ----

TEST(QuantizationParams, RoundingIsHalfToEven) {
  EXPECT_EQ(round_half_even(2.5), 2.0);
  EXPECT_EQ(round_half_even(3.5), 4.0);
  EXPECT_EQ(round_half_even(-2.5), -2.0);
  EXPECT_EQ(round_half_even(-3.5), -4.0);
  EXPECT_EQ(round_half_even(0.5), 0.0);
  EXPECT_EQ(round_half_even(1.5), 2.0);
  EXPECT_EQ(round_half_even(2.4999), 2.0);
  EXPECT_EQ(round_half_even(2.5001), 3.0);
  EXPECT_EQ(round_half_even(-0.4), 0.0);
}

TEST(QuantizationParams, ActivationsGetUint8ScaleAndZeroPoint) {
  ActivationQuantization zero = activation_quantization("t", 0.0f, 0.0f);
  EXPECT_EQ(zero.scale, 1.0f);
  EXPECT_EQ(zero.zero_point, 0);

  ActivationQuantization negative = activation_quantization("t", -2.0f, -1.0f);  // widened to [-2, 0]
  EXPECT_EQ(negative.scale, 2.0f / 255.0f);
  EXPECT_EQ(negative.zero_point, 255);

  ActivationQuantization positive = activation_quantization("t", 0.5f, 2.0f);  // widened to [0, 2]
  EXPECT_EQ(positive.scale, 2.0f / 255.0f);
  EXPECT_EQ(positive.zero_point, 0);

  ActivationQuantization mixed = activation_quantization("t", -1.0f, 3.0f);  // 1 / (4 / 255) = 63.75
  EXPECT_EQ(mixed.scale, 4.0f / 255.0f);
  EXPECT_EQ(mixed.zero_point, 64);

  // Scale 1 exactly, so -lo / scale is exactly x.5: ties go to the even zero point.
  EXPECT_EQ(activation_quantization("t", -2.5f, 252.5f).zero_point, 2);
  EXPECT_EQ(activation_quantization("t", -3.5f, 251.5f).zero_point, 4);
  EXPECT_EQ(activation_quantization("t", -2.5f, 252.5f).scale, 1.0f);

  expect_build_error([] { activation_quantization("conv1/out", 1.0f, -1.0f); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"'conv1/out'", "[1, -1]"});
  expect_build_error([] { activation_quantization("x", NAN, 1.0f); }, EDGERT_ERR_INVALID_ARGUMENT, {"'x'"});
}

TEST(QuantizationParams, WeightsAreSymmetricInt8PerOutputChannel) {
  // Channel 0: max 127, scale 1; channel 1: all zero, scale 1; channel 2: max 254, scale 2.
  std::vector<float> w = {127.0f, -63.5f, 2.5f, 0.4f, 0, 0, 0, 0, -254.0f, 1.0f, 3.0f, 200.0f};
  WeightQuantization q = quantize_weights_per_channel("conv.weight", w, {3, 2, 2});
  EXPECT_EQ(q.scales, (std::vector<float>{1.0f, 1.0f, 2.0f}));
  EXPECT_EQ(q.values, (std::vector<int8_t>{127, -64, 2, 0, 0, 0, 0, 0, -127, 0, 2, 100}));

  WeightQuantization fraction = quantize_weights_per_channel("w", {0.5f, -0.25f, 0.1f}, {1, 3});
  EXPECT_EQ(fraction.scales[0], 0.5f / 127.0f);
  EXPECT_EQ(fraction.values, (std::vector<int8_t>{127, -64, 25}));  // -63.5 -> -64 (even), 25.4 -> 25

  expect_build_error([&] { quantize_weights_per_channel("conv.weight", w, {3, 5}); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"'conv.weight'", "15", "12"});
  expect_build_error([] { quantize_weights_per_channel("fc.weight", {1.0f, NAN}, {2}); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"'fc.weight'", "index 1"});
  expect_build_error([] { quantize_weights_per_channel("s", {1.0f}, {}); }, EDGERT_ERR_INVALID_ARGUMENT, {"'s'"});
}

TEST(QuantizationParams, BiasesAreInt32AtInputScaleTimesWeightScale) {
  std::vector<int32_t> b = quantize_bias("conv.bias", {1.25f, -3.0f, 1e10f, -1e10f, 0.75f}, 0.5f,
                                         {1.0f, 1.0f, 1e-3f, 1e-3f, 1.0f});
  // 1.25 / 0.5 = 2.5 -> 2 (even); -3 / 0.5 = -6; saturated; 0.75 / 0.5 = 1.5 -> 2.
  EXPECT_EQ(b, (std::vector<int32_t>{2, -6, INT32_MAX, INT32_MIN, 2}));
  expect_build_error([] { quantize_bias("conv.bias", {1.0f}, 0.5f, {1.0f, 2.0f}); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"'conv.bias'", "1 values", "2 output channels"});
  expect_build_error([] { quantize_bias("b", {1.0f}, 0.0f, {1.0f}); }, EDGERT_ERR_INVALID_ARGUMENT, {"'b'", "input scale"});
}

// ---- calibration cache ----

CalibrationStamp stamp_for(const std::string& model_bytes, const std::string& calibrator = "entropy") {
  CalibrationStamp stamp;
  stamp.model_sha256 = sha256_hex_of(model_bytes);
  stamp.calibrator = parse_calibrator(calibrator);
  stamp.edgert_version = "1.2.3";
  stamp.samples = 500;
  return stamp;
}

CalibrationCache awkward_cache() {
  CalibrationCache cache;
  cache.stamp = stamp_for("model bytes", "percentile:99.9");
  cache.ranges = {
      {"conv1/out", {-3.0f, 3.0f}},
      {"with space", {0.1f, 0.3f}},
      {"quote\"d", {-FLT_MAX, FLT_MAX}},
      {"back\\slash", {-0.0f, 0.0f}},
      {"new\nline\r\ttab", {-1e-45f, 1e-45f}},  // float's smallest subnormal
      {std::string("ctrl\x01\x7f", 6), {1.17549435e-38f, 2.0f}},
      {"ünïcödé 名前", {-1.0f / 3.0f, 2.0f / 3.0f}},
      {"", {0.0f, 1.0f}},
  };
  return cache;
}

// Writes a cache whose file has the given lines (each gets its '\n').
std::string cache_file(const ScratchDir& dir, const std::vector<std::string>& lines, const std::string& name = "c.cache") {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  write_text(dir.file(name), text);
  return dir.file(name);
}

std::vector<std::string> header_lines(const CalibrationStamp& stamp, size_t tensors) {
  return {"edgert-calibration-cache 1", "model-sha256 " + stamp.model_sha256,
          "calibrator " + calibrator_name(stamp.calibrator), "edgert-version " + stamp.edgert_version,
          "samples " + std::to_string(stamp.samples), "tensors " + std::to_string(tensors)};
}

TEST(CalibrationCache, RangesAndAwkwardNamesRoundTripBitExact) {
  ScratchDir dir;
  CalibrationCache cache = awkward_cache();
  write_calibration_cache(dir.file("model.cache"), cache);
  std::optional<CalibrationCache> read = read_calibration_cache(dir.file("model.cache"), cache.stamp);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->ranges.size(), cache.ranges.size());
  for (const auto& [name, range] : cache.ranges) {
    auto it = read->ranges.find(name);
    ASSERT_NE(it, read->ranges.end()) << quote_tensor_name(name);
    EXPECT_EQ(std::memcmp(&it->second, &range, sizeof range), 0) << quote_tensor_name(name);
  }
  EXPECT_EQ(read->stamp.samples, 500u);
  EXPECT_EQ(read->stamp.model_sha256, cache.stamp.model_sha256);
  EXPECT_EQ(calibrator_name(read->stamp.calibrator), "percentile:99.9");
  EXPECT_EQ(read->stamp.edgert_version, "1.2.3");

  // One tensor per line, readable; the same cache always writes the same bytes.
  std::string text = read_text(dir.file("model.cache"));
  EXPECT_EQ(text.rfind("edgert-calibration-cache 1\nmodel-sha256 " + cache.stamp.model_sha256 +
                           "\ncalibrator percentile:99.9\nedgert-version 1.2.3\nsamples 500\ntensors 8\n\"\" 0x0p+0 0x1p+0\n",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("\n\"conv1/out\" -0x1.8p+1 0x1.8p+1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n\"new\\nline\\r\\ttab\" "), std::string::npos) << text;
  EXPECT_NE(text.find("\n\"ctrl\\x01\\x7f\" "), std::string::npos) << text;
  EXPECT_NE(text.find("\n\"quote\\\"d\" "), std::string::npos) << text;
  write_calibration_cache(dir.file("again.cache"), *read);
  EXPECT_EQ(read_text(dir.file("again.cache")), text);
  // The temporary file was renamed, not left behind.
  EXPECT_EQ(dir.files().size(), 2u);
}

TEST(CalibrationCache, WritingReplacesTheOldFileWhole) {
  ScratchDir dir;
  CalibrationCache cache = awkward_cache();
  write_text(dir.file("model.cache"), "old contents\n");
  write_calibration_cache(dir.file("model.cache"), cache);
  EXPECT_TRUE(read_calibration_cache(dir.file("model.cache"), cache.stamp));
  EXPECT_EQ(dir.files(), std::vector<std::string>{"model.cache"});

  cache.ranges["bad"] = {NAN, 1.0f};
  expect_build_error([&] { write_calibration_cache(dir.file("model.cache"), cache); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"model.cache", "\"bad\""});
  expect_build_error([&] { write_calibration_cache(dir.file("no/such/dir.cache"), awkward_cache()); }, EDGERT_ERR_IO,
                     {"no/such/dir.cache"});
}

TEST(CalibrationCache, AMissingFileIsNotAnError) {
  ScratchDir dir;
  EXPECT_FALSE(read_calibration_cache(dir.file("absent.cache"), stamp_for("m")));
}

TEST(CalibrationCache, ACacheOfAnotherModelIsRefused) {
  ScratchDir dir;
  CalibrationCache cache = awkward_cache();
  write_calibration_cache(dir.file("x.cache"), cache);
  CalibrationStamp other = cache.stamp;
  other.model_sha256 = sha256_hex_of("another model");
  expect_build_error([&] { read_calibration_cache(dir.file("x.cache"), other); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"calibration cache '" + dir.file("x.cache") + "' was made for model sha256 " +
                          cache.stamp.model_sha256 + " (this model is " + other.model_sha256 + ")",
                      "calibrate again"});
  // Hex case does not matter.
  CalibrationStamp upper = cache.stamp;
  for (char& c : upper.model_sha256) c = static_cast<char>(std::toupper(c));
  EXPECT_TRUE(read_calibration_cache(dir.file("x.cache"), upper));
}

TEST(CalibrationCache, ACacheOfAnotherCalibratorOrParameterIsRefused) {
  ScratchDir dir;
  CalibrationCache cache = awkward_cache();  // percentile:99.9
  write_calibration_cache(dir.file("x.cache"), cache);
  CalibrationStamp entropy = cache.stamp;
  entropy.calibrator = parse_calibrator("entropy");
  expect_build_error([&] { read_calibration_cache(dir.file("x.cache"), entropy); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"'" + dir.file("x.cache") + "'", "calibrator percentile:99.9 (this build calibrates with entropy)"});
  CalibrationStamp other_percentile = cache.stamp;
  other_percentile.calibrator = parse_calibrator("percentile");
  expect_build_error([&] { read_calibration_cache(dir.file("x.cache"), other_percentile); }, EDGERT_ERR_INVALID_ARGUMENT,
                     {"percentile:99.9 (this build calibrates with percentile:99.99)"});
}

TEST(CalibrationCache, ACacheOfAnotherEdgertVersionIsRefused) {
  ScratchDir dir;
  CalibrationCache cache = awkward_cache();
  write_calibration_cache(dir.file("x.cache"), cache);
  CalibrationStamp newer = cache.stamp;
  newer.edgert_version = "1.3.0";
  expect_build_error([&] { read_calibration_cache(dir.file("x.cache"), newer); }, EDGERT_ERR_VERSION,
                     {"'" + dir.file("x.cache") + "'", "made by edgert \"1.2.3\" (this is edgert \"1.3.0\")"});
  // Samples are recorded, not compared.
  CalibrationStamp fewer = cache.stamp;
  fewer.samples = 3;
  EXPECT_TRUE(read_calibration_cache(dir.file("x.cache"), fewer));
}

TEST(CalibrationCache, AFileThatIsNotACacheOrOfAnotherFormatVersionIsRefused) {
  ScratchDir dir;
  CalibrationStamp stamp = stamp_for("m");
  write_text(dir.file("empty.cache"), "");
  expect_build_error([&] { read_calibration_cache(dir.file("empty.cache"), stamp); }, EDGERT_ERR_FORMAT,
                     {"'" + dir.file("empty.cache") + "' line 1", "empty file"});
  write_text(dir.file("trt.cache"), "TRT-8601-EntropyCalibration2\ninput: 3c010a14\n");
  expect_build_error([&] { read_calibration_cache(dir.file("trt.cache"), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 1", "\"TRT-8601-EntropyCalibration2\"", "not an edgert calibration cache"});
  write_text(dir.file("binary.cache"), std::string("\x7f" "ELF\x02\x01", 6));
  expect_build_error([&] { read_calibration_cache(dir.file("binary.cache"), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 1", "\"\\x7fELF\\x02\\x01\"", "not an edgert calibration cache"});
  std::vector<std::string> lines = header_lines(stamp, 0);
  lines[0] = "edgert-calibration-cache 2";
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_VERSION,
                     {"format 'edgert-calibration-cache 2'", "reads 'edgert-calibration-cache 1'"});
}

TEST(CalibrationCache, ATruncatedFileIsRefusedWithTheLineWhereItEnds) {
  ScratchDir dir;
  CalibrationCache cache = awkward_cache();
  write_calibration_cache(dir.file("x.cache"), cache);
  std::string text = read_text(dir.file("x.cache"));

  // Cut after a whole line: the header's count tells.
  size_t last_line = text.rfind('\n', text.size() - 2) + 1;
  write_text(dir.file("cut.cache"), text.substr(0, last_line));
  expect_build_error([&] { read_calibration_cache(dir.file("cut.cache"), cache.stamp); }, EDGERT_ERR_FORMAT,
                     {"'" + dir.file("cut.cache") + "' line 14", "tensor 8 of 8", "truncated"});
  // Cut in the middle of a line.
  write_text(dir.file("mid.cache"), text.substr(0, last_line + 5));
  expect_build_error([&] { read_calibration_cache(dir.file("mid.cache"), cache.stamp); }, EDGERT_ERR_FORMAT,
                     {"line 14", "cut short", "truncated"});
  // Cut inside the header.
  write_text(dir.file("head.cache"), text.substr(0, text.find("samples")));
  expect_build_error([&] { read_calibration_cache(dir.file("head.cache"), cache.stamp); }, EDGERT_ERR_FORMAT,
                     {"line 5", "'samples ...'", "truncated"});
}

TEST(CalibrationCache, MalformedLinesAreRefusedWithTheirLineNumber) {
  ScratchDir dir;
  CalibrationStamp stamp = stamp_for("m");
  struct Case {
    std::string tensor_line;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"\"a\" 0x1p+0", "expected '\"NAME\" LO HI'"},
           {"a 0x1p+0 0x1p+1", "expected a quoted tensor name"},
           {"\"a 0x1p+0 0x1p+1", "no closing quote"},
           {"\"a\\q\" 0x1p+0 0x1p+1", "unknown escape '\\q'"},
           {"\"a\\x4\" 0x1p+0 0x1p+1", "'\\x' without two hex digits"},
           {"\"a\" zero 0x1p+1", "lo of the range is \"zero\""},
           {"\"a\" 0x1p+0 inf", "hi of the range is \"inf\""},
           {"\"a\" 0x1p+0 0x1p+1 extra", "hi of the range is \"0x1p+1 extra\""},
           {"\"a\" 0x1p+1 0x1p+0", "lo 0x1p+1 above hi 0x1p+0"},
       }) {
    std::vector<std::string> lines = header_lines(stamp, 2);
    lines.push_back("\"first\" 0x0p+0 0x1p+0");
    lines.push_back(c.tensor_line);
    expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                       {"'" + dir.file("c.cache") + "' line 8: ", c.message});
  }
  std::vector<std::string> lines = header_lines(stamp, 0);
  lines[1] = "model-sha256 abc";
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 2", "not 64 hex digits"});
  lines = header_lines(stamp, 0);
  lines[2] = "calibrator kl";
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 3", "unknown calibrator 'kl'"});
  lines = header_lines(stamp, 0);
  lines[4] = "samples -4";
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 5", "samples is \"-4\", not a count"});
  lines = header_lines(stamp, 0);
  std::swap(lines[3], lines[4]);
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 4", "expected 'edgert-version VALUE', found \"samples 500\""});
  lines = header_lines(stamp, 1);
  lines.push_back("\"a\" 0x0p+0 0x1p+0");
  lines.push_back("\"b\" 0x0p+0 0x1p+0");
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                     {"line 8", "after the 1 tensors the header announces"});
}

TEST(CalibrationCache, ATensorListedTwiceIsRefused) {
  ScratchDir dir;
  CalibrationStamp stamp = stamp_for("m");
  std::vector<std::string> lines = header_lines(stamp, 3);
  lines.push_back("\"conv 1\" 0x0p+0 0x1p+0");
  lines.push_back("\"relu\" 0x0p+0 0x1p+0");
  lines.push_back("\"conv\\x201\" -0x1p+0 0x1p+0");  // the same name, escaped differently
  expect_build_error([&] { read_calibration_cache(cache_file(dir, lines), stamp); }, EDGERT_ERR_FORMAT,
                     {"'" + dir.file("c.cache") + "' line 9", "tensor \"conv 1\" is listed again (first on line 7)"});
}

TEST(CalibrationCache, AnUnreadablePathIsAnIoErrorNotAMissingFile) {
  ScratchDir dir;
  expect_build_error([&] { read_calibration_cache(dir.file(""), stamp_for("m")); }, EDGERT_ERR_IO,
                     {"calibration cache '" + dir.file("") + "'"});
}

// box-agreement: float32's detections (score >= 0.3) the candidate also makes, with the same
// label at IoU >= 0.5, one to one.
TEST(AccuracyGuardMetrics, BoxAgreementCountsFloat32DetectionsTheCandidateAlsoMakes) {
  EXPECT_EQ(parse_accuracy_guard("box-agreement:2").metric, GuardMetric::kBoxAgreement);
  EXPECT_THROW(parse_accuracy_guard("boxes:2"), BuildError);
  auto detections = [](std::vector<float> boxes, std::vector<float> scores, std::vector<float> labels) {
    std::map<std::string, OutputValues> batch;
    const int64_t k = static_cast<int64_t>(scores.size());
    batch["boxes"] = {{k, 4}, std::move(boxes)};
    batch["scores"] = {{k}, std::move(scores)};
    batch["labels"] = {{k}, std::move(labels)};
    return BatchOutputs{batch};
  };
  const std::vector<std::string> outputs = {"boxes", "scores", "labels"};
  // Three detections of float32 (one more below the score threshold, which does not count).
  const BatchOutputs reference = detections({0, 0, 10, 10, 20, 20, 40, 40, 50, 0, 60, 10, 0, 0, 5, 5},
                                            {0.9f, 0.8f, 0.5f, 0.1f}, {1, 2, 3, 1});
  EXPECT_DOUBLE_EQ(box_agreement(outputs, reference, reference), 100.0);
  // The same boxes nudged (IoU 0.68), one with its score at 0.2 (drifted below 0.3: kept), in
  // another order: all found.
  const BatchOutputs nudged = detections({51, 1, 61, 11, 1, 1, 11, 11, 21, 21, 41, 41}, {0.2f, 0.85f, 0.7f}, {3, 1, 2});
  EXPECT_DOUBLE_EQ(box_agreement(outputs, reference, nudged), 100.0);
  // One box moved off (IoU 0.14), one with another label: a third found.
  const BatchOutputs lost = detections({0, 0, 10, 10, 30, 30, 50, 50, 50, 0, 60, 10}, {0.9f, 0.8f, 0.5f}, {1, 2, 4});
  EXPECT_NEAR(box_agreement(outputs, reference, lost), 100.0 / 3, 1e-9);
  // Two float32 boxes over one candidate box: matched once.
  const BatchOutputs twice = detections({0, 0, 10, 10, 0, 0, 10, 10}, {0.9f, 0.8f}, {1, 1});
  EXPECT_DOUBLE_EQ(box_agreement(outputs, twice, detections({0, 0, 10, 10}, {0.9f}, {1})), 50.0);
  // No boxes among the outputs: a message.
  std::map<std::string, OutputValues> logits;
  logits["logits"] = {{1, 10}, std::vector<float>(10, 0.f)};
  EXPECT_THROW(box_agreement({"logits"}, BatchOutputs{logits}, BatchOutputs{logits}), BuildError);
}

}  // namespace
}  // namespace edgert::builder
