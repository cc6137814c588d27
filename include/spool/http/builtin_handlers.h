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
struct HttpPostOptions {
  // URL patterns a request may go to; a URL matching none fails the task
  // without retry. Empty: http.post refuses every URL. `*` matches any run
  // of characters except `/`, `**` any run. A URL is matched in canonical
  // form, scheme://host:port/path[?query], the port always written, and a
  // URL with user info is refused. E.g. "http://127.0.0.1:*/hooks/**".
  std::vector<std::string> allow;
  // The URL each payload is POSTed to, verbatim as the body. Empty: the
  // payload is a JSON object {"url": "...", "body": <string or JSON>}.
  // Default: empty.
  std::string url;
  // The Content-Type header sent. Default: "application/json".
  std::string content_type = "application/json";
  // The request's whole time limit; a timeout is retried. Default: 10 s.
  std::chrono::milliseconds timeout{10000};
  // The time limit to connect. Default: 3 s.
  std::chrono::milliseconds connect_timeout{3000};
  // How many bytes of a failed response's body go into the error stored in
  // the task's failure history. Default: 256.
  size_t error_body_bytes = 256;
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
  // most. Default: 1 hour.
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
// AddRateLimit error, naming the handler, or InvalidArgument for an
// allow-list pattern that cannot be used.
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
// NotFound for another name; InvalidArgument for an http.post allow-list
// pattern that cannot be used. The handler holds no reference to `options`
// and may run on several threads at once.
Result<BuiltinHandler> MakeBuiltinHandler(
    std::string_view name, const BuiltinHandlersOptions& options);

// The `sleep` payload's milliseconds: decimal text or a JSON number,
// surrounding spaces allowed. InvalidArgument for anything else or a
// negative value.
Result<std::chrono::milliseconds> ParseSleepPayload(std::string_view payload);

}  // namespace spool::http

#endif  // SPOOL_INCLUDE_HTTP_BUILTIN_HANDLERS_H_
