#include <algorithm>
#include <cctype>
#include <curl/curl.h>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include <spool/http/builtin_handlers.h>

#include "server/url_allow_list.h"

namespace spool::http {
namespace {

// A [handlers.NAME] value left at its default leaves the field unset, so
// that the type's [types.NAME] settings (spool::Options::types) apply; one
// it gives is code to spool and wins over them.
HandlerOptions OptionsOf(const HandlerSettings& settings,
                         bool attempt_timeout) {
  HandlerOptions options;
  if (settings.max_attempts) {
    RetryPolicy retry;
    retry.max_attempts = *settings.max_attempts;
    options.retry = retry;
  }
  if (settings.max_concurrent != 0)
    options.max_concurrent = settings.max_concurrent;
  if (attempt_timeout && settings.timeout.count() > 0)
    options.timeout = settings.timeout;
  return options;
}

// ---- http.post ----

// Errors of http.post that are never retried: a 4xx answer, a URL outside
// the allow-list, a payload that names no URL. The handler's retry_if
// tells them from the retried ones (5xx, timeouts, connection errors) by
// this code.
constexpr Status::Code kPermanent = Status::Code::kInvalidArgument;
Status Permanent(std::string_view message) {
  return Status::InvalidArgument(message);
}

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

// libcurl's global init, once per process, before any handle.
void InitCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  std::string body;
  size_t keep = 0;
  const TaskContext* task = nullptr;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  size_t bytes = size * count;
  if (transfer->body.size() < transfer->keep) {
    transfer->body.append(
        data, std::min(bytes, transfer->keep - transfer->body.size()));
  }
  return bytes;
}

// Aborts the transfer when the task is cancelled (or timed out).
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* transfer = static_cast<Transfer*>(user);
  return transfer->task->cancelled() ? 1 : 0;
}

// The URL an http.post payload goes to and the body it sends: the
// configured URL and the payload verbatim, or the payload's envelope.
Status TargetOf(const HttpPostOptions& options, std::string_view payload,
                std::string* url, std::string* body) {
  *url = options.url;
  *body = std::string(payload);
  if (!url->empty()) return Status::OK();
  nlohmann::json envelope = nlohmann::json::parse(payload, nullptr, false);
  if (!envelope.is_object() || !envelope.contains("url") ||
      !envelope["url"].is_string()) {
    return Permanent(
        "http.post: the payload must be {\"url\": ..., \"body\": ...} "
        "when handlers.\"http.post\".url is not set");
  }
  *url = envelope["url"].get<std::string>();
  const auto it = envelope.find("body");
  *body = it == envelope.end() ? ""
          : it->is_string()    ? it->get<std::string>()
                               : it->dump();
  return Status::OK();
}

// A 429 or 503 answer's Retry-After (seconds or an HTTP date, as libcurl
// reads it), at most `cap`: the retry waits that long, and the host's
// bucket is held that long, so that no other request to the host starts
// meanwhile (TaskContext::HoldRateLimits; without a per-host limit there
// is nothing to hold, and that is fine).
void HonourRetryAfter(CURL* curl, std::chrono::milliseconds cap,
                      TaskContext& task) {
  curl_off_t seconds = 0;
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &seconds) != CURLE_OK ||
      seconds <= 0) {
    return;
  }
  Duration wait = std::min<Duration>(std::chrono::seconds(seconds), cap);
  task.SetRetryDelay(wait);
  static_cast<void>(task.HoldRateLimits(wait));
}

class HttpPost {
 public:
  explicit HttpPost(HttpPostOptions options)
      : options_(std::move(options)), allow_(options_.allow) {}

  // Runs on a spool worker thread, a detached thread of its own: the
  // blocking curl_easy_perform is allowed there (it is never an io thread
  // of the HTTP server). One handle per worker thread keeps connections
  // alive between tasks.
  Status operator()(TaskContext& task) const {
    std::string url, body;
    if (Status s = TargetOf(options_, task.payload(), &url, &body); !s.ok()) {
      return s;
    }
    std::string canonical;
    if (Status allowed = allow_.Check(url, &canonical); !allowed.ok()) {
      return Permanent("http.post: " + allowed.message());
    }
    InitCurl();
    thread_local std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
    CURL* curl = handle.get();
    if (curl == nullptr)
      return Status::IOError("http.post: curl_easy_init failed");
    curl_easy_reset(curl);
    Transfer transfer;
    transfer.keep = options_.error_body_bytes;
    transfer.task = &task;
    std::unique_ptr<curl_slist, SlistDeleter> headers(curl_slist_append(
        nullptr, ("Content-Type: " + options_.content_type).c_str()));
    std::string idempotency =
        "Idempotency-Key: " + (task.idempotency_key().empty()
                                   ? "spool-" + std::to_string(task.id())
                                   : std::string(task.idempotency_key()));
    headers.reset(curl_slist_append(headers.release(), idempotency.c_str()));
    headers.reset(curl_slist_append(headers.release(), "Expect:"));
    curl_easy_setopt(curl, CURLOPT_URL, canonical.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
    // No redirects: a Location could point outside the allow-list.
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(options_.timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    CURLcode code = curl_easy_perform(curl);
    if (code == CURLE_ABORTED_BY_CALLBACK) {
      return Status::Cancelled("http.post: cancelled during the request to " +
                               canonical);
    }
    if (code == CURLE_OPERATION_TIMEDOUT) {
      return Status::TimedOut("http.post: no answer from " + canonical +
                              " within " +
                              std::to_string(options_.timeout.count()) + " ms");
    }
    if (code != CURLE_OK) {
      return Status::IOError("http.post: " + canonical + ": " +
                             curl_easy_strerror(code));
    }
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) return Status::OK();
    std::string message = "http.post: HTTP " + std::to_string(status) +
                          " from " + canonical + ": " + transfer.body;
    if (status == 429 || status == 503) {
      HonourRetryAfter(curl, options_.max_retry_after, task);
    }
    // Too Many Requests is "not now", not "never": retried like a 5xx.
    if (status >= 500 || status == 429) return Status::IOError(message);
    // 1xx leftovers, 3xx (not followed) and 4xx: the receiver refused it.
    return Permanent(message);
  }

 private:
  HttpPostOptions options_;
  UrlAllowList allow_;
};

}  // namespace

