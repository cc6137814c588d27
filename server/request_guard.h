// Who may ask what of spoold: the Host names it answers to, and the
// bearer tokens that open reads and writes (docs/security.md).
//
// Thread safety: immutable after Create; safe to use concurrently.

#ifndef SPOOL_SERVER_REQUEST_GUARD_H_
#define SPOOL_SERVER_REQUEST_GUARD_H_

#include <string>
#include <string_view>
#include <vector>

#include <spool/http/server_options.h>
#include <spool/status.h>

namespace spool::http {

// What a request's Authorization header proves.
enum class Caller {
  kNobody,  // no token, or a wrong one
  kReader,  // the read token: every GET
  kWriter,  // the token: everything
};

class RequestGuard {
 public:
  // Loads the token files and builds the Host allow-list. InvalidArgument
  // naming the key when a listen address beyond loopback has no
  // token_file, or is not allowed plain HTTP by allow_insecure; the token
  // loaders' errors otherwise (LoadBearerToken).
  static Status Create(const ServerOptions& options, RequestGuard* guard);

  // Whether `host_header` (the Host field's value, port included) names
  // this server: a loopback name or address, the listen address, or one of
  // allowed_hosts; compared without case and without the port.
  bool HostAllowed(std::string_view host_header) const;

  // What `authorization` (the header's value) proves; constant-time.
  Caller Identify(std::string_view authorization) const;

  // Whether any token is configured: then every guarded request needs one.
  bool locked() const { return !token_.empty() || !read_token_.empty(); }
  // Whether mutations are possible at all (a write token is configured).
  bool writable() const { return !token_.empty(); }

  // Whether `authorization` carries the replication secret
  // (ServerOptions::replication_secret_file); constant-time. False when
  // none is configured: then the replication routes are closed.
  bool IsStandby(std::string_view authorization) const;
  bool serves_standbys() const { return !replication_secret_.empty(); }

 private:
  std::string token_;
  std::string replication_secret_;
  std::string read_token_;
  std::vector<std::string> hosts_;  // lower case, no port
};

// The name of a Host field's value, without its port, in lower case:
// "Example.COM:80" -> "example.com", "[::1]:8470" -> "[::1]". Empty when
// malformed.
std::string HostName(std::string_view host_header);

}  // namespace spool::http

#endif  // SPOOL_SERVER_REQUEST_GUARD_H_
