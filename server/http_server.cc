// The HTTP server: the io loop, connections, routes and event streams.
//
// Life of a request: Connection::ReadHeader (header_timeout) -> ReadBody
// (body_timeout, at most max_body_bytes) -> Dispatch on the connection's
// strand -> a route either answers at once or calls spool and answers
// from the future's callback (run on an io thread by the executor, then
// posted to the strand) -> Write (write_timeout) -> next request, or close.
// A GET /v1/events turns the connection into an event stream for the rest
// of its life: frames are queued on its strand and written one at a time.

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spool/http/http_server.h>
#include <spool/statistics.h>

#include "server/api_json.h"
#include "server/replication_wire.h"
#include "server/request_guard.h"
#include "server/spool_dashboard_dashboard_css.h"
#include "server/spool_dashboard_dashboard_js.h"
#include "server/spool_dashboard_index_html.h"
#include "server/transport.h"

namespace spool::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Response = bhttp::response<bhttp::string_body>;
using Request = bhttp::request<bhttp::string_body>;
using Frame = std::shared_ptr<const std::string>;

class ServerImpl;

// The dashboard's static files (server/dashboard/), compiled in.
struct DashboardFile {
  std::string_view path;
  const char* content_type;
  const char* data;
  size_t size;
};

const DashboardFile* FindDashboardFile(std::string_view path) {
  static const DashboardFile kFiles[] = {
      {"/", "text/html; charset=utf-8",
       reinterpret_cast<const char*>(kDashboardHtml), kDashboardHtmlSize},
      {"/dashboard.js", "text/javascript; charset=utf-8",
       reinterpret_cast<const char*>(kDashboardJs), kDashboardJsSize},
      {"/dashboard.css", "text/css; charset=utf-8",
       reinterpret_cast<const char*>(kDashboardCss), kDashboardCssSize},
  };
  for (const DashboardFile& file : kFiles) {
    if (file.path == path) return &file;
  }
  return nullptr;
}

// The dashboard's CSP: its own script and style only, no inline code, no
// frame may hold it, nothing fetched from elsewhere.
constexpr const char* kDashboardPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

// On every response: no sniffing a JSON error into HTML, no framing, no
// Referer carrying a URL elsewhere, and a CSP that lets an API response
// run nothing if a browser is ever tricked into rendering one.
constexpr std::string_view kSecurityHeaders =
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n";
constexpr std::string_view kApiPolicy =
    "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n";

// Posts spool's callbacks into the io loop.
class IoExecutor final : public Executor {
 public:
  explicit IoExecutor(std::shared_ptr<asio::io_context> io)
      : io_(std::move(io)) {}
  void Post(std::function<void()> fn) override {
    asio::post(*io_, std::move(fn));
  }

 private:
  std::shared_ptr<asio::io_context> io_;
};

// The HTTP status and error code for a spool Status.
std::pair<bhttp::status, const char*> ErrorOf(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument:
      return {bhttp::status::bad_request, "invalid_argument"};
    case Status::Code::kNotFound:
      return {bhttp::status::not_found, "not_found"};
    case Status::Code::kFailedPrecondition:
      return {bhttp::status::conflict, "failed_precondition"};
    case Status::Code::kBusy:
      return {bhttp::status::service_unavailable, "busy"};
    case Status::Code::kClosed:
      return {bhttp::status::service_unavailable, "unavailable"};
    case Status::Code::kTimedOut:
      return {bhttp::status::gateway_timeout, "timed_out"};
    case Status::Code::kCorruption:
      return {bhttp::status::internal_server_error, "corruption"};
    case Status::Code::kIOError:
      return {bhttp::status::internal_server_error, "io_error"};
    case Status::Code::kNotSupported:
      return {bhttp::status::not_implemented, "not_supported"};
    default:
      return {bhttp::status::internal_server_error, "internal"};
  }
}

std::optional<TaskId> ParseId(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  TaskId id = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    TaskId next = id * 10 + static_cast<TaskId>(c - '0');
    if (next / 10 != id) return std::nullopt;
    id = next;
  }
  if (id == 0) return std::nullopt;
  return id;
}

// Splits "/a/b/c" into {"a", "b", "c"}.
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    if (path[0] == '/') {
      path.remove_prefix(1);
      continue;
    }
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    path = slash == std::string_view::npos ? std::string_view()
                                           : path.substr(slash);
  }
  return out;
}

// "data: " lines for `payload`, one per line of it, as SSE requires.
std::string Frame_(std::string_view id, std::string_view event,
                   std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + event.size() + id.size() + 32);
  out += "id: ";
  out += id;
  out += "\nevent: ";
  out += event;
  out += '\n';
  while (true) {
    size_t nl = payload.find('\n');
    out += "data: ";
    out += payload.substr(0, nl);
    out += '\n';
    if (nl == std::string_view::npos) break;
    payload.remove_prefix(nl + 1);
  }
  out += '\n';
  return out;
}

class Connection;

// Fans task events out to every event stream, and keeps the last ones for
// Last-Event-ID resume. Subscribes to the runtime when the first stream
// joins, and stays subscribed until Close (so that the replay buffer has
// no gap once it has begun).
class EventHub {
 public:
  EventHub(size_t replay, std::string epoch)
      : replay_(replay), epoch_(std::move(epoch)) {}

  // What a joining stream gets: the events after its Last-Event-ID, or a
  // reset when they are not all here.
  struct Joined {
    std::vector<Frame> replay;
    std::optional<std::string> reset_reason;
  };
  Joined Join(Runtime* runtime, const std::shared_ptr<Connection>& stream,
              std::string_view last_event_id);

  // The id the next non-task event carries: the last task event's.
  std::string CurrentId() {
    std::lock_guard<std::mutex> lock(mutex_);
    return epoch_ + "-" + std::to_string(next_seq_ - 1);
  }

  // Sends `frame` to every stream (keep-alive comments).
  void Broadcast(const Frame& frame);

  size_t streams() {
    std::lock_guard<std::mutex> lock(mutex_);
    return streams_.size();
  }

  // Leaves `runtime` for another (a cluster node's new role): unsubscribes,
  // forgets the events kept (their ids were that runtime's) and takes a new
  // epoch, so that a Last-Event-ID from before resets.
  void Rebind(Runtime* runtime, std::string epoch) {
    Close(runtime);
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = false;
    epoch_ = std::move(epoch);
    ring_.clear();
    first_seq_ = next_seq_;
    streams_.clear();
  }

  void Close(Runtime* runtime) {
    uint64_t token;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      token = token_;
      token_ = 0;
      closed_ = true;
    }
    if (token != 0 && runtime != nullptr) runtime->Unsubscribe(token);
  }

  void Leave(Connection* stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.erase(stream);
  }

 private:
  void OnEvent(const TaskEvent& event);

  const size_t replay_;
  std::string epoch_;  // GUARDED_BY(mutex_)
  std::mutex mutex_;
  bool closed_ = false;
  uint64_t token_ = 0;
  // A Join is subscribing (outside the lock): no second one does.
  bool subscribing_ = false;
  // Sequence of the next task event; 1 is the first.
  uint64_t next_seq_ = 1;
  // The first sequence seen by the subscription (events before it were
  // never received).
  uint64_t first_seq_ = 1;
  std::deque<std::pair<uint64_t, Frame>> ring_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> streams_;
};

