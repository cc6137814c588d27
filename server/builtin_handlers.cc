#include <algorithm>
#include <curl/curl.h>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <utility>
#include <vector>

#include <spool/http/builtin_handlers.h>
#include <spool/task.h>

#include "server/address_rules.h"
#include "server/json_parse.h"
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
// the allow-list or an address it does not name, a payload that names no
// URL. The handler's retry_if tells them from the retried ones (5xx,
// timeouts, connection errors) by this code.
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

// Whether `value` holds a byte that cannot go into a header value: CR or
// LF would end the header and begin another; NUL would cut it short.
bool HasControlByte(std::string_view value) {
  return std::any_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

// One request's state, shared with libcurl's callbacks.
struct Transfer {
  // The first `keep` bytes of the response's body.
  std::string body;
  size_t keep = 0;
  // max_response_bytes, the body's bytes so far, and whether they passed it.
  size_t limit = 0;
  size_t received = 0;
  bool cut_off = false;
  const TaskContext* task = nullptr;
  // The address rules: judged unless a proxy connects for us.
  bool judge_addresses = true;
  std::optional<IpAddress> named_address;
  // The addresses refused ("ADDRESS, WHY"), and how many were allowed.
  std::vector<std::string> refused;
  size_t allowed = 0;
  // A reused connection whose address was refused before the request.
  bool refused_before_request = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  size_t bytes = size * count;
  if (transfer->body.size() < transfer->keep) {
    transfer->body.append(
        data, std::min(bytes, transfer->keep - transfer->body.size()));
  }
  transfer->received += bytes;
  if (transfer->received > transfer->limit) {
    transfer->cut_off = true;
    return 0;  // fewer bytes than given: libcurl ends the transfer
  }
  return bytes;
}

// Aborts the transfer when the task is cancelled (or timed out).
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* transfer = static_cast<Transfer*>(user);
  return transfer->task->cancelled() ? 1 : 0;
}

// libcurl asks for each socket it is about to connect, with the address it
// will connect it to (every address a host resolved to, in turn): the one
// place to judge the address actually used. Refused, libcurl tries the
// next address, and fails when none is left.
curl_socket_t OnOpenSocket(void* user, curlsocktype purpose,
                           curl_sockaddr* address) {
  auto* transfer = static_cast<Transfer*>(user);
  if (purpose == CURLSOCKTYPE_IPCXN && transfer->judge_addresses) {
    std::optional<IpAddress> ip =
        IpAddressOf(&address->addr, static_cast<size_t>(address->addrlen));
    std::string refusal = ip ? RefusalOf(*ip, transfer->named_address)
                             : "an address of family " +
                                   std::to_string(address->family) +
                                   ", not IPv4 or IPv6";
    if (!refusal.empty()) {
      transfer->refused.push_back(std::move(refusal));
      return CURL_SOCKET_BAD;
    }
    ++transfer->allowed;
  }
  return ::socket(address->family, address->socktype | SOCK_CLOEXEC,
                  address->protocol);
}

// Before each request, on a new connection or a reused one: a connection
// kept alive from a request whose entry named its address must not carry
// one whose entries do not.
int OnBeforeRequest(void* user, char* primary_ip, char*, int, int) {
  auto* transfer = static_cast<Transfer*>(user);
  if (!transfer->judge_addresses) return CURL_PREREQFUNC_OK;
  std::optional<IpAddress> ip = ParseIpLiteral(primary_ip ? primary_ip : "");
  std::string refusal = ip ? RefusalOf(*ip, transfer->named_address)
                           : "an address libcurl did not report (" +
                                 std::string(primary_ip ? primary_ip : "none") +
                                 ")";
  if (refusal.empty()) return CURL_PREREQFUNC_OK;
  transfer->refused.push_back(std::move(refusal));
  transfer->refused_before_request = true;
  return CURL_PREREQFUNC_ABORT;
}

// The permanent error of a request refused by the address rules.
Status AddressRefused(const AllowedUrl& target, const Transfer& transfer) {
  std::string addresses;
  for (const std::string& refusal : transfer.refused) {
    addresses += (addresses.empty() ? "" : "; ") + refusal;
  }
  std::string first = transfer.refused.front();
  first = first.substr(0, first.find(','));
  if (first.find(':') != std::string::npos) first = "[" + first + "]";
  const ParsedUrl& url = target.url;
  std::string scheme = url.origin.substr(0, url.origin.find("://"));
  std::string port = url.origin.substr(url.origin.rfind(':') + 1);
  return Permanent(
      "http.post: " + url.redacted + ": refused to connect to " + url.host +
      " at " + addresses +
      ": only an allow entry that names the address itself as its host "
      "reaches it, e.g. \"" +
      scheme + "://" + first + ":" + port + "/**\"");
}

