// zeusd's HS256 signing key: the secret itself (wiped when destroyed) and loading it from
// --signing-key-path with the checks on the file (key_file.cpp). The tokens signed with it are
// auth.hpp's.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace zeus::daemon::auth {

// RFC 7518 §3.2: an HS256 key must be at least as long as the hash output.
inline constexpr std::size_t kMinSigningKeyBytes = 32;

// The HS256 secret. Its bytes are wiped when it is destroyed.
class SigningKey {
 public:
  // Throws zeus::Error (kInvalidArgument) when `bytes` is shorter than kMinSigningKeyBytes.
  explicit SigningKey(std::string bytes);
  // The reference zeusd's rule (--allow-weak-signing-key): any non-empty key.
  struct AnyLength {};
  SigningKey(std::string bytes, AnyLength);
  ~SigningKey();
  SigningKey(const SigningKey&) = default;
  SigningKey& operator=(const SigningKey&) = default;
  SigningKey(SigningKey&&) = default;
  SigningKey& operator=(SigningKey&&) = default;

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Loads --signing-key-path: the file's bytes with trailing "\n"/"\r\n" line endings stripped.
// Throws zeus::Error with what was wrong and what to do:
// - kNotFound / kIo: the file is missing or unreadable, or not a regular file;
// - kNoPermission: group or others have any access (names the mode and `chmod 600`), or the
//   file is owned by neither root nor the current user;
// - kInvalidArgument: the key is empty or shorter than kMinSigningKeyBytes.
// With `reference_rules` (--allow-weak-signing-key: what the reference zeusd accepts) only an
// empty or unreadable file is an error; access by group or others, another owner and a short key
// are logged as warnings.
SigningKey load_signing_key(const std::filesystem::path& path, bool reference_rules = false);

}  // namespace zeus::daemon::auth
