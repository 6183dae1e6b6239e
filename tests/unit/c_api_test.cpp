// The public C API and its RAII wrapper, through libedgert.so.
#include <gtest/gtest.h>

#include <cstring>

#include "edgert/edgert.hpp"
#include "test_support.h"

namespace edgert::test {
namespace {

TEST(CApi, LoadRunAndReadOutputs) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();

  Engine engine(dir.file("small.engine"), &options);
  ASSERT_EQ(engine.num_inputs(), 1);
  ASSERT_EQ(engine.num_outputs(), 1);
  EXPECT_STREQ(engine.input_info(0).name, "x");
  EXPECT_EQ(engine.input_info(0).dims[1], 4);
  EXPECT_STREQ(edgert_engine_board(engine.get()), host_board().c_str());

  Context context(engine);
  for (float scale : {1.0f, 2.0f}) {  // a second run reuses prepared kernels and memory
    float x[4] = {scale, scale, 4.0f * scale, -scale};
    context.run({edgert_tensor{EDGERT_DTYPE_FLOAT32, 2, {1, 4}, x}});
    edgert_tensor y = context.output(0);
    const float* v = static_cast<const float*>(y.data);
    EXPECT_FLOAT_EQ(v[0], scale + 0.25f);
    EXPECT_FLOAT_EQ(v[2], 2.0f * scale - 1.0f);
  }
}

TEST(CApi, DeviceMemoryWithoutAnEngineNeedsAPluginWithADevice) {
  std::string plugins = cpu_plugin_dir();
  void* data = reinterpret_cast<void*>(0x1);
  edgert_error error{};
  // The CPU plugin has no device: nothing to allocate with, said so.
  EXPECT_EQ(edgert_device_allocate(plugins.c_str(), "cpu", EDGERT_MEMORY_UNIFIED, 4096, &data, &error),
            EDGERT_ERR_UNSUPPORTED);
  EXPECT_EQ(data, nullptr);
  EXPECT_NE(std::strstr(error.message, "plugin cpu has no usable device"), nullptr) << error.message;
  uint64_t free_bytes = 0, total_bytes = 0;
  EXPECT_EQ(edgert_device_memory_info(plugins.c_str(), "cpu", &free_bytes, &total_bytes, &error), EDGERT_ERR_UNSUPPORTED);
  // A plugin that is not there: the search path in the message.
  EXPECT_EQ(edgert_device_allocate(plugins.c_str(), "nope", EDGERT_MEMORY_UNIFIED, 4096, &data, &error), EDGERT_ERR_PLUGIN);
  EXPECT_NE(std::strstr(error.message, "nope"), nullptr) << error.message;
  // Host memory is not a device's to give; NULLs are refused.
  EXPECT_EQ(edgert_device_allocate(plugins.c_str(), "cpu", EDGERT_MEMORY_HOST, 4096, &data, &error),
            EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_device_allocate(plugins.c_str(), nullptr, EDGERT_MEMORY_UNIFIED, 4096, &data, &error),
            EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_device_allocate(plugins.c_str(), "cpu", EDGERT_MEMORY_UNIFIED, 4096, nullptr, &error),
            EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_device_memory_info(plugins.c_str(), "cpu", nullptr, &total_bytes, &error),
            EDGERT_ERR_INVALID_ARGUMENT);
  edgert_device_free(plugins.c_str(), "cpu", EDGERT_MEMORY_UNIFIED, nullptr);  // a no-op, not a crash
}

TEST(CApi, APriorityOrGpuShareOnAHostOnlyEngineIsKeptAndChangesNothing) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  Engine engine(dir.file("small.engine"), &options);
  Context context(engine);
  edgert_error error{};
  EXPECT_EQ(edgert_context_set_priority(context.get(), 5, &error), EDGERT_OK) << error.message;
  EXPECT_EQ(edgert_context_set_priority(nullptr, 5, &error), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_context_set_gpu_share(context.get(), 25, &error), EDGERT_OK) << error.message;
  for (int32_t bad : {0, -5, 101}) {
    EXPECT_EQ(edgert_context_set_gpu_share(context.get(), bad, &error), EDGERT_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(error.message).find("1-100 percent"), std::string::npos) << error.message;
  }
  EXPECT_EQ(edgert_context_set_gpu_share(nullptr, 50, &error), EDGERT_ERR_INVALID_ARGUMENT);
  edgert_context_set_device_timing(context.get(), 1);  // no device: no device time
  EXPECT_EQ(edgert_context_device_ms(context.get()), -1);
  EXPECT_EQ(edgert_context_device_ms(nullptr), -1);
  float x[4] = {1, 1, 4, -1};
  context.run({edgert_tensor{EDGERT_DTYPE_FLOAT32, 2, {1, 4}, x}});
  EXPECT_FLOAT_EQ(static_cast<const float*>(context.output(0).data)[0], 1.25f);
}

