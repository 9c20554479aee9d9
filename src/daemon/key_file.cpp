// The HS256 signing key: its length rule, wiping, and loading --signing-key-path with the checks
// on the file (key_file.hpp).
#include "daemon/key_file.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

std::string strip_trailing_line_endings(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

std::string mode_octal(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

}  // namespace

SigningKey::SigningKey(std::string bytes, AnyLength) : bytes_(std::move(bytes)) {}

SigningKey::SigningKey(std::string bytes) : bytes_(std::move(bytes)) {
  if (bytes_.size() < kMinSigningKeyBytes) {
    std::size_t size = bytes_.size();
    OPENSSL_cleanse(bytes_.data(), bytes_.size());
    throw Error(ErrorKind::kInvalidArgument,
                "the signing key is " + std::to_string(size) + " bytes; HS256 needs at least " +
                    std::to_string(kMinSigningKeyBytes) +
                    " (make one with `(umask 077; openssl rand -base64 48 > KEYFILE)`)");
  }
}

SigningKey::~SigningKey() {
  if (!bytes_.empty()) {
    OPENSSL_cleanse(bytes_.data(), bytes_.size());
  }
}

SigningKey load_signing_key(const std::filesystem::path& path, bool reference_rules) {
  const std::string name = path.string();
  // O_NONBLOCK: a FIFO given as the key must be refused below, not wait for a writer forever.
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int error = errno;
    ErrorKind kind = error == ENOENT   ? ErrorKind::kNotFound
                     : error == EACCES ? ErrorKind::kNoPermission
                                       : ErrorKind::kIo;
    throw Error(kind, "cannot open the signing key file " + name + ": " + std::strerror(error) +
                          " (check --signing-key-path)");
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  // Checked on the open descriptor, so the file cannot be swapped between check and read.
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    throw Error(ErrorKind::kIo,
                "cannot stat the signing key file " + name + ": " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    throw Error(ErrorKind::kInvalidArgument, "the signing key path " + name +
                                                 " is not a regular file; point " +
                                                 "--signing-key-path at the key file");
  }
  // Under the reference's rules these are warnings (--allow-weak-signing-key).
  const auto refuse_or_warn = [&](ErrorKind kind, const std::string& message) {
    if (!reference_rules) {
      throw Error(kind, message);
    }
    log().warn("zeusd: {} (accepted: --allow-weak-signing-key)", message);
  };
  if ((info.st_mode & 077) != 0) {
    refuse_or_warn(ErrorKind::kNoPermission,
                   "the signing key file " + name + " has mode " + mode_octal(info.st_mode) +
                       ", so group or others can access it; anyone who reads it can mint "
                       "tokens. Run `chmod 600 " +
                       name + "`");
  }
  if (info.st_uid != 0 && info.st_uid != ::geteuid()) {
    refuse_or_warn(ErrorKind::kNoPermission,
                   "the signing key file " + name + " is owned by uid " +
                       std::to_string(info.st_uid) + ", neither root nor this user (uid " +
                       std::to_string(::geteuid()) + "); run `chown root " + name + "`");
  }

  std::string contents;
  std::array<char, 4096> buffer{};
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int error = errno;
      OPENSSL_cleanse(contents.data(), contents.size());
      throw Error(ErrorKind::kIo,
                  "cannot read the signing key file " + name + ": " + std::strerror(error));
    }
    if (n == 0) {
      break;
    }
    contents.append(buffer.data(), static_cast<std::size_t>(n));
    if (contents.size() > (1u << 20)) {
      OPENSSL_cleanse(contents.data(), contents.size());
      OPENSSL_cleanse(buffer.data(), buffer.size());
      throw Error(ErrorKind::kInvalidArgument,
                  "the signing key file " + name + " is larger than 1 MiB; is this the key?");
    }
  }
  OPENSSL_cleanse(buffer.data(), buffer.size());

  std::string key = strip_trailing_line_endings(std::move(contents));
  if (key.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the signing key file " + name + " is empty; write a secret of at least " +
                    std::to_string(kMinSigningKeyBytes) +
                    " bytes, e.g. `(umask 077; openssl rand -base64 48 > " + name + ")`");
  }
  if (key.size() < kMinSigningKeyBytes && reference_rules) {
    log().warn(
        "zeusd: the signing key in {} is {} bytes, shorter than the {} HS256 needs; tokens "
        "signed with it are easier to forge (accepted: --allow-weak-signing-key)",
        name, key.size(), kMinSigningKeyBytes);
    return SigningKey(std::move(key), SigningKey::AnyLength{});
  }
  if (key.size() < kMinSigningKeyBytes) {
    std::size_t size = key.size();
    OPENSSL_cleanse(key.data(), key.size());
    throw Error(ErrorKind::kInvalidArgument,
                "the signing key in " + name + " is " + std::to_string(size) +
                    " bytes; HS256 needs at least " + std::to_string(kMinSigningKeyBytes) +
                    ". Make a new one with `(umask 077; openssl rand -base64 48 > " + name +
                    ")` and issue new tokens");
  }
  return SigningKey(std::move(key));
}

}  // namespace zeus::daemon::auth