class ServerImpl final : public HttpServer {
 public:
  ServerImpl(ServerOptions options, RequestGuard guard,
             std::shared_ptr<asio::ssl::context> tls)
      : options_(std::move(options)),
        guard_(std::move(guard)),
        tls_(std::move(tls)),
        io_(std::make_shared<asio::io_context>(options_.threads)),
        work_(asio::make_work_guard(*io_)),
        acceptor_(asio::make_strand(*io_)),
        keepalive_timer_(*io_),
        hub_(options_.sse_replay_events, NewEpoch()),
        primary_(options_.replication_primary) {}

  ~ServerImpl() override {
    Stop();
    work_.reset();
    io_->stop();
    for (std::thread& thread : threads_) thread.join();
  }

  std::shared_ptr<Executor> executor() const override {
    return std::make_shared<IoExecutor>(io_);
  }

  Status Start() override;
  uint16_t port() const override { return port_.load(); }
  void AttachRuntime(Runtime* runtime) override { runtime_.store(runtime); }
  void SwapRuntime(Runtime* runtime, std::string primary) override;
  void Stop() override;

  // ---- For connections ----
  const ServerOptions& options() const { return options_; }
  Runtime* runtime() const { return runtime_.load(); }
  // A standby's primary, for 421 answers; empty on a primary.
  std::string primary() const {
    std::lock_guard<std::mutex> lock(primary_mutex_);
    return primary_;
  }
  bool stopping() const { return stopping_.load(); }
  EventHub& hub() { return hub_; }
  const RequestGuard& guard() const { return guard_; }
  // Counts a new connection from `address`; false (counting nothing) when
  // max_connections or max_connections_per_address is reached, with the
  // setting's name in *limit.
  bool Admit(const asio::ip::address& address, const char** limit) {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    if (connections_.size() + admitting_ >= options_.max_connections) {
      *limit = "max_connections";
      return false;
    }
    size_t& from_address = per_address_[address];
    if (from_address >= options_.max_connections_per_address) {
      *limit = "max_connections_per_address";
      return false;
    }
    ++from_address;
    ++admitting_;
    return true;
  }
  // After Admit: the connection object now exists.
  void Register(Connection* c, const std::shared_ptr<Connection>& shared) {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    --admitting_;
    connections_[c] = shared;
  }
  void Unregister(Connection* c, const asio::ip::address& address) {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    connections_.erase(c);
    auto it = per_address_.find(address);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }
  // Counts a new event stream, and a live listing when `listing`; false
  // (counting nothing) past max_event_streams or max_live_listings, with
  // the setting's name in *limit.
  bool AdmitStream(bool listing, const char** limit) {
    if (event_streams_.fetch_add(1) >= options_.max_event_streams) {
      event_streams_.fetch_sub(1);
      *limit = "max_event_streams";
      return false;
    }
    if (listing && live_listings_.fetch_add(1) >= options_.max_live_listings) {
      live_listings_.fetch_sub(1);
      event_streams_.fetch_sub(1);
      *limit = "max_live_listings";
      return false;
    }
    return true;
  }
  void ReleaseStream(bool listing) {
    event_streams_.fetch_sub(1);
    if (listing) live_listings_.fetch_sub(1);
  }
  size_t connection_count() {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    return connections_.size();
  }
  std::atomic<int64_t> in_flight{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> rejected_connections{0};
  std::atomic<uint64_t> rejected_streams{0};
  std::atomic<uint64_t> tls_handshake_failures{0};

 private:
  static std::string NewEpoch() {
    std::random_device random;
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "%08x", random());
    return buffer;
  }
  void Accept();
  // Admit for an accepted socket, by its peer's address.
  bool AdmitFrom(const tcp::socket& socket, const char** limit);
  // The 503 a connection past `limit` gets before it is closed.
  static std::string BusyResponse(const char* limit);
  // Writes BusyResponse(limit) to `socket`, then closes it.
  static void SendBusy(tcp::socket socket, const char* limit);
  void KeepAlive();
  std::vector<std::shared_ptr<Connection>> Connections();

