#include "cache/bundle/bundle_signature.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cerrno>
#include <cstring>

#include "base/env.hpp"
#include "kiln/error.hpp"

namespace kiln::bundle {

namespace {

constexpr std::size_t min_key_bytes = 16;
constexpr std::size_t max_key_bytes = 4096;

}  // namespace

SigningKey read_signing_key(const std::string& path) {
  const std::string what = "signing key file '" + path + "' (KILN_REMOTE_CACHE_KEY_FILE)";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_error(what + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw_error(what + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) throw_error(what + ": not a regular file");
  if (info.st_uid != ::geteuid())
    throw_error(what + ": owned by uid " + std::to_string(info.st_uid) + ", expected this user (uid " +
                std::to_string(::geteuid()) + ")");
  if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    throw_error(what + ": mode " + mode + " lets others read or write it; expected 0600 (chmod 600)");
  }
  if (info.st_size < 0 || static_cast<std::uint64_t>(info.st_size) > max_key_bytes)
    throw_error(what + ": " + std::to_string(info.st_size) + " bytes, expected at most " + std::to_string(max_key_bytes));
  SigningKey key;
  key.file = path;
  key.bytes.resize(static_cast<std::size_t>(info.st_size));
  std::size_t done = 0;
  while (done < key.bytes.size()) {
    const ssize_t got = ::read(fd, key.bytes.data() + done, key.bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw_error(what + ": cannot read: " + (got < 0 ? std::strerror(errno) : "shorter than its size"));
    done += static_cast<std::size_t>(got);
  }
  if (!key.bytes.empty() && key.bytes.back() == '\n') key.bytes.pop_back();
  if (key.bytes.size() < min_key_bytes)
    throw_error(what + ": " + std::to_string(key.bytes.size()) + " key bytes, expected at least " +
                std::to_string(min_key_bytes));
  return key;
}

std::optional<SigningKey> signing_key_from_env() {
  const auto path = env_value("KILN_REMOTE_CACHE_KEY_FILE");
  if (!path) return std::nullopt;
  return read_signing_key(*path);
}

Signature sign(const SigningKey& key, const std::uint8_t* data, std::size_t size) {
  Signature out{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.bytes.data(), static_cast<int>(key.bytes.size()), data, size, out.data(), &length) ==
          nullptr ||
      length != out.size())
    throw_error("HMAC-SHA256 failed (libcrypto)");
  return out;
}

bool signature_matches(const SigningKey& key, const std::uint8_t* data, std::size_t size, const Signature& signature) {
  const Signature expected = sign(key, data, size);
  return CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) == 0;
}

}  // namespace kiln::bundle
