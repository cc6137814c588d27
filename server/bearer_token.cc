#include "server/bearer_token.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

#include <openssl/crypto.h>

namespace spool::http {

Status LoadBearerToken(const std::string& path, std::string* token) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    std::string reason = std::strerror(errno);
    if (errno == ENOENT)
      return Status::NotFound("server.token_file " + path + ": " + reason);
    return Status::IOError("server.token_file " + path + ": " + reason);
  }
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidArgument("server.token_file " + path +
                                   ": not a regular file");
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o",
                  static_cast<unsigned>(info.st_mode & 07777));
    return Status::InvalidArgument(
        "server.token_file " + path + " has mode " + mode +
        ": group or others may access it; run chmod 600 " + path);
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    if (in.bad())
      return Status::IOError("server.token_file " + path + ": cannot be read");
  }
  const char* space = " \t\r\n";
  size_t begin = line.find_first_not_of(space);
  size_t end = line.find_last_not_of(space);
  std::string value =
      begin == std::string::npos ? "" : line.substr(begin, end - begin + 1);
  if (value.size() < 16) {
    return Status::InvalidArgument(
        "server.token_file " + path +
        ": the token (its first line) must be at least 16 bytes, "
        "e.g. from `openssl rand -hex 32`");
  }
  *token = std::move(value);
  return Status::OK();
}

bool BearerMatches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "Bearer ";
  if (token.empty() || authorization.size() != kScheme.size() + token.size())
    return false;
  // The scheme is case-insensitive (RFC 7235); not secret.
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i]))) {
      return false;
    }
  }
  return CRYPTO_memcmp(authorization.data() + kScheme.size(), token.data(),
                       token.size()) == 0;
}

}  // namespace spool::http