  const ServerOptions options_;
  const RequestGuard guard_;
  // The TLS context; null for plain HTTP.
  const std::shared_ptr<asio::ssl::context> tls_;
  std::shared_ptr<asio::io_context> io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer keepalive_timer_;
  EventHub hub_;
  std::vector<std::thread> threads_;
  std::atomic<uint16_t> port_{0};
  std::atomic<Runtime*> runtime_{nullptr};
  mutable std::mutex primary_mutex_;
  std::string primary_;  // GUARDED_BY(primary_mutex_)
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<size_t> event_streams_{0};
  std::atomic<size_t> live_listings_{0};
  std::mutex connections_mutex_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;
  // Connections admitted, not yet registered.
  size_t admitting_ = 0;
  // Connections open per client address; an address with none is absent.
  std::map<asio::ip::address, size_t> per_address_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Transport transport, asio::ip::address address, ServerImpl* server)
      : stream_(std::move(transport)),
        address_(std::move(address)),
        server_(server),
        lifetime_(stream_.get_executor()) {}

  ~Connection() {
    ReleaseStream();
    server_->Unregister(this, address_);
    if (sse_) server_->hub().Leave(this);
  }

  void Run() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->stream_.tls()) return self->Handshake();
      self->ReadHeader();
    });
  }

  // Stop, first step: an idle connection or an event stream is closed; a
  // request in flight is answered, then the connection closes.
  void StopSoft() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->sse_ || !self->busy_) self->DoClose();
    });
  }
  void StopHard() {
    asio::post(stream_.get_executor(),
               [self = shared_from_this()] { self->DoClose(); });
  }

  // Queues an event-stream frame; from any thread.
  void Send(Frame frame) {
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), frame = std::move(frame)] {
                 self->DoSend(frame);
               });
  }

 private:
  // ---- Reading requests ----

  // TLS first, within the time a request's header may take.
  void Handshake() {
    stream_.tcp().expires_after(server_->options().header_timeout);
    stream_.AsyncHandshake([self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        self->server_->tls_handshake_failures.fetch_add(
            1, std::memory_order_relaxed);
        return self->DoClose();
      }
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    if (closed_) return;
    head_ = false;
    if (server_->stopping()) return DoClose();
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(server_->options().max_body_bytes);
    stream_.tcp().expires_after(server_->options().header_timeout);
    stream_.Visit([this](auto& stream) {
      bhttp::async_read_header(
          stream, buffer_, *parser_,
          [self = shared_from_this()](beast::error_code ec, size_t) {
            self->OnHeader(ec);
          });
    });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    if (auto length = parser_->content_length();
        length && *length > server_->options().max_body_bytes) {
      return TooLarge();
    }
    if (beast::iequals(header[bhttp::field::expect], "100-continue")) {
      // curl waits for this before sending a body over 1 KiB.
      auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(
          bhttp::status::continue_, header.version());
      stream_.tcp().expires_after(server_->options().write_timeout);
      stream_.Visit([this, &cont](auto& stream) {
        bhttp::async_write(stream, *cont,
                           [self = shared_from_this(), cont](
                               beast::error_code write_ec, size_t) {
                             if (write_ec) return self->DoClose();
                             self->ReadBody();
                           });
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    // The body of a small request usually came with its header and is in
    // the buffer already: parse it from there rather than through another
    // asynchronous read, whose completion would be one more trip through
    // the io loop.
    while (!parser_->is_done() && buffer_.size() > 0) {
      beast::error_code put_ec;
      size_t used = parser_->put(buffer_.data(), put_ec);
      buffer_.consume(used);
      if (put_ec == bhttp::error::need_more) break;
      if (put_ec) return OnReadError(put_ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) {
      stream_.tcp().expires_never();
      return Dispatch(parser_->release());
    }
    stream_.tcp().expires_after(server_->options().body_timeout);
    stream_.Visit([this](auto& stream) {
      bhttp::async_read(
          stream, buffer_, *parser_,
          [self = shared_from_this()](beast::error_code ec, size_t) {
            if (ec) return self->OnReadError(ec);
            self->stream_.tcp().expires_never();
            self->Dispatch(self->parser_->release());
          });
    });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) return TooLarge();
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::eof ||
        ec == asio::error::connection_reset) {
      return DoClose();
    }
    // A malformed request: say so once, then close (the stream is not in
    // a known state any more).
    Response res = Error(bhttp::status::bad_request, "bad_request",
                         "malformed HTTP request: " + ec.message(), 11);
    res.keep_alive(false);
    Write(std::move(res));
  }

  void TooLarge() {
    Response res =
        Error(bhttp::status::payload_too_large, "payload_too_large",
              "the request body is over server.max_body_bytes (" +
                  std::to_string(server_->options().max_body_bytes) + " bytes)",
              parser_ ? parser_->get().version() : 11);
    res.keep_alive(false);
    Write(std::move(res));
  }

  // ---- Responses ----

  static Response Json(bhttp::status status, std::string body,
                       unsigned version) {
    Response res(status, version);
    res.set(bhttp::field::content_type, "application/json");
    res.set(bhttp::field::cache_control, "no-store");
    res.body() = std::move(body);
    return res;
  }
  static Response Error(bhttp::status status, std::string_view code,
                        std::string_view message, unsigned version) {
    return Json(status, ErrorJson(code, message), version);
  }
  Response ErrorFor(const Status& s) const {
    auto [status, code] = ErrorOf(s);
    Response res = Error(status, code, s.message(), version_);
    // Busy is the writer's bound on enqueues not yet durable: room frees as
    // the disk catches up, so the client may come back shortly.
    if (s.IsBusy()) res.set(bhttp::field::retry_after, "1");
    return res;
  }

  // From any thread: answers the request in flight. The response moves
  // into the posted handler (asio takes move-only handlers), not into a
  // shared copy.
  void Respond(Response res) {
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), res = std::move(res)]() mutable {
                 self->Write(std::move(res));
               });
  }

  // Answers with `body`, bytes owned by `keep` (e.g. a future's result),
  // written from where they are: a 350 KB listing is not copied.
  void RespondBytes(bhttp::status status, std::string_view body,
                    std::shared_ptr<const void> keep) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), status, body,
                                        keep = std::move(keep)] {
      Response res = Json(status, std::string(), self->version_);
      self->Write(std::move(res), body, std::move(keep));
    });
  }

  // Writes `res`, the status line and fields formatted here into one
  // buffer the connection reuses (Beast's serializer cost more than the
  // rest of an enqueue's response), and its body (or `external`, kept
  // alive by `keep`) as the second buffer of the same write.
  void Write(Response res, std::optional<std::string_view> external = {},
             std::shared_ptr<const void> keep = nullptr) {
    if (closed_) return;
    bool keep_open = keep_alive_ && res.keep_alive() && !server_->stopping();
    out_body_ = std::move(res.body());
    std::string_view body = external ? *external : std::string_view(out_body_);
    out_keep_ = std::move(keep);
    FormatHead(res, body.size(), keep_open, &out_head_);
    if (head_) body = {};  // HEAD: the length of the body a GET would get
    std::array<asio::const_buffer, 2> buffers{
        asio::buffer(out_head_), asio::buffer(body.data(), body.size())};
    if (stream_.tls()) {
      // One buffer: over Beast 1.74's ssl_stream, a body past 16 KiB in a
      // second buffer was never sent (test_requests_over_tls). The copy
      // costs little beside the encryption of the same bytes.
      out_head_.append(body.data(), body.size());
      buffers = {asio::buffer(out_head_), asio::const_buffer()};
    }
    stream_.tcp().expires_after(server_->options().write_timeout);
    // All that is left in each write_some: asio's default caps every
    // send at 64 KiB, and each cap costs a trip through the io loop (a
    // 350 KB listing took six sends with an epoll_wait between each).
    size_t total = out_head_.size() + body.size();
    auto remaining = [total](const beast::error_code& ec,
                             size_t written) -> size_t {
      return ec ? 0 : total - written;
    };
    stream_.Visit([&](auto& stream) {
      asio::async_write(
          stream, buffers, remaining,
          [self = shared_from_this(), keep_open](beast::error_code ec, size_t) {
            self->Written(ec, keep_open);
          });
    });
  }

  // A response is written (or failed to be): the next request, or the end.
  void Written(beast::error_code ec, bool keep_open) {
    stream_.tcp().expires_never();
    out_keep_.reset();
    if (busy_) {
      busy_ = false;
      server_->in_flight.fetch_sub(1);
    }
    if (ec || !keep_open) return DoClose();
    ReadHeader();
  }

  // The status line and fields of `res` with Content-Length and, when the
  // connection's default is not what is wanted, Connection, as HTTP/1.1
  // (or 1.0) puts them; into *out, whose capacity is reused.
  static void FormatHead(const Response& res, size_t body_size, bool keep_open,
                         std::string* out) {
    out->clear();
    out->append(res.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
    char code[4] = {static_cast<char>('0' + res.result_int() / 100),
                    static_cast<char>('0' + res.result_int() / 10 % 10),
                    static_cast<char>('0' + res.result_int() % 10), ' '};
    out->append(code, 4);
    beast::string_view reason = bhttp::obsolete_reason(res.result());
    out->append(reason.data(), reason.size());
    out->append("\r\n");
    for (const auto& field : res) {
      if (field.name() == bhttp::field::content_length ||
          field.name() == bhttp::field::connection)
        continue;
      beast::string_view name = field.name_string();
      beast::string_view value = field.value();
      out->append(name.data(), name.size());
      out->append(": ");
      out->append(value.data(), value.size());
      out->append("\r\n");
    }
    out->append(kSecurityHeaders.data(), kSecurityHeaders.size());
    if (res.find("Content-Security-Policy") == res.end())
      out->append(kApiPolicy.data(), kApiPolicy.size());
    out->append("Content-Length: ");
    out->append(std::to_string(body_size));
    out->append("\r\n");
    if (!keep_open && res.version() >= 11) {
      out->append("Connection: close\r\n");
    } else if (keep_open && res.version() == 10) {
      out->append("Connection: keep-alive\r\n");
    }
    out->append("\r\n");
  }

  void DoClose() {
    if (closed_) return;
    closed_ = true;
    watches_.clear();
    ReleaseStream();
    lifetime_.cancel();
    stream_.Close();
    if (busy_) {
      busy_ = false;
      server_->in_flight.fetch_sub(1);
    }
  }

  // ---- Routes ----

  void Dispatch(Request req);
  // The answer to a request its Authorization does not allow (401, or 403
  // for a POST with the read token or with no token configured); nothing
  // when it may go on.
  std::optional<Response> Refuse(const Request& req, bool post) const;
  // GET /metrics: spool's statistics and the server's own, for Prometheus.
  Response Metrics(Runtime* runtime) const;
  // /readyz: 503 on a replicated primary with too few standbys.
  Response Readiness(Runtime* runtime) const;
  // 421 from a standby, naming its primary.
  Response Misdirected() const;
  // /v1/replication/*: the standbys' routes (server/replication_wire.h).
  void Replication(Runtime* runtime, const Request& req,
                   const std::vector<std::string_view>& seg,
                   std::string_view query);
  void Enqueue(Runtime* runtime, const Request& req);
  void EnqueueBatch(Runtime* runtime, const Request& req);
  void StartEvents(Runtime* runtime, std::string_view query,
                   const Request& req);

  template <class T, class Fn>
  void Answer(Future<T> future, Fn to_response) {
    future.Then(
        [self = shared_from_this(), to_response](const Result<T>& result) {
          if (!result.ok())
            return self->Respond(self->ErrorFor(result.status()));
          self->Respond(to_response(*result));
        });
  }
  // A future's JSON bytes as the body, written from the future's own
  // result (the callback holds the future, so the bytes stay alive).
  void AnswerJsonBytes(Future<std::string> future) {
    auto held = std::make_shared<Future<std::string>>(future);
    future.Then([self = shared_from_this(),
                 held = std::move(held)](const Result<std::string>& result) {
      if (!result.ok()) return self->Respond(self->ErrorFor(result.status()));
      self->RespondBytes(bhttp::status::ok, *result, held);
    });
  }

  // ---- Event streams ----

  void DoSend(const Frame& frame) {
    if (closed_) return;
    queued_bytes_ += frame->size();
    if (queued_bytes_ > server_->options().sse_max_queued_bytes)
      return DoClose();
    queue_.push_back(frame);
    if (!writing_) WriteNext();
  }
  void WriteNext() {
    if (queue_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    stream_.tcp().expires_after(server_->options().write_timeout);
    stream_.Visit([this](auto& stream) {
      asio::async_write(
          stream, asio::buffer(*queue_.front()),
          [self = shared_from_this()](beast::error_code ec, size_t) {
            self->stream_.tcp().expires_never();
            if (ec) return self->DoClose();
            self->queued_bytes_ -= self->queue_.front()->size();
            self->queue_.pop_front();
            self->WriteNext();
          });
    });
  }
  // Gives back this stream's places under max_event_streams and
  // max_live_listings.
  void ReleaseStream() {
    if (!admitted_stream_) return;
    admitted_stream_ = false;
    server_->ReleaseStream(admitted_listing_);
  }
  // Closes the stream after sse_max_duration; the client resumes.
  void StartLifetime() {
    lifetime_.expires_after(server_->options().sse_max_duration);
    lifetime_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->DoClose();
    });
  }
  // An event stream reads only to notice the client going away.
  void ReadUntilGone() {
    stream_.Visit([this](auto& stream) {
      stream.async_read_some(
          asio::buffer(probe_),
          [self = shared_from_this()](beast::error_code ec, size_t) {
            if (ec) return self->DoClose();
            self->ReadUntilGone();
          });
    });
  }

  Transport stream_;
  const asio::ip::address address_;
  ServerImpl* server_;
  asio::steady_timer lifetime_;
  // Counted by ServerImpl::AdmitStream (a listing too), until released.
  bool admitted_stream_ = false;
  bool admitted_listing_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  // The request in flight is a HEAD: its response carries no body.
  bool head_ = false;
  // A request was read and is not answered yet (counted in in_flight).
  bool busy_ = false;
  bool closed_ = false;
  // An event stream.
  bool sse_ = false;
  bool writing_ = false;
  size_t queued_bytes_ = 0;
  std::deque<Frame> queue_;
  std::vector<Watch> watches_;
  char probe_[256];
  // The response being written: its head and body, and what keeps an
  // external body alive. Reused from request to request.
  std::string out_head_;
  std::string out_body_;
  std::shared_ptr<const void> out_keep_;
};

