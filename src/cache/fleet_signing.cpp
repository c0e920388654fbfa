// The fleet key file's rules and HMAC-SHA256 from OpenSSL's libcrypto, never hand-written.
#include "cache/fleet_signing.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/config.hpp"
#include "kiln/error.hpp"

namespace kiln {

namespace {

constexpr std::size_t min_key_bytes = 16;
constexpr std::size_t max_key_file_bytes = std::size_t{1} << 20;

const unsigned char* bytes_of(std::string_view text) { return reinterpret_cast<const unsigned char*>(text.data()); }

}  // namespace

std::optional<std::string> fleet_key_setting() { return current_config().remote_cache_key_file; }

std::string read_fleet_key_file(const std::string& path) {
  if (path.empty())
    throw_error(std::string(fleet_key_variable) +
                " is set but empty: name the signing key file, or unset the variable for unsigned entries");
  const std::string what = "signing key file '" + path + "' (" + fleet_key_variable + ")";
  // Why O_NOFOLLOW and O_NONBLOCK: the checks below are on what was opened, not on a link's target,
  // and a FIFO planted at the path must not hang the open; fstat then refuses it.
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
    throw_error(what + ": mode " + mode +
                " lets group or others read or write it; expected 0600 or 0400 (chmod 600)");
  }
  if (static_cast<std::uint64_t>(info.st_size) > max_key_file_bytes)
    throw_error(what + ": " + std::to_string(info.st_size) + " bytes, expected at most 1 MiB");
  std::string key(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < key.size()) {
    const ssize_t got = ::read(fd, key.data() + done, key.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw_error(what + ": cannot read: " + (got < 0 ? std::strerror(errno) : "shorter than its size"));
    done += static_cast<std::size_t>(got);
  }
  if (!key.empty() && key.back() == '\n') key.pop_back();
  if (key.size() < min_key_bytes)
    throw_error(what + ": " + std::to_string(key.size()) + " key bytes, expected at least " +
                std::to_string(min_key_bytes));
  return key;
}

Hmac hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  // Why EVP_MAC and not HMAC(): the parts are fed one by one instead of copied into one buffer, and
  // HMAC_CTX is deprecated in OpenSSL 3.
  const std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr), &EVP_MAC_free);
  const std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> context(
      mac ? EVP_MAC_CTX_new(mac.get()) : nullptr, &EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  bool ok = context && EVP_MAC_init(context.get(), bytes_of(key), key.size(), params) == 1;
  for (const std::string_view part : parts) ok = ok && EVP_MAC_update(context.get(), bytes_of(part), part.size()) == 1;
  Hmac out{};
  std::size_t length = 0;
  ok = ok && EVP_MAC_final(context.get(), out.data(), &length, out.size()) == 1 && length == out.size();
  if (!ok) throw_error("HMAC-SHA256 failed (libcrypto)");
  return out;
}

bool hmac_sha256_matches(std::string_view key, std::initializer_list<std::string_view> parts, const void* mac) {
  const Hmac expected = hmac_sha256(key, parts);
  // Why CRYPTO_memcmp: a compare that stops at the first difference would let a forger find a
  // valid MAC byte by byte from the time a refusal takes.
  return CRYPTO_memcmp(expected.data(), mac, expected.size()) == 0;
}

}  // namespace kiln