// The URL an http.post payload goes to and the body it sends: the
// configured URL and the payload verbatim, or the payload's envelope.
Status TargetOf(const HttpPostOptions& options, std::string_view payload,
                std::string* url, std::string* body) {
  *url = options.url;
  *body = std::string(payload);
  if (!url->empty()) return Status::OK();
  const char* kShape =
      "http.post: the payload must be {\"url\": ..., \"body\": ...} when "
      "handlers.\"http.post\".url is not set";
  nlohmann::json envelope;
  if (Status s = ParseJson(payload, "http.post payload", &envelope); !s.ok()) {
    return Permanent(std::string(kShape) + "; " + s.message());
  }
  if (!envelope.is_object() || !envelope.contains("url") ||
      !envelope["url"].is_string()) {
    return Permanent(kShape);
  }
  *url = envelope["url"].get<std::string>();
  const auto it = envelope.find("body");
  *body = it == envelope.end() ? ""
          : it->is_string()    ? it->get<std::string>()
                               : it->dump();
  return Status::OK();
}

// A 429 or 503 answer's Retry-After (seconds or an HTTP date, as libcurl
// reads it), at most `cap` and spool::kMaxDelay: the retry waits that long,
// and the host's bucket is held that long, so that no other request to the
// host starts meanwhile (TaskContext::HoldRateLimits; without a per-host
// limit there is nothing to hold, and that is fine). The seconds are
// compared before any conversion: 2^63 - 1 of them would overflow one.
void HonourRetryAfter(CURL* curl, std::chrono::milliseconds cap,
                      TaskContext& task) {
  curl_off_t seconds = 0;
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &seconds) != CURLE_OK ||
      seconds <= 0) {
    return;
  }
  const auto longest = std::min(
      cap, std::chrono::duration_cast<std::chrono::milliseconds>(kMaxDelay));
  Duration wait = longest;
  if (seconds <
      std::chrono::duration_cast<std::chrono::seconds>(longest).count()) {
    wait = std::chrono::seconds(seconds);
  }
  task.SetRetryDelay(wait);
  static_cast<void>(task.HoldRateLimits(wait));
}

// The outcome of a finished transfer: OK for a 2xx; the error to store
// (its URL redacted) otherwise, permanent for a refusal or another 4xx.
Status OutcomeOf(CURL* curl, CURLcode code, const Transfer& transfer,
                 const AllowedUrl& target, const HttpPostOptions& options,
                 TaskContext& task) {
  const std::string& where = target.url.redacted;
  if (transfer.refused_before_request) return AddressRefused(target, transfer);
  if (code == CURLE_ABORTED_BY_CALLBACK) {
    return Status::Cancelled("http.post: cancelled during the request to " +
                             where);
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return Status::TimedOut("http.post: no answer from " + where + " within " +
                            std::to_string(options.timeout.count()) + " ms");
  }
  if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && transfer.cut_off)) {
    if (!transfer.refused.empty() && transfer.allowed == 0) {
      return AddressRefused(target, transfer);
    }
    std::string refused;
    for (const std::string& r : transfer.refused) refused += "; refused " + r;
    return Status::IOError("http.post: " + where + ": " +
                           curl_easy_strerror(code) + refused);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) return Status::OK();
  std::string message = "http.post: HTTP " + std::to_string(status) + " from " +
                        where + ": " + transfer.body;
  if (transfer.cut_off) {
    message += " (the body was cut off after max_response_bytes = " +
               std::to_string(options.max_response_bytes) + ")";
  }
  if (status == 429 || status == 503) {
    HonourRetryAfter(curl, options.max_retry_after, task);
  }
  // Too Many Requests is "not now", not "never": retried like a 5xx.
  if (status >= 500 || status == 429) return Status::IOError(message);
  // 1xx leftovers, 3xx (not followed) and 4xx: the receiver refused it.
  return Permanent(message);
}

// Sets up `curl` for one POST of `body` to `target`.
void Prepare(CURL* curl, const HttpPostOptions& options,
             const AllowedUrl& target, const std::string& body,
             curl_slist* headers, Transfer* transfer) {
  curl_easy_setopt(curl, CURLOPT_URL, target.url.canonical.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  // No redirects: a Location could point outside the allow-list.
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  // The configured proxy, or none: "" also keeps libcurl from taking one
  // from http_proxy and friends in the environment. With a proxy, every
  // host goes through it, whatever no_proxy says.
  curl_easy_setopt(curl, CURLOPT_PROXY, options.proxy.c_str());
  if (!options.proxy.empty()) curl_easy_setopt(curl, CURLOPT_NOPROXY, "");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(options.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, transfer);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, transfer);
  curl_easy_setopt(curl, CURLOPT_PREREQFUNCTION, OnBeforeRequest);
  curl_easy_setopt(curl, CURLOPT_PREREQDATA, transfer);
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
    AllowedUrl target;
    if (Status allowed = allow_.Check(url, &target); !allowed.ok()) {
      return Permanent("http.post: " + allowed.message());
    }
    std::string key = task.idempotency_key().empty()
                          ? "spool-" + std::to_string(task.id())
                          : std::string(task.idempotency_key());
    if (HasControlByte(key)) {
      return Permanent(
          "http.post: the task's idempotency_key holds a control byte (CR, "
          "LF, or another below 0x20 or 0x7f), which cannot go into the "
          "Idempotency-Key header; nothing was sent to " +
          target.url.redacted);
    }
    InitCurl();
    thread_local std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
    CURL* curl = handle.get();
    if (curl == nullptr)
      return Status::IOError("http.post: curl_easy_init failed");
    curl_easy_reset(curl);
    Transfer transfer;
    transfer.keep =
        std::min(options_.error_body_bytes, options_.max_response_bytes);
    transfer.limit = options_.max_response_bytes;
    transfer.task = &task;
    transfer.judge_addresses = options_.proxy.empty();
    transfer.named_address = target.named_address;
    std::unique_ptr<curl_slist, SlistDeleter> headers(curl_slist_append(
        nullptr, ("Content-Type: " + options_.content_type).c_str()));
    headers.reset(curl_slist_append(headers.release(),
                                    ("Idempotency-Key: " + key).c_str()));
    headers.reset(curl_slist_append(headers.release(), "Expect:"));
    Prepare(curl, options_, target, body, headers.get(), &transfer);
    CURLcode code = curl_easy_perform(curl);
    return OutcomeOf(curl, code, transfer, target, options_, task);
  }

 private:
  HttpPostOptions options_;
  UrlAllowList allow_;
};

