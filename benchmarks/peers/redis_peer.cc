// The "redis" peer: Redis as a durable reliable queue. The server runs with
// the append-only file and appendfsync=always, so it writes and fsyncs the
// AOF before it sends the replies of an event-loop pass (group commit across
// clients); RDB snapshots are off. The queue is the reliable-queue pattern:
//   enqueue:  store the task hash and LPUSH its id onto the pending list;
//   claim:    LMOVE pending -> processing, mark the task running;
//   complete: LREM it from processing, mark the task completed.
// Each step is one Lua script, so it is atomic and costs one round trip.
// Lists are FIFO: the pattern has no priorities (all benchmark tasks have
// priority 0).

#include "benchmarks/peers/peers_internal.h"

#if SPOOL_BENCH_HAVE_HIREDIS

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <hiredis/hiredis.h>
#include <initializer_list>
#include <memory>
#include <string>
#include <sys/time.h>
#include <vector>

#include "benchmarks/peers/server_process.h"

namespace spool::bench {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kConnectTimeout{5000};
constexpr milliseconds kProbeTimeout{250};
// Bounds every command, so that a hung server fails a call instead of
// hanging the benchmark.
constexpr milliseconds kCommandTimeout{30000};

constexpr char kPendingKey[] = "spool:pending";
constexpr char kProcessingKey[] = "spool:processing";
constexpr char kNextIdKey[] = "spool:next_id";
constexpr char kTaskPrefix[] = "spool:task:";

// KEYS: pending, next_id. ARGV: task key prefix, type, payload, now (ms).
// The task key is derived in the script, which standalone Redis allows.
constexpr char kEnqueueScript[] = R"lua(
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', ARGV[1] .. id, 'type', ARGV[2], 'payload', ARGV[3],
           'status', 'pending', 'priority', 0, 'attempts', 0,
           'created_at', ARGV[4], 'updated_at', ARGV[4])
redis.call('LPUSH', KEYS[1], id)
return id
)lua";

// KEYS: pending, processing. ARGV: task key prefix, now (ms).
// Returns the claimed id, or nil when nothing is pending.
constexpr char kClaimScript[] = R"lua(
local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
if not id then return false end
redis.call('HSET', ARGV[1] .. id, 'status', 'running', 'updated_at', ARGV[2])
redis.call('HINCRBY', ARGV[1] .. id, 'attempts', 1)
return id
)lua";

// KEYS: processing. ARGV: task key prefix, id, now (ms).
constexpr char kCompleteScript[] = R"lua(
if redis.call('LREM', KEYS[1], 1, ARGV[2]) == 0 then
  return redis.error_reply('task ' .. ARGV[2] .. ' is not being processed')
end
redis.call('HSET', ARGV[1] .. ARGV[2], 'status', 'completed',
           'updated_at', ARGV[3])
return 1
)lua";

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