// ---- EventHub ----

EventHub::Joined EventHub::Join(Runtime* runtime,
                                const std::shared_ptr<Connection>& stream,
                                std::string_view last_event_id) {
  bool subscribe = false;
  Joined joined;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return joined;
    subscribe = token_ == 0 && !subscribing_;
    if (subscribe) {
      subscribing_ = true;
      first_seq_ = next_seq_;
    }
    if (!last_event_id.empty()) {
      size_t dash = last_event_id.rfind('-');
      std::optional<uint64_t> seq;
      if (dash != std::string_view::npos &&
          last_event_id.substr(0, dash) == epoch_) {
        std::optional<TaskId> parsed = ParseId(last_event_id.substr(dash + 1));
        if (parsed) seq = *parsed;
        if (last_event_id.substr(dash + 1) == "0") seq = 0;
      }
      if (!seq) {
        joined.reset_reason =
            "Last-Event-ID is from another server run; events are kept "
            "in memory only";
      } else if (*seq + 1 < first_seq_ ||
                 (!ring_.empty() && *seq + 1 < ring_.front().first) ||
                 (ring_.empty() && *seq + 1 < next_seq_) || replay_ == 0) {
        joined.reset_reason = "events after Last-Event-ID are no longer kept";
      } else {
        for (const auto& [s, frame] : ring_) {
          if (s > *seq) joined.replay.push_back(frame);
        }
      }
    }
    streams_[stream.get()] = stream;
  }
  if (subscribe) {
    // Outside the lock: Subscribe's first delivery may come at once.
    uint64_t token =
        runtime->Subscribe([this](const TaskEvent& event) { OnEvent(event); });
    bool keep = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      subscribing_ = false;
      keep = !closed_;
      if (keep) token_ = token;
    }
    // Outside the lock too: Unsubscribe waits for a running OnEvent, which
    // takes the lock.
    if (!keep) runtime->Unsubscribe(token);
  }
  return joined;
}

void EventHub::OnEvent(const TaskEvent& event) {
  std::string data = EventJson(event);
  std::vector<std::shared_ptr<Connection>> targets;
  Frame frame;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t seq = next_seq_++;
    frame = std::make_shared<const std::string>(
        Frame_(epoch_ + "-" + std::to_string(seq), "task", data));
    if (replay_ > 0) {
      ring_.emplace_back(seq, frame);
      if (ring_.size() > replay_) ring_.pop_front();
    }
    targets.reserve(streams_.size());
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (auto stream = it->second.lock()) {
        targets.push_back(std::move(stream));
        ++it;
      } else {
        it = streams_.erase(it);
      }
    }
  }
  for (auto& stream : targets) stream->Send(frame);
}

void EventHub::Broadcast(const Frame& frame) {
  std::vector<std::shared_ptr<Connection>> targets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [raw, weak] : streams_) {
      if (auto stream = weak.lock()) targets.push_back(std::move(stream));
    }
  }
  for (auto& stream : targets) stream->Send(frame);
}

// ---- Routes ----