TEST(CApi, ErrorsComeBackAsStatusAndMessage) {
  edgert_engine* engine = nullptr;
  edgert_error error{};
  EXPECT_EQ(edgert_engine_load("/nonexistent/model.engine", nullptr, &engine, &error), EDGERT_ERR_IO);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::strstr(error.message, "/nonexistent/model.engine"), nullptr) << error.message;
  EXPECT_STREQ(edgert_status_string(EDGERT_ERR_CHECKSUM), "checksum mismatch");
  EXPECT_THROW(Engine("/nonexistent/model.engine"), Error);
}

TEST(CApi, WrongInputCountIsRefused) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  Engine engine(dir.file("small.engine"), &options);
  Context context(engine);
  try {
    context.run({});
    FAIL() << "a run without inputs succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), EDGERT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("1 inputs, 0 were given"), std::string::npos) << e.what();
  }
}

// Every public function given NULL, out-of-range or wrong-sized arguments returns its documented
// status (with a message where it takes an edgert_error) and never crashes.
TEST(CApi, NullArgumentsAreRefusedWithAMessage) {
  edgert_error error{};
  auto refused = [&](edgert_status status, const char* call) {
    EXPECT_EQ(status, EDGERT_ERR_INVALID_ARGUMENT) << call;
    EXPECT_EQ(error.status, EDGERT_ERR_INVALID_ARGUMENT) << call;
    EXPECT_NE(std::strstr(error.message, "NULL"), nullptr) << call << ": " << error.message;
    error = edgert_error{};
  };
  edgert_engine* engine = reinterpret_cast<edgert_engine*>(0x1);
  refused(edgert_engine_load(nullptr, nullptr, &engine, &error), "load(NULL path)");
  refused(edgert_engine_load("x.engine", nullptr, nullptr, &error), "load(NULL engine)");
  refused(edgert_context_create(nullptr, nullptr, &error), "context_create(NULL)");
  refused(edgert_context_run(nullptr, nullptr, 0, &error), "run(NULL context)");
  refused(edgert_context_bind_input(nullptr, 0, nullptr, EDGERT_MEMORY_HOST, &error), "bind_input(NULL)");
  refused(edgert_context_bind_output(nullptr, 0, nullptr, 0, EDGERT_MEMORY_HOST, &error), "bind_output(NULL)");
  refused(edgert_context_enqueue(nullptr, nullptr, &error), "enqueue(NULL)");
  refused(edgert_context_synchronize(nullptr, &error), "synchronize(NULL)");
  void* data = reinterpret_cast<void*>(0x1);
  refused(edgert_engine_allocate(nullptr, EDGERT_MEMORY_DEVICE, 16, &data, &error), "allocate(NULL)");
  // A NULL edgert_error is allowed everywhere.
  EXPECT_EQ(edgert_engine_load(nullptr, nullptr, &engine, nullptr), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_context_run(nullptr, nullptr, 0, nullptr), EDGERT_ERR_INVALID_ARGUMENT);

  edgert_tensor_info info{};
  edgert_tensor out{};
  EXPECT_EQ(edgert_engine_num_inputs(nullptr), -1);
  EXPECT_EQ(edgert_engine_num_outputs(nullptr), -1);
  EXPECT_EQ(edgert_engine_input_info(nullptr, 0, &info), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_engine_output_info(nullptr, 0, &info), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_engine_board(nullptr), nullptr);
  EXPECT_EQ(edgert_context_output(nullptr, 0, &out), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_engine_device_copies(nullptr), 0u);
  EXPECT_EQ(edgert_context_device_copies(nullptr), 0u);
  edgert_engine_release(nullptr);
  edgert_context_release(nullptr);
  edgert_context_set_cuda_graphs(nullptr, 1);
  edgert_engine_free(nullptr, EDGERT_MEMORY_DEVICE, nullptr);
  edgert_load_options_init(nullptr);
  EXPECT_STREQ(edgert_status_string(static_cast<edgert_status>(999)), "unknown status");
  EXPECT_STREQ(edgert_status_string(static_cast<edgert_status>(-1)), "unknown status");
  EXPECT_NE(edgert_version(), nullptr);
}