// Why a proxy setting cannot be used, or "".
std::string ProxyProblem(const std::string& proxy) {
  if (proxy.empty()) return "";
  if (HasControlByte(proxy)) return "holds a control byte";
  std::unique_ptr<CURLU, void (*)(CURLU*)> parsed(curl_url(), curl_url_cleanup);
  char* scheme = nullptr;
  if (!parsed ||
      curl_url_set(parsed.get(), CURLUPART_URL, proxy.c_str(),
                   CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
      curl_url_get(parsed.get(), CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
    return "\"" + UrlAllowList::Redact(proxy) +
           "\" is not a URL, e.g. http://proxy.internal:3128";
  }
  std::string name = scheme;
  curl_free(scheme);
  for (const char* known :
       {"http", "https", "socks4", "socks4a", "socks5", "socks5h"}) {
    if (name == known) return "";
  }
  return "scheme \"" + name +
         "\" is not one libcurl proxies through (http, https, socks4, "
         "socks4a, socks5, socks5h)";
}

}  // namespace

Status ValidateHttpPostOptions(const HttpPostOptions& options) {
  auto bad = [](const char* key, const std::string& why) {
    return Status::InvalidArgument(std::string("handlers.\"http.post\".") +
                                   key + ": " + why);
  };
  for (const std::string& pattern : options.allow) {
    Status s = UrlAllowList::ValidatePattern(pattern);
    if (!s.ok()) return bad("allow", s.message());
  }
  if (HasControlByte(options.content_type)) {
    return bad("content_type",
               "holds a control byte (CR, LF, or another below 0x20 or "
               "0x7f), which would end the Content-Type header");
  }
  if (std::string why = ProxyProblem(options.proxy); !why.empty()) {
    return bad("proxy", why);
  }
  if (options.max_response_bytes == 0) {
    return bad("max_response_bytes", "must be at least 1");
  }
  return Status::OK();
}

namespace {

// The sleep payload's bound: spool::kMaxDelay in milliseconds.
constexpr int64_t kMaxSleepMs =
    std::chrono::duration_cast<std::chrono::milliseconds>(kMaxDelay).count();

}  // namespace

Result<std::chrono::milliseconds> ParseSleepPayload(std::string_view payload) {
  nlohmann::json value;
  Status parsed = ParseJson(payload, "sleep payload", &value);
  std::string got;
  if (parsed.ok() && value.is_number_unsigned()) {
    uint64_t ms = value.get<uint64_t>();
    if (ms <= static_cast<uint64_t>(kMaxSleepMs)) {
      return std::chrono::milliseconds(static_cast<int64_t>(ms));
    }
    got = std::to_string(ms);
  } else if (parsed.ok() && value.is_number_integer()) {
    got = std::to_string(value.get<int64_t>());  // negative
  } else if (parsed.ok() && value.is_number_float()) {
    double ms = value.get<double>();
    if (ms >= 0 && ms <= static_cast<double>(kMaxSleepMs)) {
      return std::chrono::milliseconds(static_cast<int64_t>(ms));
    }
    got = value.dump();
  }
  return Status::InvalidArgument(
      "sleep: the payload must be the milliseconds to sleep, as text or a "
      "JSON number from 0 to " +
      std::to_string(kMaxSleepMs) + " (365 days), e.g. 250" +
      (got.empty() ? std::string() : "; got " + got) +
      (parsed.ok() ? std::string() : "; " + parsed.message()));
}

Result<BuiltinHandler> MakeBuiltinHandler(
    std::string_view name, const BuiltinHandlersOptions& options) {
  if (name == kNoopHandler) {
    return BuiltinHandler{[](TaskContext&) { return Status::OK(); },
                          OptionsOf(options.noop, true)};
  }
  if (name == kSleepHandler) {
    HandlerOptions handler_options = OptionsOf(options.sleep, true);
    // A payload that is not a number in range will never become one.
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
    if (Status s = ValidateHttpPostOptions(options.http_post_options);
        !s.ok()) {
      return s;
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