void Connection::Dispatch(Request req) {
  busy_ = true;
  server_->in_flight.fetch_add(1);
  server_->requests.fetch_add(1, std::memory_order_relaxed);
  keep_alive_ = req.keep_alive();
  version_ = req.version();
  unsigned version = version_;
  std::string_view target(req.target().data(), req.target().size());
  size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view query = question == std::string_view::npos
                               ? std::string_view()
                               : target.substr(question + 1);
  std::vector<std::string_view> seg = Segments(path);
  bhttp::verb method = req.method();
  bool get = method == bhttp::verb::get || method == bhttp::verb::head;
  bool post = method == bhttp::verb::post;

  auto method_not_allowed = [&](const char* allow) {
    Response res = Error(
        bhttp::status::method_not_allowed, "method_not_allowed",
        std::string(req.method_string()) + " is not allowed here; use " + allow,
        version);
    res.set(bhttp::field::allow, allow);
    Write(std::move(res));
  };

  head_ = method == bhttp::verb::head;
  bool health = seg.size() == 1 && (seg[0] == "healthz" || seg[0] == "readyz");
  // Health checks answer whatever Host a prober sends; nothing else does,
  // so that a name rebound to this address reaches nothing from a browser.
  if (!health) {
    if (req.count(bhttp::field::host) > 1) {
      return Write(Error(bhttp::status::bad_request, "bad_request",
                         "more than one Host header", version));
    }
    auto host = req[bhttp::field::host];
    bool missing = host.empty() && version < 11;  // HTTP/1.0 may omit it
    if (!missing && !server_->guard().HostAllowed(
                        std::string_view(host.data(), host.size()))) {
      return Write(Error(bhttp::status::misdirected_request,
                         "misdirected_request",
                         "spoold does not answer to Host \"" +
                             std::string(host.substr(0, 256)) +
                             "\"; add the name to server.allowed_hosts",
                         version));
    }
  }
  if (seg.size() == 1 && seg[0] == "healthz") {
    if (!get) return method_not_allowed("GET");
    return Write(Json(bhttp::status::ok, "{\"status\":\"ok\"}", version));
  }
  // The dashboard's files hold no data: a browser fetches them before it
  // has a token to send. Everything they show comes from guarded routes.
  if (const DashboardFile* file = FindDashboardFile(path)) {
    if (!get) return method_not_allowed("GET");
    Response res(bhttp::status::ok, version);
    res.set(bhttp::field::content_type, file->content_type);
    res.set(bhttp::field::cache_control, "no-cache");
    res.set("Content-Security-Policy", kDashboardPolicy);
    res.body().assign(file->data, file->size);
    return Write(std::move(res));
  }
  Runtime* runtime = server_->runtime();
  if (server_->stopping() || runtime == nullptr) {
    Response res = Error(bhttp::status::service_unavailable, "unavailable",
                         server_->stopping()
                             ? "spoold is stopping"
                             : "spoold is starting: recovery is not finished",
                         version);
    res.set(bhttp::field::retry_after, "1");
    return Write(std::move(res));
  }
  if (seg.size() == 1 && seg[0] == "readyz") {
    if (!get) return method_not_allowed("GET");
    return Write(Readiness(runtime));
  }
  // Standbys present their own secret, which opens nothing else.
  if (seg.size() >= 2 && seg[0] == "v1" && seg[1] == "replication") {
    return Replication(runtime, req, seg, query);
  }
  if (std::optional<Response> refused = Refuse(req, post)) {
    return Write(std::move(*refused));
  }
  // A standby's copy changes only by its primary's commits.
  if (post && !server_->primary().empty()) {
    return Write(Misdirected());
  }
  if (seg.size() == 2 && seg[0] == "v1" && seg[1] == "cluster") {
    if (!get) return method_not_allowed("GET");
    return Write(
        Json(bhttp::status::ok,
             ClusterJson(runtime->GetReplicationStatus(), server_->primary()),
             version));
  }
  if (seg.size() == 1 && seg[0] == "metrics") {
    if (!get) return method_not_allowed("GET");
    return Write(Metrics(runtime));
  }
  if (seg.empty() || seg[0] != "v1") {
    return Write(Error(bhttp::status::not_found, "not_found",
                       "no such path: " + std::string(path), version));
  }
  if (!get && !post)
    return method_not_allowed(
        seg.size() == 2 && seg[1] == "tasks" ? "GET, POST" : "GET or POST");
  std::string_view body(req.body());
  auto bad = [&](const Status& s) { Write(ErrorFor(s)); };
  auto id_at = [&](size_t i) { return ParseId(seg[i]); };
  // /v1/tasks, /v1/tasks:batch
  if (seg.size() == 2 && seg[1] == "tasks") {
    if (post) return Enqueue(runtime, req);
    TaskQuery task_query;
    if (Status s = ParseTaskQuery(query, true, &task_query); !s.ok())
      return bad(s);
    return AnswerJsonBytes(runtime->ListTasksJson(task_query));
  }
  if (seg.size() == 2 && seg[1] == "tasks:batch") {
    if (!post) return method_not_allowed("POST");
    return EnqueueBatch(runtime, req);
  }
  if (seg.size() >= 3 && seg[1] == "tasks") {
    std::optional<TaskId> id = id_at(2);
    if (!id) {
      return bad(Status::InvalidArgument(
          "task id: expected an integer in [1, 2^64-1], got \"" +
          std::string(seg[2]) + "\""));
    }
    if (seg.size() == 3) {
      if (!get) return method_not_allowed("GET");
      return AnswerJsonBytes(runtime->GetTaskJson(*id));
    }
    if (seg.size() == 4 && seg[3] == "history") {
      if (!get) return method_not_allowed("GET");
      return Answer(runtime->GetFailureHistory(*id),
                    [version](const FailureHistory& h) {
                      return Json(bhttp::status::ok, HistoryJson(h), version);
                    });
    }
    if (seg.size() == 4 && seg[3] == "cancel") {
      if (!post) return method_not_allowed("POST");
      TaskId task = *id;
      return Answer(
          runtime->Cancel(task), [version, task](const TaskStatus& status) {
            return Json(bhttp::status::ok,
                        "{\"id\":" + std::to_string(task) + ",\"status\":\"" +
                            TaskStatusName(status) + "\"}",
                        version);
          });
    }
    if (seg.size() == 4 && seg[3] == "retry") {
      if (!post) return method_not_allowed("POST");
      std::optional<RetryPolicy> policy;
      if (Status s = ParseRetryRequest(body, &policy); !s.ok()) return bad(s);
      TaskId task = *id;
      Future<void> retried = runtime->Retry(task, policy);
      retried.Then(
          [self = shared_from_this(), task, version](const Result<void>& r) {
            if (!r.ok()) return self->Respond(self->ErrorFor(r.status()));
            self->Respond(Json(
                bhttp::status::ok,
                "{\"id\":" + std::to_string(task) + ",\"status\":\"pending\"}",
                version));
          });
      return;
    }
  }
  if (seg.size() == 2 && seg[1] == "counts") {
    if (!get) return method_not_allowed("GET");
    return Answer(runtime->CountByType(), [version](const TypeCounts& counts) {
      return Json(bhttp::status::ok, CountsJson(counts), version);
    });
  }
  if (seg.size() == 2 && seg[1] == "purge") {
    if (!post) return method_not_allowed("POST");
    PurgeOptions purge;
    if (Status s = ParsePurgeRequest(body, &purge); !s.ok()) return bad(s);
    return Answer(
        runtime->Purge(std::move(purge)), [version](const uint64_t& deleted) {
          return Json(bhttp::status::ok,
                      "{\"deleted\":" + std::to_string(deleted) + "}", version);
        });
  }
  if (seg.size() == 2 && seg[1] == "backup") {
    // Into backup.dir only: nothing the client sends names a path.
    if (!post) return method_not_allowed("POST");
    if (!body.empty()) {
      return bad(Status::InvalidArgument(
          "POST /v1/backup takes no body: backups go to backup.dir"));
    }
    return Answer(runtime->Backup(), [version](const BackupInfo& info) {
      return Json(bhttp::status::created, BackupJson(info), version);
    });
  }
  if (seg.size() == 4 && seg[1] == "types" &&
      (seg[3] == "pause" || seg[3] == "resume")) {
    if (!post) return method_not_allowed("POST");
    std::optional<std::string> type = UrlDecode(seg[2], false);
    if (!type) return bad(Status::InvalidArgument("type: malformed %-escape"));
    bool pause = seg[3] == "pause";
    Status s = pause ? runtime->PauseType(*type) : runtime->ResumeType(*type);
    if (!s.ok()) return bad(s);
    return Write(Json(bhttp::status::ok,
                      "{\"type\":" + JsonString(*type) +
                          ",\"paused\":" + (pause ? "true" : "false") + "}",
                      version));
  }
  if (seg.size() == 2 && seg[1] == "events") {
    if (method != bhttp::verb::get) return method_not_allowed("GET");
    return StartEvents(runtime, query, req);
  }
  Write(Error(bhttp::status::not_found, "not_found",
              "no such path: " + std::string(path), version));
}