TEST(CApi, LoadOptionsWithoutStructSizeAreRefused) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options{};  // struct_size 0: not initialised with edgert_load_options_init
  edgert_engine* engine = reinterpret_cast<edgert_engine*>(0x1);
  edgert_error error{};
  EXPECT_EQ(edgert_engine_load(dir.file("small.engine").c_str(), &options, &engine, &error), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr) << "the out-parameter is cleared on failure";
  EXPECT_NE(std::strstr(error.message, "struct_size"), nullptr) << error.message;
}

TEST(CApi, OutOfRangeAndWrongSizedArgumentsAreRefused) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  Engine engine(dir.file("small.engine"), &options);
  const edgert_engine* e = engine.get();

  edgert_tensor_info info{};
  info.name = "untouched";
  for (int32_t index : {-1, 1, 1 << 30}) {
    EXPECT_EQ(edgert_engine_input_info(e, index, &info), EDGERT_ERR_INVALID_ARGUMENT) << index;
    EXPECT_EQ(edgert_engine_output_info(e, index, &info), EDGERT_ERR_INVALID_ARGUMENT) << index;
  }
  EXPECT_STREQ(info.name, "untouched") << "a refused call leaves info alone";
  EXPECT_EQ(edgert_engine_input_info(e, 0, nullptr), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_engine_output_info(e, 0, nullptr), EDGERT_ERR_INVALID_ARGUMENT);

  edgert_error error{};
  edgert_context* c = nullptr;
  EXPECT_EQ(edgert_context_create(e, nullptr, &error), EDGERT_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(edgert_context_create(e, &c, &error), EDGERT_OK) << error.message;

  auto expect = [&](edgert_status got, edgert_status want, const char* needle, const char* call) {
    EXPECT_EQ(got, want) << call << ": " << error.message;
    EXPECT_NE(std::strstr(error.message, needle), nullptr) << call << ": message '" << error.message
                                                           << "' should mention '" << needle << "'";
    error = edgert_error{};
  };
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  edgert_tensor good{EDGERT_DTYPE_FLOAT32, 2, {1, 4}, x};
  expect(edgert_context_run(c, nullptr, 1, &error), EDGERT_ERR_INVALID_ARGUMENT, "NULL", "run(NULL inputs)");
  expect(edgert_context_run(c, &good, 2, &error), EDGERT_ERR_INVALID_ARGUMENT, "2 were given", "run(2 inputs)");
  expect(edgert_context_run(c, &good, -1, &error), EDGERT_ERR_INVALID_ARGUMENT, "-1 were given", "run(-1 inputs)");
  edgert_tensor wrong = good;
  wrong.dims[1] = 8;
  expect(edgert_context_run(c, &wrong, 1, &error), EDGERT_ERR_SHAPE, "expected shape", "run([1, 8])");
  wrong = good;
  wrong.dtype = EDGERT_DTYPE_INT32;
  expect(edgert_context_run(c, &wrong, 1, &error), EDGERT_ERR_SHAPE, "expected dtype", "run(int32)");
  wrong = good;
  wrong.rank = EDGERT_MAX_RANK + 1;
  expect(edgert_context_run(c, &wrong, 1, &error), EDGERT_ERR_SHAPE, "rank", "run(rank 9)");
  wrong = good;
  wrong.rank = -3;
  expect(edgert_context_run(c, &wrong, 1, &error), EDGERT_ERR_SHAPE, "rank", "run(rank -3)");
  wrong = good;
  wrong.data = nullptr;
  expect(edgert_context_run(c, &wrong, 1, &error), EDGERT_ERR_INVALID_ARGUMENT, "no data", "run(NULL data)");

  edgert_tensor out{};
  EXPECT_EQ(edgert_context_output(c, -1, &out), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_context_output(c, 1, &out), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_context_output(c, 0, nullptr), EDGERT_ERR_INVALID_ARGUMENT);

  expect(edgert_context_bind_input(c, 0, nullptr, EDGERT_MEMORY_HOST, &error), EDGERT_ERR_INVALID_ARGUMENT, "NULL",
         "bind_input(NULL tensor)");
  expect(edgert_context_bind_input(c, 1, &good, EDGERT_MEMORY_HOST, &error), EDGERT_ERR_INVALID_ARGUMENT, "no input 1",
         "bind_input(1)");
  expect(edgert_context_bind_input(c, -1, &good, EDGERT_MEMORY_HOST, &error), EDGERT_ERR_INVALID_ARGUMENT, "no input -1",
         "bind_input(-1)");
  expect(edgert_context_bind_output(c, 1, x, sizeof x, EDGERT_MEMORY_HOST, &error), EDGERT_ERR_INVALID_ARGUMENT,
         "no output 1", "bind_output(1)");
  expect(edgert_context_enqueue(c, nullptr, &error), EDGERT_ERR_INVALID_ARGUMENT, "not bound", "enqueue(unbound)");

  void* data = reinterpret_cast<void*>(0x1);
  expect(edgert_engine_allocate(e, EDGERT_MEMORY_DEVICE, 16, &data, &error), EDGERT_ERR_UNSUPPORTED, "no device",
         "allocate(CPU engine)");
  EXPECT_EQ(data, nullptr);
  EXPECT_EQ(edgert_engine_allocate(e, EDGERT_MEMORY_DEVICE, 16, nullptr, &error), EDGERT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgert_engine_device_copies(e), 0u);

  // After all that the context still runs, and without a device copies nothing.
  ASSERT_EQ(edgert_context_run(c, &good, 1, &error), EDGERT_OK) << error.message;
  EXPECT_EQ(edgert_context_device_copies(c), 0u);
  ASSERT_EQ(edgert_context_output(c, 0, &out), EDGERT_OK);
  EXPECT_FLOAT_EQ(static_cast<const float*>(out.data)[0], 1.25f);
  edgert_context_release(c);
}

