#include "server/request_guard.h"

#include <algorithm>
#include <cctype>

#include "server/address_rules.h"
#include "server/bearer_token.h"

namespace spool::http {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

// HOST of a "HOST:PORT" listen address, as written (brackets kept).
std::string ListenHost(const std::string& listen) {
  size_t colon = listen.rfind(':');
  return colon == std::string::npos ? listen : listen.substr(0, colon);
}

bool IsUnspecified(std::string_view host) {
  return host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty();
}

// Whether HOST (a listen address's or a Host header's, IPv6 in brackets or
// not) stays on this machine: "localhost" or a loopback literal. Any other
// name is not: it may resolve anywhere.
bool IsLoopbackName(std::string_view host) {
  if (host == "localhost") return true;
  std::optional<IpAddress> address = ParseIpLiteral(host);
  return address && IsLoopback(*address);
}

}  // namespace

std::string HostName(std::string_view host_header) {
  std::string_view name = host_header;
  if (!name.empty() && name.front() == '[') {
    size_t close = name.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view rest = name.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "";
    name = name.substr(0, close + 1);
  } else if (size_t colon = name.find(':'); colon != std::string_view::npos) {
    if (name.find(':', colon + 1) != std::string_view::npos) return "";
    name = name.substr(0, colon);
  }
  // A name is letters, digits, '-' and '.'; an IPv6 literal is hex
  // digits, ':' and '.' in brackets. Nothing else reaches the allow-list.
  const bool literal = !name.empty() && name.front() == '[';
  std::string_view inner = literal ? name.substr(1, name.size() - 2) : name;
  for (char c : inner) {
    unsigned char u = static_cast<unsigned char>(c);
    bool allowed = literal ? std::isxdigit(u) || c == ':' || c == '.'
                           : std::isalnum(u) || c == '-' || c == '.';
    if (!allowed) return "";
  }
  return Lower(name);
}

bool RequestGuard::IsStandby(std::string_view authorization) const {
  return BearerMatches(authorization, replication_secret_);
}

Status RequestGuard::Create(const ServerOptions& options, RequestGuard* guard) {
  RequestGuard built;
  std::string host = ListenHost(options.listen);
  if (!IsLoopbackName(host)) {
    if (options.token_file.empty()) {
      return Status::InvalidArgument(
          "server.listen: \"" + options.listen +
          "\" is beyond loopback, and spoold has no server.token_file: set "
          "one, or every client that reaches the port could read every task");
    }
    if (options.tls_certificate_file.empty() && !options.allow_insecure) {
      return Status::InvalidArgument(
          "server.listen: \"" + options.listen +
          "\" is beyond loopback, and spoold would serve plain HTTP (tokens "
          "and payloads in clear): set server.tls_certificate_file and "
          "server.tls_key_file, or server.allow_insecure = true to accept "
          "plain HTTP on a network you trust");
    }
  }
  if (!options.token_file.empty()) {
    if (Status s = LoadBearerToken(options.token_file, &built.token_); !s.ok())
      return s;
  }
  if (!options.replication_secret_file.empty()) {
    if (Status s = LoadBearerToken(options.replication_secret_file,
                                   &built.replication_secret_);
        !s.ok()) {
      return s.WithContext("replication.secret_file");
    }
  }
  if (!options.read_token_file.empty()) {
    if (Status s = LoadBearerToken(options.read_token_file, &built.read_token_);
        !s.ok())
      return s;
    if (built.read_token_ == built.token_) {
      return Status::InvalidArgument(
          "server.read_token_file: holds the same token as "
          "server.token_file; a read-only token must differ");
    }
  }
  built.hosts_ = {"localhost", "127.0.0.1", "[::1]"};
  if (!IsUnspecified(host)) built.hosts_.push_back(Lower(host));
  for (const std::string& name : options.allowed_hosts) {
    std::string parsed = HostName(name);
    if (parsed.empty() || parsed.size() != name.size()) {
      return Status::InvalidArgument(
          "server.allowed_hosts: \"" + name +
          "\" is not a host name (letters, digits, '-' and '.', or an IPv6 "
          "address in brackets; no port)");
    }
    built.hosts_.push_back(parsed);
  }
  *guard = std::move(built);
  return Status::OK();
}

bool RequestGuard::HostAllowed(std::string_view host_header) const {
  std::string name = HostName(host_header);
  if (name.empty()) return false;
  if (IsLoopbackName(name)) return true;
  return std::find(hosts_.begin(), hosts_.end(), name) != hosts_.end();
}

Caller RequestGuard::Identify(std::string_view authorization) const {
  // Both compared, whatever the first gives, so that the time taken does
  // not tell which token a guess came near.
  bool writer = BearerMatches(authorization, token_);
  bool reader = BearerMatches(authorization, read_token_);
  if (writer) return Caller::kWriter;
  if (reader) return Caller::kReader;
  return Caller::kNobody;
}

}  // namespace spool::http