Response Connection::Readiness(Runtime* runtime) const {
  ReplicationStatus status = runtime->GetReplicationStatus();
  uint32_t connected = 0;
  for (const StandbyInfo& standby : status.standbys) {
    connected += standby.connected ? 1 : 0;
  }
  if (status.min_acks > 0 && connected < status.min_acks) {
    Response res =
        Json(bhttp::status::service_unavailable,
             "{\"status\":\"not_ready\",\"reason\":" +
                 JsonString("replication: " + std::to_string(connected) +
                            " of the " + std::to_string(status.min_acks) +
                            " standby(s) that must acknowledge each commit "
                            "(replication.min_acks) are connected") +
                 "}",
             version_);
    res.set(bhttp::field::retry_after, "1");
    return res;
  }
  return Json(bhttp::status::ok,
              "{\"status\":\"ready\",\"role\":" + JsonString(status.role) + "}",
              version_);
}

Response Connection::Misdirected() const {
  const std::string primary = server_->primary();
  return Json(bhttp::status::misdirected_request,
              "{\"error\":{\"code\":\"standby\",\"message\":" +
                  JsonString("this spoold is a standby: it serves reads from "
                             "its copy; send writes to the primary at " +
                             primary) +
                  "},\"primary\":" + JsonString(primary) + "}",
              version_);
}

void Connection::Replication(Runtime* runtime, const Request& req,
                             const std::vector<std::string_view>& seg,
                             std::string_view query) {
  unsigned version = version_;
  const RequestGuard& guard = server_->guard();
  if (!guard.serves_standbys()) {
    return Write(Error(bhttp::status::not_found, "not_found",
                       "replication is off here: it needs "
                       "replication.secret_file",
                       version));
  }
  auto auth = req[bhttp::field::authorization];
  if (!guard.IsStandby(std::string_view(auth.data(), auth.size()))) {
    Response res = Error(bhttp::status::unauthorized, "unauthorized",
                         "the replication routes need Authorization: Bearer "
                         "<secret from replication.secret_file>",
                         version);
    res.set(bhttp::field::www_authenticate, "Bearer");
    return Write(std::move(res));
  }
  if (!server_->primary().empty()) {
    return Write(Misdirected());
  }
  bhttp::verb method = req.method();
  if (seg.size() == 3 && seg[2] == "follow") {
    if (method != bhttp::verb::post) {
      return Write(Error(bhttp::status::method_not_allowed,
                         "method_not_allowed", "use POST", version));
    }
    FollowRequest request;
    if (Status s = ParseFollowQuery(query, &request); !s.ok()) {
      return Write(ErrorFor(s));
    }
    return runtime->FollowLog(
        std::move(request),
        [self = shared_from_this(), version](Result<FollowChunk> chunk) {
          if (!chunk.ok()) return self->Respond(self->ErrorFor(chunk.status()));
          if (chunk->gone) {
            return self->Respond(
                Json(bhttp::status::gone,
                     "{\"error\":{\"code\":\"gone\",\"message\":" +
                         JsonString(chunk->why) + "},\"log_id\":\"" +
                         std::to_string(chunk->log_id) + "\"}",
                     version));
          }
          if (chunk->stale_primary) {
            return self->Respond(
                Json(bhttp::status::conflict,
                     "{\"error\":{\"code\":\"stale_primary\",\"message\":" +
                         JsonString(chunk->why) +
                         "},\"epoch\":" + std::to_string(chunk->epoch) + "}",
                     version));
          }
          Response res(bhttp::status::ok, version);
          res.set(bhttp::field::content_type, "application/octet-stream");
          res.set(bhttp::field::cache_control, "no-store");
          res.set("X-Spool-Log-Id", std::to_string(chunk->log_id));
          res.set("X-Spool-Epoch", std::to_string(chunk->epoch));
          res.set("X-Spool-Primary-Position",
                  std::to_string(chunk->primary_position));
          res.body() = EncodeCommits(chunk->commits);
          self->Respond(std::move(res));
        });
  }
  const std::string& base_dir = server_->options().replication_base_dir;
  if (seg.size() == 3 && seg[2] == "base") {
    if (method != bhttp::verb::post) {
      return Write(Error(bhttp::status::method_not_allowed,
                         "method_not_allowed", "use POST", version));
    }
    // Before the backup: a log that starts over meanwhile makes the
    // standby's next follow say gone, and it copies again.
    uint64_t log_id = runtime->GetReplicationStatus().log_id;
    return Answer(runtime->BackupTo(base_dir),
                  [base_dir, log_id, version](const BackupInfo& info) {
                    std::vector<BaseFile> files;
                    Status s = ListBaseFiles(base_dir, &files);
                    if (!s.ok()) {
                      return Error(bhttp::status::internal_server_error,
                                   "io_error", s.message(), version);
                    }
                    return Json(bhttp::status::created,
                                BaseJson(info.id, log_id, files), version);
                  });
  }
  if (seg.size() == 4 && seg[2] == "base" && seg[3] == "file") {
    if (method != bhttp::verb::get) {
      return Write(Error(bhttp::status::method_not_allowed,
                         "method_not_allowed", "use GET", version));
    }
    std::optional<std::string> name = QueryParameter(query, "name");
    std::optional<std::string> offset_text = QueryParameter(query, "offset");
    std::optional<TaskId> offset = offset_text && *offset_text == "0"
                                       ? std::optional<TaskId>(0)
                                       : ParseId(offset_text.value_or(""));
    if (!name || !offset) {
      return Write(ErrorFor(Status::InvalidArgument(
          "expected ?name=FILE&offset=N from the base listing")));
    }
    std::string bytes;
    if (Status s = ReadBaseChunk(base_dir, *name, *offset, &bytes); !s.ok()) {
      return Write(ErrorFor(s));
    }
    Response res(bhttp::status::ok, version);
    res.set(bhttp::field::content_type, "application/octet-stream");
    res.set(bhttp::field::cache_control, "no-store");
    res.body() = std::move(bytes);
    return Write(std::move(res));
  }
  Write(Error(bhttp::status::not_found, "not_found",
              "no such replication route", version));
}

std::optional<Response> Connection::Refuse(const Request& req,
                                           bool post) const {
  const RequestGuard& guard = server_->guard();
  if (post && !guard.writable()) {
    return Error(bhttp::status::forbidden, "forbidden",
                 "mutations are disabled: spoold has no server.token_file",
                 version_);
  }
  if (!guard.locked()) return std::nullopt;  // loopback only (Create)
  auto auth = req[bhttp::field::authorization];
  Caller caller = guard.Identify(std::string_view(auth.data(), auth.size()));
  if (caller == Caller::kWriter || (caller == Caller::kReader && !post))
    return std::nullopt;
  if (caller == Caller::kReader) {
    return Error(bhttp::status::forbidden, "forbidden",
                 "the read-only token (server.read_token_file) cannot "
                 "change anything; this request needs the token from "
                 "server.token_file",
                 version_);
  }
  Response res =
      Error(bhttp::status::unauthorized, "unauthorized",
            post ? "this request needs Authorization: Bearer <token from "
                   "server.token_file>"
                 : "this request needs Authorization: Bearer <token from "
                   "server.token_file or server.read_token_file>",
            version_);
  res.set(bhttp::field::www_authenticate, "Bearer");
  return res;
}

