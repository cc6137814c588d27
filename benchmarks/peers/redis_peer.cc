// The Redis peers: Redis as a durable reliable queue, used in two ways.
//
// Both run the same server: the append-only file with appendfsync=always, so
// it writes and fsyncs the AOF before it sends the replies of an event-loop
// pass (group commit across clients); RDB snapshots are off. Both use the
// reliable-queue pattern, a pending and a processing list; they differ in
// what a step sends:
//
// "redis" keeps a hash per task (type, payload, status, attempts, times), and
// each step is one Lua script, so it is atomic and costs one round trip:
//   enqueue:  INCR the id, HSET the task hash, LPUSH the id onto pending;
//   claim:    LMOVE pending -> processing, HSET status, HINCRBY attempts;
//   complete: LREM the id from processing, HSET status.
//
// "redis_plain" is the fastest common use: no scripts and no task hash; the
// list element is the task itself (a client-made id, type and payload in one
// string), and each step is one plain command:
//   enqueue:  LPUSH pending <task>;
//   claim:    LMOVE pending -> processing (returns <task>);
//   complete: LREM processing 1 <task>.
//
// Lists are FIFO: the pattern has no priorities (all benchmark tasks have
// priority 0).

#include "benchmarks/peers/peers_internal.h"

#if SPOOL_BENCH_HAVE_HIREDIS

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
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

// Commands per round trip (and per AOF fsync) in Preload.
constexpr size_t kPipelineDepth = 500;

// The "redis" peer's other keys (the lists are in peers_internal.h).
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

// A connection whose every command is bounded by kCommandTimeout.
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

// One command, binary-safe: its arguments need only outlive the object.
class Command {
 public:
  explicit Command(std::initializer_list<std::string_view> args) {
    for (std::string_view a : args) {
      argv_.push_back(a.data());
      lengths_.push_back(a.size());
    }
  }

  // Sends it and waits for the reply: null on an I/O error or timeout.
  redisReply* Send(redisContext* c) {
    return static_cast<redisReply*>(
        redisCommandArgv(c, argc(), argv_.data(), lengths_.data()));
  }
  // Appends it to `c`'s output buffer, for a pipeline: REDIS_OK or REDIS_ERR.
  int Append(redisContext* c) {
    return redisAppendCommandArgv(c, argc(), argv_.data(), lengths_.data());
  }

 private:
  int argc() const { return static_cast<int>(argv_.size()); }

  std::vector<const char*> argv_;
  std::vector<size_t> lengths_;
};

// Sends one command and returns its reply.
Result<ReplyPtr> Call(redisContext* c,
                      std::initializer_list<std::string_view> args,
                      const std::string& what) {
  ReplyPtr reply(Command(args).Send(c));
  Status s = ReplyStatus(c, reply.get(), what);
  if (!s.ok()) return s;
  return reply;
}

// Sends `n` commands, pipelined kPipelineDepth per round trip (and so per
// AOF fsync). Each call of `append` appends the next to `c`'s output buffer,
// returning REDIS_OK or REDIS_ERR.
Status Pipeline(redisContext* c, size_t n, const std::function<int()>& append,
                const std::string& what) {
  for (size_t done = 0; done < n;) {
    const size_t batch = std::min(kPipelineDepth, n - done);
    for (size_t i = 0; i < batch; ++i) {
      if (append() != REDIS_OK) {
        return Status::IOError("redis: " + what + ": " + c->errstr);
      }
    }
    // Every reply is read, even after an error reply, so that the next
    // call does not read this batch's leftovers.
    Status first_error;
    for (size_t i = 0; i < batch; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) raw = nullptr;
      ReplyPtr reply(static_cast<redisReply*>(raw));
      Status s = ReplyStatus(c, reply.get(), what);
      if (first_error.ok()) first_error = s;
      if (c->err) break;  // The connection is gone.
    }
    if (!first_error.ok()) return first_error;
    done += batch;
  }
  return Status::OK();
}

