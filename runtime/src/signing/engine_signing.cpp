#include "engine_signing.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine_file.h"

namespace edgert::signing {
namespace {

void init_sodium() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
}

std::string to_hex(const uint8_t* data, size_t size) {
  std::string out(size * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), data, size);
  out.pop_back();
  return out;
}

std::vector<uint8_t> from_hex(const std::string& hex, size_t bytes, const std::string& where) {
  std::vector<uint8_t> out(bytes);
  size_t got = 0;
  if (sodium_hex2bin(out.data(), out.size(), hex.c_str(), hex.size(), nullptr, &got, nullptr) != 0 || got != bytes)
    throw std::runtime_error(where + ": expected " + std::to_string(bytes * 2) + " hex digits");
  return out;
}

// "ed25519 HEX NAME" -> {hex, name}.
std::pair<std::string, std::string> read_key_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read key file '" + path + "': " + std::strerror(errno));
  std::string algorithm, hex, name;
  in >> algorithm >> hex >> name;
  if (algorithm != "ed25519" || hex.empty())
    throw std::runtime_error("key file '" + path + "' is not an edgert key (expected 'ed25519 HEX NAME')");
  return {hex, name};
}

void write_private_file(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot write '" + path + "'");
}

// SHA-256 of the engine with [sig_offset, sig_offset + 64) and the trailer checksum read as zero.
void signed_digest(const uint8_t* file, size_t size, size_t sig_offset, uint8_t out[crypto_hash_sha256_BYTES]) {
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  const uint8_t zeros[kSignatureBytes] = {};
  size_t body = size - sizeof(EngineTrailer);
  crypto_hash_sha256_update(&state, file, sig_offset);
  crypto_hash_sha256_update(&state, zeros, kSignatureBytes);
  crypto_hash_sha256_update(&state, file + sig_offset + kSignatureBytes, body - sig_offset - kSignatureBytes);
  EngineTrailer trailer;
  std::memcpy(&trailer, file + body, sizeof trailer);
  trailer.checksum = 0;
  crypto_hash_sha256_update(&state, reinterpret_cast<const uint8_t*>(&trailer), sizeof trailer);
  crypto_hash_sha256_final(&state, out);
}

// Where the signature bytes sit in the file, after checking the table is well-formed.
const fb::Signature* locate(const uint8_t* file, size_t size, size_t* sig_offset) {
  const fb::Engine* engine = fb::GetEngine(file);
  const fb::Signature* s = engine->signature();
  if (!s) return nullptr;
  if (!s->signature() || s->signature()->size() != kSignatureBytes || !s->public_key() ||
      s->public_key()->size() != kPublicKeyBytes || !s->algorithm() || s->algorithm()->str() != "ed25519")
    throw std::runtime_error("malformed signature table (expected ed25519, a 32-byte key and a 64-byte signature)");
  *sig_offset = static_cast<size_t>(s->signature()->data() - file);
  if (*sig_offset + kSignatureBytes > size - sizeof(EngineTrailer)) throw std::runtime_error("signature outside the file body");
  return s;
}

}  // namespace

std::string sha256_hex(const void* data, size_t size) {
  init_sodium();
  uint8_t digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, static_cast<const uint8_t*>(data), size);
  return to_hex(digest, sizeof digest);
}

std::string sha256_file(const std::string& path) {
  init_sodium();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot read '" + path + "': " + std::strerror(err));
    }
    if (n == 0) break;
    crypto_hash_sha256_update(&state, chunk.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  uint8_t digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state, digest);
  return to_hex(digest, sizeof digest);
}

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

KeyPair generate_key_pair(const std::string& directory, const std::string& name) {
  init_sodium();
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                          std::string::npos)
    throw std::runtime_error("key name '" + name + "' must be letters, digits, '_', '.' or '-'");
  KeyPair key;
  key.name = name;
  key.public_key.resize(kPublicKeyBytes);
  key.secret_key.resize(kSecretKeyBytes);
  crypto_sign_keypair(key.public_key.data(), key.secret_key.data());
  std::string base = (directory.empty() ? std::string(".") : directory) + "/" + name;
  write_private_file(base + ".key", "ed25519 " + to_hex(key.secret_key.data(), kSecretKeyBytes) + " " + name + "\n", 0600);
  write_private_file(base + ".pub", "ed25519 " + to_hex(key.public_key.data(), kPublicKeyBytes) + " " + name + "\n", 0644);
  return key;
}

