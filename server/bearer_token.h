// The bearer token that guards spoold's mutations: loading it from its file
// and checking a request's Authorization header against it.
//
// Thread safety: free functions on values; safe to call concurrently.

#ifndef SPOOL_SERVER_BEARER_TOKEN_H_
#define SPOOL_SERVER_BEARER_TOKEN_H_

#include <string>
#include <string_view>

#include <spool/status.h>

namespace spool::http {

// Reads the token: the file's first line, without surrounding spaces. The
// file must be a regular file that neither its group nor others may read
// or write (mode 0600 or 0400, say): otherwise InvalidArgument saying what
// the mode is and what to run. NotFound or IOError when it cannot be read,
// InvalidArgument when the token is empty or shorter than 16 bytes.
// REQUIRES: token != nullptr.
Status LoadBearerToken(const std::string& path, std::string* token);

// Whether `authorization` (the header's value) is "Bearer <token>". The
// token is compared in constant time (CRYPTO_memcmp), so the time taken
// tells nothing about how much of it matched. False when token is empty.
bool BearerMatches(std::string_view authorization, std::string_view token);

}  // namespace spool::http

#endif  // SPOOL_SERVER_BEARER_TOKEN_H_