Response Connection::Metrics(Runtime* runtime) const {
  std::string body = FormatPrometheus(runtime->GetStatistics());
  body += ReplicationMetrics(runtime->GetReplicationStatus());
  body +=
      "# HELP spoold_http_requests_total HTTP requests read since start.\n"
      "# TYPE spoold_http_requests_total counter\n"
      "spoold_http_requests_total " +
      std::to_string(server_->requests.load()) +
      "\n# HELP spoold_http_connections Connections open now, event streams "
      "included.\n"
      "# TYPE spoold_http_connections gauge\n"
      "spoold_http_connections " +
      std::to_string(server_->connection_count()) +
      "\n# HELP spoold_event_streams Event streams (GET /v1/events) open "
      "now.\n"
      "# TYPE spoold_event_streams gauge\n"
      "spoold_event_streams " +
      std::to_string(server_->hub().streams()) +
      "\n# HELP spoold_http_rejected_connections_total Connections refused "
      "past max_connections or max_connections_per_address.\n"
      "# TYPE spoold_http_rejected_connections_total counter\n"
      "spoold_http_rejected_connections_total " +
      std::to_string(server_->rejected_connections.load()) +
      "\n# HELP spoold_event_streams_rejected_total Event streams refused "
      "past max_event_streams or max_live_listings.\n"
      "# TYPE spoold_event_streams_rejected_total counter\n"
      "spoold_event_streams_rejected_total " +
      std::to_string(server_->rejected_streams.load()) +
      "\n# HELP spoold_tls_handshake_failures_total TLS handshakes that "
      "failed or timed out (a client without a trusted certificate, plain "
      "HTTP on the HTTPS port, a scan).\n"
      "# TYPE spoold_tls_handshake_failures_total counter\n"
      "spoold_tls_handshake_failures_total " +
      std::to_string(server_->tls_handshake_failures.load()) + "\n";
  Response res(bhttp::status::ok, version_);
  res.set(bhttp::field::content_type,
          "text/plain; version=0.0.4; charset=utf-8");
  res.body() = std::move(body);
  return res;
}

void Connection::Enqueue(Runtime* runtime, const Request& req) {
  TaskSpec spec;
  if (Status s = ParseTaskRequest(req.body(), &spec); !s.ok())
    return Write(ErrorFor(s));
  Ticket ticket = runtime->Enqueue(std::move(spec));
  TaskId assigned = ticket.id;
  unsigned version = version_;
  Answer(ticket.stored, [assigned, version](const TaskId& id) {
    // A dedup hit answers the active task's id, and stores nothing.
    if (id != assigned) {
      return Json(bhttp::status::ok,
                  "{\"id\":" + std::to_string(id) + ",\"deduplicated\":true}",
                  version);
    }
    return Json(bhttp::status::created, "{\"id\":" + std::to_string(id) + "}",
                version);
  });
}

void Connection::EnqueueBatch(Runtime* runtime, const Request& req) {
  std::vector<TaskSpec> specs;
  if (Status s = ParseBatchRequest(req.body(), &specs); !s.ok())
    return Write(ErrorFor(s));
  BatchTicket ticket = runtime->EnqueueBatch(std::move(specs));
  unsigned version = version_;
  Answer(ticket.stored, [version](const std::vector<TaskId>& ids) {
    std::string body = "{\"ids\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) body += ',';
      body += std::to_string(ids[i]);
    }
    return Json(bhttp::status::created, body + "]}", version);
  });
}

void Connection::StartEvents(Runtime* runtime, std::string_view query,
                             const Request& req) {
  // Parameters first, so that a bad one is an ordinary 400.
  std::optional<TaskId> task;
  std::optional<TaskQuery> listing;
  std::string_view rest = query;
  bool wants_list = false;
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view()
                                         : rest.substr(amp + 1);
    std::string_view key = pair.substr(0, pair.find('='));
    if (key.empty()) continue;
    if (key == "task") {
      std::optional<std::string> value = QueryParameter(pair, "task");
      task = value ? ParseId(*value) : std::nullopt;
      if (!task)
        return Write(
            ErrorFor(Status::InvalidArgument("task: expected a task id")));
    } else if (key == "status" || key == "type" || key == "group" ||
               key == "limit" || key == "order" || key == "created_from" ||
               key == "created_before" || key == "payload") {
      wants_list = true;
    } else {
      return Write(ErrorFor(Status::InvalidArgument(
          std::string(key) +
          ": unknown parameter; /v1/events takes task, status, type, "
          "group, created_from, created_before, order, payload and limit")));
    }
  }
  if (wants_list) {
    TaskQuery parsed;
    if (Status s = ParseTaskQuery(query, false, &parsed); !s.ok())
      return Write(ErrorFor(s));
    listing = parsed;
  }
  std::string last_event_id(req["Last-Event-ID"]);
  if (last_event_id.empty()) {
    if (auto value = QueryParameter(query, "last_event_id"))
      last_event_id = *value;
  }

  const char* limit = nullptr;
  if (!server_->AdmitStream(listing.has_value(), &limit)) {
    server_->rejected_streams.fetch_add(1, std::memory_order_relaxed);
    Response res =
        Error(bhttp::status::service_unavailable, "too_many_event_streams",
              std::string("spoold is at server.") + limit + "; retry later",
              version_);
    res.set(bhttp::field::retry_after, "1");
    return Write(std::move(res));
  }
  admitted_stream_ = true;
  admitted_listing_ = listing.has_value();

  // The stream: the header, then frames for the rest of the connection.
  sse_ = true;
  busy_ = false;
  server_->in_flight.fetch_sub(1);
  auto header = std::make_shared<const std::string>(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: "
      "no-store\r\n"
      "Connection: close\r\nX-Accel-Buffering: no\r\n\r\nretry: 2000\n\n");
  DoSend(header);
  auto self = shared_from_this();
  EventHub::Joined joined = server_->hub().Join(runtime, self, last_event_id);
  if (joined.reset_reason) {
    DoSend(std::make_shared<const std::string>(
        Frame_(server_->hub().CurrentId(), "reset",
               "{\"reason\":" + JsonString(*joined.reset_reason) + "}")));
  }
  for (const Frame& frame : joined.replay) DoSend(frame);

  std::weak_ptr<Connection> weak = self;
  ServerImpl* server = server_;
  auto emit = [weak, server](const char* event, std::string data) {
    if (auto stream = weak.lock()) {
      stream->Send(std::make_shared<const std::string>(
          Frame_(server->hub().CurrentId(), event, data)));
    }
  };
  Result<Watch> counts =
      runtime->WatchCountByType([emit](const Result<TypeCounts>& result) {
        if (result.ok()) return emit("counts", CountsJson(*result));
        auto [status, code] = ErrorOf(result.status());
        (void)status;
        emit("error", ErrorJson(code, result.status().message()));
      });
  if (counts.ok()) watches_.push_back(std::move(counts).value());
  if (task) {
    Result<Watch> watch = runtime->WatchTaskJson(
        *task, [emit](const Result<std::string>& result) {
          if (result.ok()) return emit("task_state", *result);
          auto [status, code] = ErrorOf(result.status());
          (void)status;
          emit("task_state", ErrorJson(code, result.status().message()));
        });
    if (watch.ok()) watches_.push_back(std::move(watch).value());
  }
  if (listing) {
    Result<Watch> watch = runtime->WatchListJson(
        *listing, [emit](const Result<std::string>& result) {
          if (result.ok()) return emit("list", *result);
          auto [status, code] = ErrorOf(result.status());
          (void)status;
          emit("list", ErrorJson(code, result.status().message()));
        });
    if (watch.ok()) watches_.push_back(std::move(watch).value());
  }
  StartLifetime();
  ReadUntilGone();
}

