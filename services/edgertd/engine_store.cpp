#include "engine_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "engine_signing.h"

namespace edgert::daemon {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory '" + dir + "'");
  int r = fsync(fd);
  ::close(fd);
  if (r != 0) fail("cannot fsync directory '" + dir + "'");
}

void make_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) fail("cannot create '" + dir + "'");
}

void write_all(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write '" + path + "'");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// tmp -> fsync -> rename -> fsync(dir). `fill` writes the content into the open fd.
template <typename Fill>
void replace_durably(const std::string& dir, const std::string& name, Fill fill, const char* crash_tmp,
                     const char* crash_renamed) {
  std::string final_path = dir + "/" + name;
  std::string tmp = dir + "/.tmp." + name + "." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) fail("cannot create '" + tmp + "'");
  try {
    fill(fd, tmp);
    EngineStore::crash_point(crash_tmp);
    if (fsync(fd) != 0) fail("cannot fsync '" + tmp + "'");
  } catch (...) {
    ::close(fd);
    unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (rename(tmp.c_str(), final_path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    errno = err;
    fail("cannot rename '" + tmp + "' to '" + final_path + "'");
  }
  EngineStore::crash_point(crash_renamed);
  fsync_directory(dir);
}

void remove_temporaries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, ".tmp.", 5) == 0) stale.push_back(dir + "/" + e->d_name);
  closedir(d);
  for (const std::string& path : stale) unlink(path.c_str());
}

}  // namespace

void EngineStore::crash_point(const char* point) {
  const char* want = std::getenv("EDGERTD_DEBUG_CRASH_AT");
  if (point && want && std::strcmp(want, point) == 0) {
    std::fprintf(stderr, "debug: killing myself at '%s' (EDGERTD_DEBUG_CRASH_AT)\n", point);
    kill(getpid(), SIGKILL);
  }
}

EngineStore::EngineStore(const std::string& state_dir)
    : engines_dir_(state_dir + "/engines"), active_dir_(state_dir + "/active") {
  make_dir(state_dir);
  make_dir(engines_dir_);
  make_dir(active_dir_);
  remove_temporaries(engines_dir_);
  remove_temporaries(active_dir_);
}

bool EngineStore::contains(const std::string& sha256) const {
  struct stat st {};
  return signing::is_sha256_hex(sha256) && stat(path_of(sha256).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string EngineStore::install(const std::string& source, const std::string& expected_sha256, bool* added) {
  if (added) *added = false;
  int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) fail("cannot open '" + source + "'");
  struct stat st {};
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    throw std::runtime_error("'" + source + "' is not a regular file");
  }
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
  // Copied under a temporary name first: the final name is the hash, known only at the end.
  // ".tmp." so that a crash between the two renames leaves nothing the next start keeps.
  std::string tmp_name = ".tmp.incoming." + std::to_string(getpid()) + ".engine";
  std::string sha;
  try {
    replace_durably(engines_dir_, tmp_name, [&](int out, const std::string& tmp) {
      crypto_hash_sha256_state state;
      crypto_hash_sha256_init(&state);
      std::vector<uint8_t> chunk(1 << 20);
      for (;;) {
        ssize_t n = ::read(in, chunk.data(), chunk.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("cannot read '" + source + "'");
        if (n == 0) break;
        crypto_hash_sha256_update(&state, chunk.data(), static_cast<size_t>(n));
        write_all(out, chunk.data(), static_cast<size_t>(n), tmp);
      }
      uint8_t digest[crypto_hash_sha256_BYTES];
      crypto_hash_sha256_final(&state, digest);
      char hex[2 * crypto_hash_sha256_BYTES + 1];
      sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
      sha = hex;
      if (!expected_sha256.empty() && sha != expected_sha256)
        throw std::runtime_error("'" + source + "' has sha256 " + sha + ", expected " + expected_sha256 +
                                 " (incomplete or corrupted copy)");
    }, "install-tmp", nullptr);
  } catch (...) {
    ::close(in);
    unlink((engines_dir_ + "/" + tmp_name).c_str());
    throw;
  }
  ::close(in);
  std::string from = engines_dir_ + "/" + tmp_name;
  if (contains(sha)) {
    unlink(from.c_str());
    return sha;
  }
  if (rename(from.c_str(), path_of(sha).c_str()) != 0) {
    int err = errno;
    unlink(from.c_str());
    errno = err;
    fail("cannot rename '" + from + "' into the store");
  }
  crash_point("install-renamed");
  fsync_directory(engines_dir_);
  if (added) *added = true;
  return sha;
}

std::vector<std::string> EngineStore::list() const {
  std::vector<std::string> out;
  DIR* dir = opendir(engines_dir_.c_str());
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    const std::string suffix = ".engine";
    if (name.size() != 64 + suffix.size() || name.compare(64, suffix.size(), suffix) != 0) continue;
    if (signing::is_sha256_hex(name.substr(0, 64))) out.push_back(name.substr(0, 64));
  }
  closedir(dir);
  return out;
}

void EngineStore::remove(const std::string& sha256) {
  if (!signing::is_sha256_hex(sha256)) throw std::runtime_error("'" + sha256 + "' is not a sha256");
  if (unlink(path_of(sha256).c_str()) != 0) fail("cannot delete '" + path_of(sha256) + "'");
  fsync_directory(engines_dir_);
}

std::optional<ActiveRecord> EngineStore::read_active(const std::string& pipeline) const {
  std::ifstream in(active_dir_ + "/" + pipeline + ".json");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !signing::is_sha256_hex(j.value("sha256", ""))) return std::nullopt;
  return ActiveRecord{j.value("sha256", ""), j.value("previous", ""), j.value("config_engine", "")};
}

void EngineStore::write_active(const std::string& pipeline, const ActiveRecord& record) {
  std::string text = nlohmann::json{{"sha256", record.sha256}, {"previous", record.previous}, {"config_engine", record.config_engine}}.dump() + "\n";
  replace_durably(active_dir_, pipeline + ".json", [&](int fd, const std::string& tmp) {
    write_all(fd, reinterpret_cast<const uint8_t*>(text.data()), text.size(), tmp);
  }, "active-tmp", "active-renamed");
}

}  // namespace edgert::daemon
