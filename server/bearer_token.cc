#include "server/bearer_token.h"

#include <cctype>

#include <spool/secret_file.h>

#include <openssl/crypto.h>

namespace spool::http {

Status LoadBearerToken(const std::string& path, std::string* token) {
  return LoadSecretFile("server.token_file", path, token);
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