timeval ToTimeval(milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

std::string NowMs() {
  return std::to_string(std::chrono::duration_cast<milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
}

Result<ContextPtr> ConnectTo(uint16_t port, milliseconds connect_timeout) {
  ContextPtr c(
      redisConnectWithTimeout("127.0.0.1", port, ToTimeval(connect_timeout)));
  const std::string where =
      "redis: connect to 127.0.0.1:" + std::to_string(port);
  if (c == nullptr) return Status::IOError(where + ": out of memory");
  if (c->err) return Status::IOError(where + ": " + c->errstr);
  if (redisSetTimeout(c.get(), ToTimeval(kCommandTimeout)) != REDIS_OK) {
    return Status::IOError(where + ": cannot set the command timeout");
  }
  return c;
}

// The status of a reply to `what`: an I/O error, an error reply, or OK.
Status ReplyStatus(redisContext* c, const redisReply* reply,
                   const std::string& what) {
  if (reply == nullptr) {
    return Status::IOError("redis: " + what + ": " +
                           (c->err ? c->errstr : "no reply"));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    return Status::IOError("redis: " + what + ": " +
                           std::string(reply->str, reply->len));
  }
  return Status::OK();
}

// Sends one command (binary-safe arguments) and returns its reply.
Result<ReplyPtr> Call(redisContext* c,
                      std::initializer_list<std::string_view> args,
                      const std::string& what) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  ReplyPtr reply(static_cast<redisReply*>(redisCommandArgv(
      c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  Status s = ReplyStatus(c, reply.get(), what);
  if (!s.ok()) return s;
  return reply;
}

// The value of `field` in an INFO reply ("field:value\r\n" lines).
std::string InfoField(std::string_view info, std::string_view field) {
  std::string needle = "\n" + std::string(field) + ":";
  std::string text = "\n" + std::string(info);
  size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  size_t start = at + needle.size();
  size_t end = text.find_first_of("\r\n", start);
  return text.substr(start, end == std::string::npos ? end : end - start);
}

// The value CONFIG GET reports for `name`.
Result<std::string> ConfigGet(redisContext* c, std::string_view name) {
  Result<ReplyPtr> reply =
      Call(c, {"CONFIG", "GET", name}, "CONFIG GET " + std::string(name));
  if (!reply.ok()) return reply.status();
  const redisReply* r = reply->get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
    return Status::IOError("redis: CONFIG GET " + std::string(name) +
                           ": unexpected reply");
  }
  return std::string(r->element[1]->str, r->element[1]->len);
}

class RedisClient final : public PeerClient {
 public:
  static Result<std::unique_ptr<RedisClient>> Create(uint16_t port) {
    Result<ContextPtr> c = ConnectTo(port, kConnectTimeout);
    if (!c.ok()) return c.status();
    std::unique_ptr<RedisClient> client(new RedisClient(std::move(c).value()));
    struct {
      std::string* sha;
      const char* script;
      const char* name;
    } scripts[] = {
        {&client->enqueue_sha_, kEnqueueScript, "enqueue"},
        {&client->claim_sha_, kClaimScript, "claim"},
        {&client->complete_sha_, kCompleteScript, "complete"},
    };
    for (auto& s : scripts) {
      Result<ReplyPtr> reply =
          Call(client->c_.get(), {"SCRIPT", "LOAD", s.script},
               std::string("SCRIPT LOAD (") + s.name + ")");
      if (!reply.ok()) return reply.status();
      *s.sha = std::string((*reply)->str, (*reply)->len);
    }
    return client;
  }

  Status Enqueue(std::string_view type, std::string_view payload) override {
    const std::string now = NowMs();
    Result<ReplyPtr> reply = Call(c_.get(),
                                  {"EVALSHA", enqueue_sha_, "2", kPendingKey,
                                   kNextIdKey, kTaskPrefix, type, payload, now},
                                  "enqueue");
    return reply.status();
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    // Pipelined: many scripts per round trip and per AOF fsync.
    constexpr size_t kPipelineDepth = 500;
    const std::string now = NowMs();
    const char* argv[] = {"EVALSHA",   enqueue_sha_.c_str(), "2",
                          kPendingKey, kNextIdKey,           kTaskPrefix,
                          type.data(), payload.data(),       now.c_str()};
    const size_t lengths[] = {7,
                              enqueue_sha_.size(),
                              1,
                              sizeof(kPendingKey) - 1,
                              sizeof(kNextIdKey) - 1,
                              sizeof(kTaskPrefix) - 1,
                              type.size(),
                              payload.size(),
                              now.size()};
    constexpr int kArgc = sizeof(argv) / sizeof(argv[0]);
    for (size_t done = 0; done < n;) {
      const size_t batch = std::min(kPipelineDepth, n - done);
      for (size_t i = 0; i < batch; ++i) {
        if (redisAppendCommandArgv(c_.get(), kArgc, argv, lengths) !=
            REDIS_OK) {
          return Status::IOError(std::string("redis: preload: ") + c_->errstr);
        }
      }
      // Every reply is read, even after an error reply, so that the next
      // call does not read this batch's leftovers.
      Status first_error;
      for (size_t i = 0; i < batch; ++i) {
        void* raw = nullptr;
        if (redisGetReply(c_.get(), &raw) != REDIS_OK) raw = nullptr;
        ReplyPtr reply(static_cast<redisReply*>(raw));
        Status s = ReplyStatus(c_.get(), reply.get(), "preload");
        if (first_error.ok()) first_error = s;
        if (c_->err) break;  // The connection is gone.
      }
      if (!first_error.ok()) return first_error;
      done += batch;
    }
    return Status::OK();
  }

  Status ClaimAndComplete() override {
    Result<ReplyPtr> claimed = Call(c_.get(),
                                    {"EVALSHA", claim_sha_, "2", kPendingKey,
                                     kProcessingKey, kTaskPrefix, NowMs()},
                                    "claim");
    if (!claimed.ok()) return claimed.status();
    const redisReply* r = claimed->get();
    if (r->type == REDIS_REPLY_NIL) {
      return Status::NotFound("redis: no pending task");
    }
    if (r->type != REDIS_REPLY_STRING) {
      return Status::IOError("redis: claim: unexpected reply type " +
                             std::to_string(r->type));
    }
    const std::string id(r->str, r->len);
    return Call(c_.get(),
                {"EVALSHA", complete_sha_, "1", kProcessingKey, kTaskPrefix, id,
                 NowMs()},
                "complete task " + id)
        .status();
  }

 private:
  explicit RedisClient(ContextPtr c) : c_(std::move(c)) {}

  ContextPtr c_;
  std::string enqueue_sha_, claim_sha_, complete_sha_;
};

// Ready when the server on `port` answers INFO with our child's pid.
Status ProbeRedis(uint16_t port, pid_t pid) {
  Result<ContextPtr> c = ConnectTo(port, kProbeTimeout);
  if (!c.ok()) return c.status();
  redisSetTimeout(c->get(), ToTimeval(kProbeTimeout));
  Result<ReplyPtr> info = Call(c->get(), {"INFO", "server"}, "INFO server");
  if (!info.ok()) return info.status();  // E.g. LOADING.
  std::string server_pid =
      InfoField(std::string_view((*info)->str, (*info)->len), "process_id");
  if (server_pid != std::to_string(pid)) {
    return Status::Busy("redis: 127.0.0.1:" + std::to_string(port) +
                        " is served by pid " + server_pid + ", not ours (" +
                        std::to_string(pid) + ")");
  }
  return Status::OK();
}

class RedisPeer final : public Peer {
 public:
  explicit RedisPeer(const ServerPeerOptions& options) : options_(options) {
    if (options_.binary.empty()) options_.binary = kRedisServerPath;
  }
  ~RedisPeer() override { Teardown(); }

  std::string name() const override { return "redis"; }

  Status Setup(const std::string& workdir) override {
    if (server_ != nullptr) {
      return Status::FailedPrecondition("redis: Setup called twice");
    }
    LaunchSpec spec;
    spec.port = options_.port;
    spec.start_timeout = options_.start_timeout;
    spec.command = [&](uint16_t port) {
      ChildCommand command;
      command.argv = {options_.binary,
                      "--port",
                      std::to_string(port),
                      "--bind",
                      "127.0.0.1",
                      "--dir",
                      workdir,
                      "--appendonly",
                      "yes",
                      "--appendfsync",
                      "always",
                      "--save",
                      "",
                      "--daemonize",
                      "no",
                      "--logfile",
                      "",
                      "--always-show-logo",
                      "no"};
      command.working_dir = workdir;
      command.log_path = workdir + "/redis.log";
      command.stop_signal = SIGTERM;
      return command;
    };
    spec.probe = ProbeRedis;
    Result<LaunchedServer> launched = LaunchServer(spec);
    if (!launched.ok()) return launched.status().WithContext("redis");
    server_ = std::move(launched->process);
    port_ = launched->port;

    Status s = Inspect();
    if (!s.ok()) Teardown();
    return s;
  }

  void Teardown() override {
    if (server_ != nullptr) {
      Status s = server_->Stop();
      if (!s.ok())
        std::fprintf(stderr, "redis peer: %s\n", s.ToString().c_str());
      server_.reset();
    }
    port_ = 0;
  }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (server_ == nullptr) {
      return Status::FailedPrecondition("redis: Connect before Setup");
    }
    Result<std::unique_ptr<RedisClient>> client = RedisClient::Create(port_);
    if (!client.ok()) return client.status();
    return std::unique_ptr<PeerClient>(std::move(client).value());
  }

  std::string Describe() const override {
    std::string settings = settings_.empty()
                               ? "appendonly=yes appendfsync=always save=\"\""
                               : settings_;
    return "redis: " + version_ + " (hiredis " + std::to_string(HIREDIS_MAJOR) +
           "." + std::to_string(HIREDIS_MINOR) + "." +
           std::to_string(HIREDIS_PATCH) + "), " + settings +
           " (AOF fsynced before each event loop's replies), reliable queue: "
           "one Lua script each for enqueue, claim (LMOVE) and completion "
           "(LREM); FIFO, no priorities";
  }

 private:
  // Reads back the version and durability settings in force, and checks
  // that they are what the comparison needs.
  Status Inspect() {
    Result<ContextPtr> c = ConnectTo(port_, kConnectTimeout);
    if (!c.ok()) return c.status();
    Result<ReplyPtr> info = Call(c->get(), {"INFO", "server"}, "INFO server");
    if (!info.ok()) return info.status();
    std::string version = InfoField(
        std::string_view((*info)->str, (*info)->len), "redis_version");
    int major = 0, minor = 0;
    std::sscanf(version.c_str(), "%d.%d", &major, &minor);
    if (major < 6 || (major == 6 && minor < 2)) {
      return Status::NotSupported("redis: redis-server " + version +
                                  " lacks LMOVE (needs 6.2 or later)");
    }
    version_ = "redis-server " + version;
    settings_.clear();
    for (const auto& [name, want] :
         {std::pair<const char*, const char*>{"appendonly", "yes"},
          {"appendfsync", "always"},
          {"save", ""}}) {
      Result<std::string> value = ConfigGet(c->get(), name);
      if (!value.ok()) return value.status();
      if (*value != want) {
        return Status::FailedPrecondition(
            std::string("redis: the server runs with ") + name + "=\"" +
            *value + "\", not \"" + want + "\"");
      }
      settings_ += (settings_.empty() ? "" : " ") + std::string(name) + "=" +
                   (value->empty() ? "\"\"" : *value);
    }
    return Status::OK();
  }

  ServerPeerOptions options_;
  std::unique_ptr<ChildProcess> server_;  // Null unless set up.
  uint16_t port_ = 0;
  std::string version_ = "redis-server";
  std::string settings_;  // As the server reported them.
};

}  // namespace

std::unique_ptr<Peer> MakeRedisPeer(const ServerPeerOptions& options) {
  return std::make_unique<RedisPeer>(options);
}

}  // namespace spool::bench

#else  // !SPOOL_BENCH_HAVE_HIREDIS

namespace spool::bench {

std::unique_ptr<Peer> MakeRedisPeer(const ServerPeerOptions&) {
  return MakeUnavailablePeer("redis", "built without hiredis (libhiredis-dev)");
}

}  // namespace spool::bench

#endif  // SPOOL_BENCH_HAVE_HIREDIS
