// Plugins arrive through dlopen; the loader must refuse what it should and say why.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "plugin_loader.h"
#include "test_support.h"

namespace edgert::test {
namespace {

bool contains(const char* haystack, const std::string& needle) { return std::strstr(haystack, needle.c_str()) != nullptr; }

TEST(PluginLoader, LoadsTheCpuPluginAndFindsItsKernels) {
  edgert_error error{};
  const LoadedPlugin* cpu = load_plugin("cpu", {cpu_plugin_dir()}, &error);
  ASSERT_NE(cpu, nullptr) << error.message;
  EXPECT_EQ(cpu->table->abi_version, EDGERT_PLUGIN_ABI_VERSION);
  EXPECT_STREQ(cpu->table->name, "cpu");
  EXPECT_NE(cpu->find_kernel("ref-conv"), nullptr);
  EXPECT_EQ(cpu->find_kernel("no-such-kernel"), nullptr);
}

TEST(PluginLoader, MissingPluginNamesTheFileAndEveryDirectorySearched) {
  TempDir a, b;
  edgert_error error{};
  EXPECT_EQ(load_plugin("nosuch", {a.path(), b.path()}, &error), nullptr);
  EXPECT_EQ(error.status, EDGERT_ERR_PLUGIN);
  EXPECT_TRUE(contains(error.message, "libedgert_plugin_nosuch.so")) << error.message;
  EXPECT_TRUE(contains(error.message, a.path())) << error.message;
  EXPECT_TRUE(contains(error.message, b.path())) << error.message;
}

TEST(PluginLoader, RefusesAWorldWritableDirectory) {
  TempDir dir;
  std::string copy = dir.file("libedgert_plugin_writable.so");
  write_file(copy, read_file(cpu_plugin_dir() + "/libedgert_plugin_cpu.so"));
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  edgert_error error{};
  EXPECT_EQ(load_plugin("writable", {dir.path()}, &error), nullptr);
  EXPECT_EQ(error.status, EDGERT_ERR_PLUGIN);
  EXPECT_TRUE(contains(error.message, "world-writable")) << error.message;

  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(copy.c_str(), 0666), 0);
  EXPECT_EQ(load_plugin("writable", {dir.path()}, &error), nullptr);
  EXPECT_TRUE(contains(error.message, "world-writable")) << error.message;
}

TEST(PluginLoader, RefusesAnotherAbiVersion) {
  edgert_error error{};
  EXPECT_EQ(load_plugin("badabi", {binary_dir() + "/test_plugins/badabi"}, &error), nullptr);
  EXPECT_EQ(error.status, EDGERT_ERR_VERSION);
  // bad_abi_plugin.c declares EDGERT_PLUGIN_ABI_VERSION + 41.
  EXPECT_TRUE(contains(error.message, "ABI version " + std::to_string(EDGERT_PLUGIN_ABI_VERSION + 41u))) << error.message;
}

TEST(PluginLoader, RefusesAFileThatIsNotASharedLibrary) {
  TempDir dir;
  write_file(dir.file("libedgert_plugin_junk.so"), {'n', 'o', 't', ' ', 'E', 'L', 'F'});
  edgert_error error{};
  EXPECT_EQ(load_plugin("junk", {dir.path()}, &error), nullptr);
  EXPECT_EQ(error.status, EDGERT_ERR_PLUGIN);
  EXPECT_TRUE(contains(error.message, "cannot load plugin 'junk'")) << error.message;
}

TEST(PluginLoader, SearchPathComesFromTheExplicitListFirst) {
  auto dirs = plugin_search_path("/a:/b::/a");
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/a");
  EXPECT_EQ(dirs[1], "/b");
}

}  // namespace
}  // namespace edgert::test