KeyPair read_secret_key(const std::string& path) {
  init_sodium();
  auto [hex, name] = read_key_line(path);
  KeyPair key;
  key.name = name;
  key.secret_key = from_hex(hex, kSecretKeyBytes, "secret key '" + path + "'");
  key.public_key.resize(kPublicKeyBytes);
  crypto_sign_ed25519_sk_to_pk(key.public_key.data(), key.secret_key.data());
  return key;
}

PublicKey read_public_key(const std::string& path) {
  auto [hex, name] = read_key_line(path);
  PublicKey key;
  key.name = name;
  key.path = path;
  key.bytes = from_hex(hex, kPublicKeyBytes, "public key '" + path + "'");
  return key;
}

std::vector<PublicKey> read_trusted_keys(const std::string& directory, std::vector<std::string>* problems) {
  std::vector<PublicKey> keys;
  DIR* dir = opendir(directory.c_str());
  if (!dir) return keys;
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".pub") == 0) names.push_back(n);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    try {
      keys.push_back(read_public_key(directory + "/" + n));
    } catch (const std::exception& e) {
      if (problems) problems->push_back(e.what());
    }
  }
  return keys;
}

void sign_engine(std::vector<uint8_t>& bytes, const KeyPair& key) {
  init_sodium();
  size_t offset = 0;
  const fb::Signature* s = locate(bytes.data(), bytes.size(), &offset);
  if (!s) throw std::runtime_error("the engine has no signature table to fill");
  if (!std::equal(key.public_key.begin(), key.public_key.end(), s->public_key()->begin()))
    throw std::runtime_error("the engine's signature table names another public key");
  uint8_t digest[crypto_hash_sha256_BYTES];
  signed_digest(bytes.data(), bytes.size(), offset, digest);
  uint8_t signature[kSignatureBytes];
  crypto_sign_detached(signature, nullptr, digest, sizeof digest, key.secret_key.data());
  std::memcpy(bytes.data() + offset, signature, kSignatureBytes);
  size_t body = bytes.size() - sizeof(EngineTrailer);
  EngineTrailer trailer;
  std::memcpy(&trailer, bytes.data() + body, sizeof trailer);
  trailer.checksum = engine_checksum(bytes.data(), bytes.size());
  std::memcpy(bytes.data() + body, &trailer, sizeof trailer);
}

SignatureCheck check_engine_signature(const uint8_t* file, size_t size, const std::vector<PublicKey>& trusted) {
  init_sodium();
  SignatureCheck check;
  size_t offset = 0;
  const fb::Signature* s = nullptr;
  try {
    s = locate(file, size, &offset);
  } catch (const std::exception& e) {
    check.state = SignatureState::Invalid;
    check.message = e.what();
    return check;
  }
  if (!s) return check;
  check.signer = s->signer() ? s->signer()->str() : "";
  const PublicKey* key = nullptr;
  for (const PublicKey& k : trusted)
    if (std::equal(k.bytes.begin(), k.bytes.end(), s->public_key()->begin())) key = &k;
  uint8_t digest[crypto_hash_sha256_BYTES];
  signed_digest(file, size, offset, digest);
  // Checked against the key the file carries first, so a tampered file reads as tampered
  // whether or not its key is trusted here.
  if (crypto_sign_verify_detached(s->signature()->data(), digest, sizeof digest, s->public_key()->data()) != 0) {
    check.state = SignatureState::Invalid;
    check.message = "the ed25519 signature by '" + check.signer + "' does not match the file's contents (tampered?)";
    return check;
  }
  if (!key) {
    check.state = SignatureState::UnknownKey;
    check.message = "signed by '" + check.signer + "' (key " + to_hex(s->public_key()->data(), 8) +
                    "...), which is not a trusted key";
    return check;
  }
  check.state = SignatureState::Valid;
  check.signer = key->name;
  check.key_path = key->path;
  return check;
}

}  // namespace edgert::signing
