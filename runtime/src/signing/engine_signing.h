// Engine identity and signatures (libsodium): the SHA-256 that names an engine in the daemon's
// store, ed25519 keys, and signing/verifying an engine file's Signature table (engine.fbs).
// Not part of libedgert: the runtime verifies structure and checksum, signature policy belongs
// to whoever loads engines (edgertd), and only the builder signs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace edgert::signing {

constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kSecretKeyBytes = 64;
constexpr size_t kSignatureBytes = 64;

// Lower-case hex SHA-256 of `size` bytes.
std::string sha256_hex(const void* data, size_t size);
// SHA-256 of a whole file; throws std::runtime_error naming the file.
std::string sha256_file(const std::string& path);
bool is_sha256_hex(const std::string& text);

struct PublicKey {
  std::string name;                    // the signer's name (from the key file)
  std::vector<uint8_t> bytes;          // kPublicKeyBytes
  std::string path;                    // where it was read from
};

struct KeyPair {
  std::string name;
  std::vector<uint8_t> public_key, secret_key;
};

// Makes a new key pair and writes NAME.key (secret, mode 0600) and NAME.pub (public) into
// `directory` (files: one line "ed25519 HEX NAME"). Throws std::runtime_error.
KeyPair generate_key_pair(const std::string& directory, const std::string& name);
// Reads a secret (.key) or public (.pub) key file. Throws std::runtime_error naming the file.
KeyPair read_secret_key(const std::string& path);
PublicKey read_public_key(const std::string& path);
// Every *.pub file of `directory` (missing directory: none). Unreadable or malformed files are
// reported through `problems` and skipped.
std::vector<PublicKey> read_trusted_keys(const std::string& directory, std::vector<std::string>* problems);

// Signs an engine image in place: `bytes` must carry a Signature table whose signature vector
// is kSignatureBytes long (the writer puts zeros there); fills it and recomputes the trailer
// checksum. Throws std::runtime_error.
void sign_engine(std::vector<uint8_t>& bytes, const KeyPair& key);

enum class SignatureState { Unsigned, Valid, Invalid, UnknownKey };
struct SignatureCheck {
  SignatureState state = SignatureState::Unsigned;
  std::string signer;      // the trusted key's name when Valid, else the name the file claims
  std::string key_path;    // the trusted key file that verified it
  std::string message;     // why, for Invalid and UnknownKey
};
// Checks the signature of an engine image that already passed EngineFile verification.
SignatureCheck check_engine_signature(const uint8_t* file, size_t size, const std::vector<PublicKey>& trusted);

}  // namespace edgert::signing