// ---- ServerImpl ----

Status ServerImpl::Start() {
  if (started_.exchange(true))
    return Status::FailedPrecondition("spoold server already started");
  std::string listen = options_.listen;
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument("server.listen: expected HOST:PORT, got \"" +
                                   listen + "\"");
  }
  std::string host = listen.substr(0, colon);
  std::string port_text = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  std::optional<TaskId> port =
      port_text == "0" ? std::optional<TaskId>(0) : ParseId(port_text);
  if (ec || !port || *port > 65535) {
    return Status::InvalidArgument(
        "server.listen: expected an IP address and a port, got \"" + listen +
        "\"");
  }
  tcp::endpoint endpoint(address, static_cast<uint16_t>(*port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::IOError("server.listen " + listen + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
  Accept();
  KeepAlive();
  for (int i = 0; i < options_.threads; ++i) {
    threads_.emplace_back([this, i] {
      std::string name = "spoold-io-" + std::to_string(i);
      pthread_setname_np(pthread_self(), name.c_str());
      io_->run();
    });
  }
  return Status::OK();
}

bool ServerImpl::AdmitFrom(const tcp::socket& socket, const char** limit) {
  beast::error_code ec;
  tcp::endpoint peer = socket.remote_endpoint(ec);
  // A peer already gone gets the busy answer's write error, and is closed.
  if (ec) {
    *limit = "max_connections";
    return false;
  }
  return Admit(peer.address(), limit);
}

std::string ServerImpl::BusyResponse(const char* limit) {
  std::string body =
      ErrorJson("too_many_connections",
                std::string("spoold is at server.") + limit + "; retry later");
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
         "application/json\r\n"
         "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

void ServerImpl::SendBusy(tcp::socket socket, const char* limit) {
  auto shared = std::make_shared<tcp::socket>(std::move(socket));
  auto busy = std::make_shared<const std::string>(BusyResponse(limit));
  asio::async_write(*shared, asio::buffer(*busy),
                    [shared, busy](beast::error_code, size_t) {
                      beast::error_code ignored;
                      shared->shutdown(tcp::socket::shutdown_both, ignored);
                      shared->close(ignored);
                    });
}

void ServerImpl::Accept() {
  acceptor_.async_accept(asio::make_strand(*io_), [this](beast::error_code ec,
                                                         tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      if (stopping_) {
        beast::error_code ignored;
        socket.close(ignored);
      } else if (const char* limit = nullptr; !AdmitFrom(socket, &limit)) {
        // Past a connection limit: one short answer, then close. A TLS
        // client could not read a plain answer: it is just closed.
        rejected_connections.fetch_add(1, std::memory_order_relaxed);
        if (tls_) {
          beast::error_code ignored;
          socket.close(ignored);
        } else {
          SendBusy(std::move(socket), limit);
        }
      } else {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        asio::ip::address address = socket.remote_endpoint(ignored).address();
        auto connection = std::make_shared<Connection>(
            tls_ ? Transport(std::move(socket), *tls_)
                 : Transport(std::move(socket)),
            address, this);
        Register(connection.get(), connection);
        connection->Run();
      }
    }
    Accept();
  });
}

void ServerImpl::KeepAlive() {
  keepalive_timer_.expires_after(options_.sse_keepalive);
  keepalive_timer_.async_wait([this](beast::error_code ec) {
    if (ec || stopping_) return;
    static const Frame kComment =
        std::make_shared<const std::string>(": keep-alive\n\n");
    hub_.Broadcast(kComment);
    KeepAlive();
  });
}

std::vector<std::shared_ptr<Connection>> ServerImpl::Connections() {
  std::vector<std::shared_ptr<Connection>> out;
  std::lock_guard<std::mutex> lock(connections_mutex_);
  for (auto& [raw, weak] : connections_) {
    if (auto c = weak.lock()) out.push_back(std::move(c));
  }
  return out;
}

void ServerImpl::SwapRuntime(Runtime* runtime, std::string primary) {
  Runtime* old = runtime_.exchange(nullptr);
  // Event streams and live listings read the old runtime: they end, and
  // their clients reconnect to the new one.
  hub_.Rebind(old, NewEpoch());
  for (auto& c : Connections()) c->StopSoft();
  // Requests in flight keep the runtime they started on, which outlives
  // the server (a closed one answers Closed): nothing to wait for. Waiting
  // here held a failover up to stop_timeout while clients kept sending.
  {
    std::lock_guard<std::mutex> lock(primary_mutex_);
    primary_ = std::move(primary);
  }
  runtime_.store(runtime);
}

void ServerImpl::Stop() {
  if (stopping_.exchange(true)) return;
  if (started_) {
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    asio::post(*io_, [this] { keepalive_timer_.cancel(); });
  }
  hub_.Close(runtime_.load());
  for (auto& c : Connections()) c->StopSoft();
  auto deadline = std::chrono::steady_clock::now() + options_.stop_timeout;
  while (in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& c : Connections()) c->StopHard();
  // Until the connections are gone (their strands run the closes).
  auto gone = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (connection_count() > 0 && std::chrono::steady_clock::now() < gone &&
         started_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

Status ServerOptions::Validate() const {
  auto fail = [](const char* key, const std::string& why) {
    return Status::InvalidArgument(std::string("server.") + key + ": " + why);
  };
  if (listen.empty()) return fail("listen", "must not be empty");
  if (threads < 1 || threads > 64) return fail("threads", "expected 1 to 64");
  if (max_body_bytes < 1 || max_body_bytes > (size_t{1} << 30)) {
    return fail("max_body_bytes", "expected 1 to 1073741824");
  }
  for (auto [key, value] :
       {std::pair{"max_connections", max_connections},
        std::pair{"max_connections_per_address", max_connections_per_address},
        std::pair{"max_event_streams", max_event_streams}}) {
    if (value < 1 || value > 1'000'000)
      return fail(key, "expected 1 to 1000000");
  }
  if (max_live_listings > 1'000'000)
    return fail("max_live_listings", "expected 0 to 1000000");
  if (sse_max_duration.count() < 1000 ||
      sse_max_duration.count() > 604'800'000) {
    return fail("sse_max_duration_ms", "expected 1000 to 604800000");
  }
  for (auto [key, value] : {std::pair{"header_timeout_ms", header_timeout},
                            std::pair{"body_timeout_ms", body_timeout},
                            std::pair{"write_timeout_ms", write_timeout},
                            std::pair{"sse_keepalive_ms", sse_keepalive}}) {
    if (value.count() < 1 || value.count() > 86'400'000)
      return fail(key, "expected 1 to 86400000");
  }
  if (stop_timeout.count() < 0 || stop_timeout.count() > 86'400'000) {
    return fail("stop_timeout_ms", "expected 0 to 86400000");
  }
  if (sse_replay_events > 1'000'000)
    return fail("sse_replay_events", "expected 0 to 1000000");
  if (sse_max_queued_bytes < 4096)
    return fail("sse_max_queued_bytes", "expected at least 4096");
  return Status::OK();
}

Status HttpServer::Create(ServerOptions options,
                          std::unique_ptr<HttpServer>* server) {
  if (Status s = options.Validate(); !s.ok()) return s;
  RequestGuard guard;
  if (Status s = RequestGuard::Create(options, &guard); !s.ok()) return s;
  std::shared_ptr<asio::ssl::context> tls;
  if (Status s = MakeTlsContext(options, &tls); !s.ok()) return s;
  *server = std::make_unique<ServerImpl>(std::move(options), std::move(guard),
                                         std::move(tls));
  return Status::OK();
}

}  // namespace spool::http
