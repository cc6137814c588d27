// The built-in task handlers that make spoold useful on its own: `noop`,
// `sleep` and `http.post` (webhook delivery), and their options.
// spool-worker serves http.post too, made by MakeBuiltinHandler.
//
// Every handler runs on one of spool's worker threads (each a detached
// thread of its own), where blocking is allowed: `sleep` waits on the
// task's cancellation token and `http.post` makes a blocking libcurl call.
// Neither runs on the HTTP server's io threads.

#ifndef SPOOL_INCLUDE_HTTP_BUILTIN_HANDLERS_H_
#define SPOOL_INCLUDE_HTTP_BUILTIN_HANDLERS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spool/handler.h>
#include <spool/runtime.h>
#include <spool/status.h>

namespace spool::http {

// What every built-in handler's [handlers.NAME] table may set.
struct HandlerSettings {
  // Registered at all. Default: true.
  bool enabled = true;
  // Attempts in all per task, with RetryPolicy{}'s kind and delays. Given,
  // it is the handler's policy set in code, and replaces the config's
  // [types.NAME.retry] and [retry] policy whole. Default: unset, the
  // config's policy for the type (spool::Options::RetryPolicyFor).
  std::optional<uint32_t> max_attempts;
  // At most this many tasks of the type run at once. 0 leaves the limit to
  // the config's [types.NAME] concurrency (none if it sets none).
  // Default: 0.
  uint32_t max_concurrent = 0;
  // Each attempt's time limit (HandlerOptions::timeout). Zero leaves it to
  // the config's [types.NAME] timeout_ms (none if it sets none). For
  // http.post it is the request's timeout instead. Default: zero.
  std::chrono::milliseconds timeout{0};
};

// The [handlers."http.post"] table.
//
// What http.post refuses, whatever the URL (docs/server.md, Security): to
// connect to a loopback, link-local (169.254.169.254, the cloud metadata
// service), private, unique-local, carrier-grade NAT, unspecified,
// multicast, broadcast or reserved address, or an IPv6 form of one, unless
// an `allow` entry names that address itself as its host; the address
// judged is each one libcurl is about to connect to (and the one a reused
// connection leads to), after resolution, so a DNS answer that changes
// between lookups cannot get around it. Also refused: redirects, a proxy
// from the environment, a response body past max_response_bytes, a
// control byte in a header value. Errors name a URL as
// scheme://host:port/path, a query shown as "?…".
struct HttpPostOptions {
  // URL patterns a request may go to; a URL matching none fails the task
  // without retry. Empty: http.post refuses every URL. A URL is matched in
  // canonical form, scheme://host:port/path[?query], the port always
  // written, and a URL with user info or a fragment is refused. `**`
  // matches any run of characters; `*` any run without `/`, and in the
  // host:port part without `.` or `:` too (one DNS label, or the port). An
  // entry whose host is an address ("http://127.0.0.1:8080/**",
  // "http://[::1]:*/**") is the only way to reach a special address (see
  // above): "http://*:8080/**" does not let "http://localhost:8080/"
  // through. E.g. "https://hooks.example.com:443/spool/**".
  std::vector<std::string> allow;
  // The URL each payload is POSTed to, verbatim as the body. Empty: the
  // payload is a JSON object {"url": "...", "body": <string or JSON>}.
  // Default: empty.
  std::string url;
  // The Content-Type header sent; no control bytes (CR, LF, ...).
  // Default: "application/json".
  std::string content_type = "application/json";
  // The request's whole time limit; a timeout is retried. Default: 10 s.
  std::chrono::milliseconds timeout{10000};
  // The time limit to connect. Default: 3 s.
  std::chrono::milliseconds connect_timeout{3000};
  // How many bytes of a failed response's body go into the error stored in
  // the task's failure history. Default: 256.
  size_t error_body_bytes = 256;
  // The most bytes of a response's body read; past them the transfer is
  // cut off, so that a receiver that streams without end cannot hold a
  // worker (timeout bounds a slow one). The status decides as usual: a 2xx
  // still succeeds (the request was delivered, and the body is not used),
  // another status fails, its error saying that the body was cut off.
  // Must be > 0. Default: 64 KiB.
  size_t max_response_bytes = size_t{64} << 10;
  // The proxy every request goes through, as libcurl takes it
  // ("http://proxy.internal:3128", "socks5h://127.0.0.1:1080"). Empty: none,
  // and the http_proxy, https_proxy, all_proxy and no_proxy environment
  // variables are ignored. With a proxy, the proxy resolves the host and
  // connects, so the address rules above are the proxy's to enforce; the
  // URL is still checked against `allow`. Default: empty.
  std::string proxy;
  // At most this many requests per host_rate_period start to any one host
  // (scheme://host:port), as a named rate limit with a bucket per host
  // (Runtime::AddRateLimit, limit kHttpPostHostLimit): a request the
  // host's bucket does not allow yet waits, deferred with its attempt
  // unspent, while other hosts go on. 0: no limit. Default: 0.
  uint32_t host_rate_limit = 0;
  // Default: 1 s.
  std::chrono::milliseconds host_rate_period{1000};
  // The longest a 429 or 503 answer's Retry-After is honoured: the retry
  // waits that long at most, and the host's bucket is held that long at
  // most (and never past spool::kMaxDelay, whatever the answer says).
  // Default: 1 hour.
  std::chrono::milliseconds max_retry_after{3'600'000};
};

// The named rate limit host_rate_limit adds.
inline constexpr const char* kHttpPostHostLimit = "http.post per host";

// The [handlers.*] tables together.
struct BuiltinHandlersOptions {
  HandlerSettings noop;
  HandlerSettings sleep;
  HandlerSettings http_post;
  HttpPostOptions http_post_options;
};

// The names of the built-in handlers, the task types they register.
inline constexpr const char* kNoopHandler = "noop";
inline constexpr const char* kSleepHandler = "sleep";
inline constexpr const char* kHttpPostHandler = "http.post";

// Registers the enabled built-in handlers on `runtime` (before its Start),
// each as MakeBuiltinHandler makes it, and http.post's per-host rate limit
// when host_rate_limit is set. Returns the first RegisterHandler or
// AddRateLimit error, naming the handler, or the InvalidArgument of
// ValidateHttpPostOptions.
// REQUIRES: runtime != nullptr and outlives the handlers' runs.
Status RegisterBuiltinHandlers(Runtime* runtime,
                               const BuiltinHandlersOptions& options);

// A built-in handler and the options it is registered with.
struct BuiltinHandler {
  Handler handler;
  HandlerOptions options;
};

// The built-in handler `name` (kNoopHandler, kSleepHandler or
// kHttpPostHandler) and its HandlerOptions, made as RegisterBuiltinHandlers
// registers them, whether or not its `enabled` is set: for a registry other
// than a Runtime, such as spool::RemoteWorker (spool-worker serves
// http.post this way). A RemoteWorker keeps only options.retry_if and
// retry_delay and the queue node's settings decide the rest; retry_if is
// what makes a 4xx answer fail the task without retry.
// NotFound for another name; for http.post, the InvalidArgument of
// ValidateHttpPostOptions. The handler holds no reference to `options`
// and may run on several threads at once.
Result<BuiltinHandler> MakeBuiltinHandler(
    std::string_view name, const BuiltinHandlersOptions& options);

// The `sleep` payload's milliseconds: decimal text or a JSON number,
// surrounding spaces allowed, at most spool::kMaxDelay (365 days:
// 31536000000). InvalidArgument for anything else, a negative value or one
// past the bound: a permanent error, since the payload will not change.
// spoold's sleep and spool-worker's parse with it.
Result<std::chrono::milliseconds> ParseSleepPayload(std::string_view payload);

// What MakeBuiltinHandler refuses in `options`: an allow pattern that can
// match no URL, a content_type with a control byte (it would end the
// header and start another), a proxy that is not a URL libcurl proxies
// through, a max_response_bytes of 0. InvalidArgument naming the key as
// handlers."http.post".KEY.
Status ValidateHttpPostOptions(const HttpPostOptions& options);

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_BUILTIN_HANDLERS_H_