// An output binding too small for the output is an error naming both sizes, never an overflow
// and never a silent success that leaves the caller's buffer unwritten, on a host-only engine as
// on a device one.
TEST(CApi, AnOutputBindingTooSmallIsRefused) {
  TempDir dir;
  write_file(dir.file("small.engine"), build_engine_bytes(make_small_model(), dir.path()));
  edgert_load_options options;
  edgert_load_options_init(&options);
  std::string plugins = cpu_plugin_dir();
  options.plugin_path = plugins.c_str();
  Engine engine(dir.file("small.engine"), &options);
  Context context(engine);
  edgert_error error{};
  float x[4] = {1, 1, 4, -1};
  edgert_tensor input{EDGERT_DTYPE_FLOAT32, 2, {1, 4}, x};
  float y[5] = {-7, -7, -7, -7, -7};
  ASSERT_EQ(edgert_context_bind_input(context.get(), 0, &input, EDGERT_MEMORY_HOST, &error), EDGERT_OK) << error.message;
  ASSERT_EQ(edgert_context_bind_output(context.get(), 0, y, 2 * sizeof(float), EDGERT_MEMORY_HOST, &error), EDGERT_OK)
      << error.message;
  EXPECT_EQ(edgert_context_enqueue(context.get(), nullptr, &error), EDGERT_ERR_SHAPE) << error.message;
  EXPECT_NE(std::strstr(error.message, "16 bytes"), nullptr) << error.message;
  EXPECT_EQ(y[2], -7) << "nothing written past the binding";

  error = edgert_error{};
  ASSERT_EQ(edgert_context_bind_output(context.get(), 0, y, 4 * sizeof(float), EDGERT_MEMORY_HOST, &error), EDGERT_OK);
  ASSERT_EQ(edgert_context_enqueue(context.get(), nullptr, &error), EDGERT_OK) << error.message;
  ASSERT_EQ(edgert_context_synchronize(context.get(), &error), EDGERT_OK) << error.message;
  EXPECT_FLOAT_EQ(y[0], 1.25f) << "a binding that fits receives the output";
  EXPECT_EQ(y[4], -7);
}

}  // namespace
}  // namespace edgert::test
