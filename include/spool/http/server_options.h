// ServerOptions: every setting of spoold's HTTP server, with its default.
//
// A plain struct, like spool::Options. Fill it in code, or load it with the
// runtime's options from one TOML file (spool/http/spoold_config.h), whose
// [server] table config/spool.toml documents key by key.

#ifndef SPOOL_INCLUDE_HTTP_SERVER_OPTIONS_H_
#define SPOOL_INCLUDE_HTTP_SERVER_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <spool/status.h>

namespace spool::http {

struct ServerOptions {
  // "HOST:PORT" to listen on; HOST is an IPv4 or IPv6 address ("[::1]:8470")
  // or "localhost". Port 0 picks a free port (see HttpServer::port()).
  // Default: loopback only.
  std::string listen = "127.0.0.1:8470";

  // Threads running the io loop: every connection, request, response and
  // event stream is served by them, asynchronously; none is parked per
  // connection. spool's future callbacks run on them too. Default: 1.
  int threads = 1;

  // A file holding the bearer token that mutations (every POST) need, on
  // its first line; it opens every read too. Must not be readable by group
  // or others. Empty: no token, and every mutation is refused with 403.
  // Default: empty.
  std::string token_file;

  // A file holding a second, read-only token, for dashboards and
  // Prometheus: it opens every GET, no POST. Same rules as token_file.
  // When either token is set, every request but /healthz, /readyz and the
  // dashboard's static files needs one of them. Default: empty.
  std::string read_token_file;

  // Replication (docs/replication.md), from the config's [replication]
  // section. The file of the secret standbys present on
  // /v1/replication/* (same rules as token_file); it opens those routes
  // and nothing else. Empty: they answer 404. Default: empty.
  std::string replication_secret_file;
  // A primary: where it makes the base backups its standbys copy, outside
  // the store. Empty: no base is offered. Default: empty.
  std::string replication_base_dir;
  // A standby: its primary's URL. Every POST is then answered 421 naming
  // it, and /v1/cluster shows it. Default: empty (a primary).
  std::string replication_primary;

  // Host names (of the Host header, without the port) requests may name,
  // beyond the loopback names and the listen address, which are always
  // accepted. Any other Host is answered 421, so that a DNS name an
  // attacker rebinds to this address does not reach spoold from a
  // browser. Default: none.
  std::vector<std::string> allowed_hosts;

  // HTTPS: the server's certificate chain (PEM, the server's certificate
  // first) and its private key (PEM; the file must not be readable by group
  // or others). Set both or neither. With them spoold speaks only TLS 1.2
  // or later on its port, health checks included. Default: empty (plain
  // HTTP).
  std::string tls_certificate_file;
  std::string tls_key_file;

  // Mutual TLS: a PEM file of the CAs whose certificates clients must
  // present; a client without one is refused during the handshake. Needs
  // tls_certificate_file. Tokens are still required as usual. Default:
  // empty (no client certificate asked for).
  std::string tls_client_ca_file;

  // A listen address beyond loopback is refused without token_file, and
  // without TLS (tls_certificate_file) unless this is set: plain HTTP sends
  // tokens and payloads in clear. Default: false.
  bool allow_insecure = false;

  // The largest request body accepted; a larger one gets 413. Default:
  // 1 MiB + 64 KiB (a maximal payload and its JSON envelope).
  size_t max_body_bytes = (size_t{1} << 20) + (size_t{64} << 10);

  // Connections open at once, event streams included; one more is answered
  // 503 and closed. Default: 4096.
  size_t max_connections = 4096;

  // Connections open at once from one client address (IPv4, or IPv6 as a
  // whole address); one more is answered 503 and closed, so that one host
  // cannot take every slot of max_connections. Default: 1024.
  size_t max_connections_per_address = 1024;

  // Event streams (GET /v1/events) open at once; one more is answered 503.
  // Default: 1024.
  size_t max_event_streams = 1024;

  // Of those, streams that follow a listing (a status, type, group, order,
  // created range, payload or limit parameter): each is a live query that
  // re-runs its listing on every change it could see, up to kMaxPageSize
  // tasks, so they get their own, smaller cap; one more is answered 503.
  // 0 turns live listings off. Default: 64.
  size_t max_live_listings = 64;

  // The longest an event stream stays open; then it is closed, and the
  // client reconnects and resumes from its Last-Event-ID (EventSource does
  // this by itself after the stream's retry interval). A stream's live
  // queries are then re-made from the request, and credentials checked
  // again. Default: 1 h.
  std::chrono::milliseconds sse_max_duration{3'600'000};

  // How long a connection may take to send a request's header, counted from
  // the end of the previous response (keep-alive idle time included); and
  // then its body. A slow client is disconnected. Default: 10 s each.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};

  // How long one write may wait for a client that does not read, on a
  // response or an event stream. Default: 10 s.
  std::chrono::milliseconds write_timeout{10000};

  // The interval of keep-alive comments on idle event streams. Default: 15 s.
  std::chrono::milliseconds sse_keepalive{15000};

  // Task events kept in memory for Last-Event-ID resume. 0: no resume.
  // Default: 4096.
  size_t sse_replay_events = 4096;

  // The most bytes queued for one event stream whose client reads too
  // slowly; past it the stream is closed (the client reconnects and
  // resumes). Default: 4 MiB.
  size_t sse_max_queued_bytes = size_t{4} << 20;

  // On stop: how long in-flight requests may take to finish before their
  // connections are closed. The runtime's own close_timeout_ms follows.
  // Default: 5 s.
  std::chrono::milliseconds stop_timeout{5000};

  // OK, or InvalidArgument naming the first field out of range.
  Status Validate() const;
};

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_SERVER_OPTIONS_H_