// A claim's reply: the claimed element, or NotFound when nothing is pending.
Result<std::string> ClaimedElement(const redisReply* r) {
  if (r->type == REDIS_REPLY_NIL) {
    return Status::NotFound("redis: no pending task");
  }
  if (r->type != REDIS_REPLY_STRING) {
    return Status::IOError("redis: claim: unexpected reply type " +
                           std::to_string(r->type));
  }
  return std::string(r->str, r->len);
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

// The "redis" peer's client: a task hash and one Lua script per step.
class RedisClient final : public PeerClient {
 public:
  static Result<std::unique_ptr<PeerClient>> Create(uint16_t port) {
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
    return std::unique_ptr<PeerClient>(std::move(client));
  }

  Status Enqueue(std::string_view type, std::string_view payload) override {
    const std::string now = NowMs();
    return Call(c_.get(),
                {"EVALSHA", enqueue_sha_, "2", kRedisPendingKey, kNextIdKey,
                 kTaskPrefix, type, payload, now},
                "enqueue")
        .status();
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    const std::string now = NowMs();
    Command command({"EVALSHA", enqueue_sha_, "2", kRedisPendingKey, kNextIdKey,
                     kTaskPrefix, type, payload, now});
    return Pipeline(
        c_.get(), n, [&] { return command.Append(c_.get()); }, "preload");
  }

  Status ClaimAndComplete() override {
    Result<ReplyPtr> claimed =
        Call(c_.get(),
             {"EVALSHA", claim_sha_, "2", kRedisPendingKey, kRedisProcessingKey,
              kTaskPrefix, NowMs()},
             "claim");
    if (!claimed.ok()) return claimed.status();
    Result<std::string> id = ClaimedElement(claimed->get());
    if (!id.ok()) return id.status();
    return Call(c_.get(),
                {"EVALSHA", complete_sha_, "1", kRedisProcessingKey,
                 kTaskPrefix, *id, NowMs()},
                "complete task " + *id)
        .status();
  }

 private:
  explicit RedisClient(ContextPtr c) : c_(std::move(c)) {}

  ContextPtr c_;
  std::string enqueue_sha_, claim_sha_, complete_sha_;
};

// The "redis_plain" peer's client: the list element is the task, and each
// step is one plain command.
class RedisPlainClient final : public PeerClient {
 public:
  static Result<std::unique_ptr<PeerClient>> Create(uint16_t port) {
    Result<ContextPtr> c = ConnectTo(port, kConnectTimeout);
    if (!c.ok()) return c.status();
    // The connection's id, unique for the server's life, makes the ids this
    // client gives its tasks unique without a round trip per task.
    Result<ReplyPtr> id = Call(c->get(), {"CLIENT", "ID"}, "CLIENT ID");
    if (!id.ok()) return id.status();
    if ((*id)->type != REDIS_REPLY_INTEGER) {
      return Status::IOError("redis_plain: CLIENT ID: unexpected reply type " +
                             std::to_string((*id)->type));
    }
    return std::unique_ptr<PeerClient>(new RedisPlainClient(
        std::move(c).value(), std::to_string((*id)->integer)));
  }

  Status Enqueue(std::string_view type, std::string_view payload) override {
    Status s = CheckType(type);
    if (!s.ok()) return s;
    return Call(c_.get(),
                {"LPUSH", kRedisPlainPendingKey, Serialize(type, payload)},
                "enqueue")
        .status();
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    Status s = CheckType(type);
    if (!s.ok()) return s;
    return Pipeline(
        c_.get(), n,
        [&] {
          const std::string task = Serialize(type, payload);
          return Command({"LPUSH", kRedisPlainPendingKey, task})
              .Append(c_.get());
        },
        "preload");
  }

  Status ClaimAndComplete() override {
    Result<ReplyPtr> claimed = Call(c_.get(),
                                    {"LMOVE", kRedisPlainPendingKey,
                                     kRedisPlainProcessingKey, "RIGHT", "LEFT"},
                                    "claim");
    if (!claimed.ok()) return claimed.status();
    Result<std::string> task = ClaimedElement(claimed->get());
    if (!task.ok()) return task.status();
    const std::string what =
        "complete task " + task->substr(0, task->find('\n'));
    Result<ReplyPtr> removed =
        Call(c_.get(), {"LREM", kRedisPlainProcessingKey, "1", *task}, what);
    if (!removed.ok()) return removed.status();
    if ((*removed)->type != REDIS_REPLY_INTEGER || (*removed)->integer != 1) {
      return Status::IOError("redis: " + what + ": it is not being processed");
    }
    return Status::OK();
  }

 private:
  RedisPlainClient(ContextPtr c, std::string client_id)
      : c_(std::move(c)), id_prefix_(std::move(client_id) + ".") {}

  // The task is "<client id>.<sequence number>\n<type>\n<payload>", so the
  // type must not hold a newline for the element to split back into its
  // parts.
  static Status CheckType(std::string_view type) {
    if (type.find('\n') == std::string_view::npos) return Status::OK();
    return Status::InvalidArgument("redis_plain: a task type with a newline");
  }

  std::string Serialize(std::string_view type, std::string_view payload) {
    std::string task = id_prefix_ + std::to_string(next_seq_++);
    task.reserve(task.size() + type.size() + payload.size() + 2);
    task.append("\n").append(type).append("\n").append(payload);
    return task;
  }

  ContextPtr c_;
  std::string id_prefix_;
  uint64_t next_seq_ = 1;
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

// How one of the Redis peers uses the server.
struct RedisPattern {
  const char* name;  // The peer's name.
  // For Describe: what each step sends.
  const char* steps;
  Result<std::unique_ptr<PeerClient>> (*connect)(uint16_t port);
};

constexpr RedisPattern kLuaPattern = {
    "redis",
    "reliable queue with a hash per task, one Lua script (EVALSHA) per step: "
    "enqueue INCR + HSET + LPUSH, claim LMOVE + HSET + HINCRBY, completion "
    "LREM + HSET; FIFO, no priorities",
    RedisClient::Create};

constexpr RedisPattern kPlainPattern = {
    "redis_plain",
    "plain reliable queue, no scripts and no task hash, one command per step: "
    "enqueue LPUSH of the task (id, type and payload in one string), claim "
    "LMOVE pending -> processing, completion LREM; FIFO, no priorities, no "
    "status or attempt count",
    RedisPlainClient::Create};

// A redis-server with the AOF fsynced on every write, used as `pattern_`
// says.
class RedisPeer final : public Peer {
 public:
  RedisPeer(const ServerPeerOptions& options, const RedisPattern& pattern)
      : options_(options), pattern_(pattern) {
    if (options_.binary.empty()) options_.binary = kRedisServerPath;
  }
  ~RedisPeer() override { Teardown(); }

  std::string name() const override { return pattern_.name; }

  Status Setup(const std::string& workdir) override {
    if (server_ != nullptr) {
      return Status::FailedPrecondition(name() + ": Setup called twice");
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
    if (!launched.ok()) return launched.status().WithContext(name());
    server_ = std::move(launched->process);
    port_ = launched->port;

    Status s = Inspect();
    if (!s.ok()) Teardown();
    return s;
  }

  void Teardown() override {
    if (server_ != nullptr) {
      Status s = server_->Stop();
      if (!s.ok()) {
        std::fprintf(stderr, "%s peer: %s\n", pattern_.name,
                     s.ToString().c_str());
      }
      server_.reset();
    }
    port_ = 0;
  }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (server_ == nullptr) {
      return Status::FailedPrecondition(name() + ": Connect before Setup");
    }
    return pattern_.connect(port_);
  }

  std::string Describe() const override {
    std::string settings = settings_.empty()
                               ? "appendonly=yes appendfsync=always save=\"\""
                               : settings_;
    return name() + ": " + version_ + " (hiredis " +
           std::to_string(HIREDIS_MAJOR) + "." + std::to_string(HIREDIS_MINOR) +
           "." + std::to_string(HIREDIS_PATCH) + "), " + settings +
           " (AOF fsynced before each event loop's replies), " + pattern_.steps;
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
      return Status::NotSupported(name() + ": redis-server " + version +
                                  " lacks LMOVE (needs 6.2 or later)");
    }
    version_ = "redis-server " + version;
    settings_.clear();
    for (const auto& [setting, want] :
         {std::pair<const char*, const char*>{"appendonly", "yes"},
          {"appendfsync", "always"},
          {"save", ""}}) {
      Result<std::string> value = ConfigGet(c->get(), setting);
      if (!value.ok()) return value.status();
      if (*value != want) {
        return Status::FailedPrecondition(name() + ": the server runs with " +
                                          setting + "=\"" + *value +
                                          "\", not \"" + want + "\"");
      }
      settings_ += (settings_.empty() ? "" : " ") + std::string(setting) + "=" +
                   (value->empty() ? "\"\"" : *value);
    }
    return Status::OK();
  }

  ServerPeerOptions options_;
  RedisPattern pattern_;
  std::unique_ptr<ChildProcess> server_;  // Null unless set up.
  uint16_t port_ = 0;
  std::string version_ = "redis-server";
  std::string settings_;  // As the server reported them.
};

}  // namespace

std::unique_ptr<Peer> MakeRedisPeer(const ServerPeerOptions& options) {
  return std::make_unique<RedisPeer>(options, kLuaPattern);
}

std::unique_ptr<Peer> MakeRedisPlainPeer(const ServerPeerOptions& options) {
  return std::make_unique<RedisPeer>(options, kPlainPattern);
}

}  // namespace spool::bench

#else  // !SPOOL_BENCH_HAVE_HIREDIS

namespace spool::bench {

std::unique_ptr<Peer> MakeRedisPeer(const ServerPeerOptions&) {
  return MakeUnavailablePeer("redis", "built without hiredis (libhiredis-dev)");
}

std::unique_ptr<Peer> MakeRedisPlainPeer(const ServerPeerOptions&) {
  return MakeUnavailablePeer("redis_plain",
                             "built without hiredis (libhiredis-dev)");
}

}  // namespace spool::bench

#endif  // SPOOL_BENCH_HAVE_HIREDIS