Result<std::chrono::milliseconds> ParseSleepPayload(std::string_view payload) {
  nlohmann::json value =
      nlohmann::json::parse(payload.begin(), payload.end(), nullptr, false);
  if (value.is_number_unsigned() || value.is_number_integer()) {
    int64_t ms = value.get<int64_t>();
    if (ms >= 0) return std::chrono::milliseconds(ms);
  } else if (value.is_number_float()) {
    double ms = value.get<double>();
    if (ms >= 0 && ms < 1e15)
      return std::chrono::milliseconds(static_cast<int64_t>(ms));
  }
  return Status::InvalidArgument(
      "sleep: the payload must be the milliseconds to sleep, as text or a JSON "
      "number, e.g. 250");
}

Result<BuiltinHandler> MakeBuiltinHandler(
    std::string_view name, const BuiltinHandlersOptions& options) {
  if (name == kNoopHandler) {
    return BuiltinHandler{[](TaskContext&) { return Status::OK(); },
                          OptionsOf(options.noop, true)};
  }
  if (name == kSleepHandler) {
    HandlerOptions handler_options = OptionsOf(options.sleep, true);
    // A payload that is not a number will never become one.
    handler_options.retry_if = [](const Status& error) {
      return error.code() != Status::Code::kInvalidArgument;
    };
    return BuiltinHandler{
        [](TaskContext& task) -> Status {
          Result<std::chrono::milliseconds> ms =
              ParseSleepPayload(task.payload());
          if (!ms.ok()) return ms.status();
          // Wakes at once when the task is cancelled or times out, or when
          // spoold stops: then the error gives the task back to the queue
          // without spending its attempt (TaskContext::stopping).
          if (task.WaitForCancelOrStop(
                  std::chrono::duration_cast<Duration>(*ms))) {
            if (task.stopping() && !task.cancelled()) {
              return Status::Aborted("sleep: spoold is stopping");
            }
            return Status::Cancelled("sleep: cancelled");
          }
          return Status::OK();
        },
        std::move(handler_options)};
  }
  if (name == kHttpPostHandler) {
    for (const std::string& pattern : options.http_post_options.allow) {
      if (pattern.find("://") == std::string::npos) {
        return Status::InvalidArgument(
            "handlers.\"http.post\".allow: pattern \"" + pattern +
            "\" has no scheme:// part");
      }
    }
    HandlerOptions handler_options = OptionsOf(options.http_post, false);
    handler_options.retry_if = [](const Status& error) {
      return error.code() != kPermanent;
    };
    HttpPostOptions post_options = options.http_post_options;
    if (options.http_post.timeout.count() > 0)
      post_options.timeout = options.http_post.timeout;
    return BuiltinHandler{HttpPost(std::move(post_options)),
                          std::move(handler_options)};
  }
  return Status::NotFound("no built-in handler " + std::string(name) +
                          "; they are noop, sleep and http.post");
}

Status RegisterBuiltinHandlers(Runtime* runtime,
                               const BuiltinHandlersOptions& options) {
  const std::pair<const char*, const HandlerSettings*> handlers[] = {
      {kNoopHandler, &options.noop},
      {kSleepHandler, &options.sleep},
      {kHttpPostHandler, &options.http_post}};
  for (const auto& [name, settings] : handlers) {
    if (!settings->enabled) continue;
    Result<BuiltinHandler> made = MakeBuiltinHandler(name, options);
    if (!made.ok()) return made.status();
    BuiltinHandler& handler = made.value();
    Status s = runtime->RegisterHandler(name, std::move(handler.handler),
                                        std::move(handler.options));
    if (!s.ok()) return s.WithContext(std::string("handler ") + name);
  }
  const HttpPostOptions& post = options.http_post_options;
  if (!options.http_post.enabled || post.host_rate_limit == 0) {
    return Status::OK();
  }
  // One bucket per scheme://host:port the attempt posts to; a payload that
  // names no valid URL shares the "" bucket, and its handler fails it.
  Status s = runtime->AddRateLimit(
      kHttpPostHostLimit,
      RateLimit{post.host_rate_limit,
                std::chrono::duration_cast<Duration>(post.host_rate_period)},
      {kHttpPostHandler}, [post](const TaskContext& attempt) {
        std::string url, body;
        if (!TargetOf(post, attempt.payload(), &url, &body).ok()) return url;
        return UrlAllowList::OriginOf(url);
      });
  return s.WithContext("handlers.\"http.post\".host_rate_limit");
}

}  // namespace spool::http
