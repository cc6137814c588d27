// The "beanstalkd" peer: beanstalkd with its binlog in the workdir and
// `-f 0`, which fsyncs the binlog after every write, inline in its single
// event loop, before the reply. Enqueue is `put`; ClaimAndComplete is
// `reserve-with-timeout 0` then `delete`. beanstalkd logs puts and deletes
// but not reservations (a restart makes reserved jobs ready again), so its
// claim costs no fsync; the completion (delete) does.
//
// There is no C or C++ client in Debian, and the text protocol is small, so
// this file speaks it over a blocking socket with timeouts.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>

#include "benchmarks/peers/peers_internal.h"
#include "benchmarks/peers/scoped_fd.h"
#include "benchmarks/peers/server_process.h"

namespace spool::bench {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kConnectTimeout{5000};
constexpr milliseconds kProbeTimeout{250};
// Bounds every reply, so that a hung server fails a call instead of hanging
// the benchmark.
constexpr milliseconds kReplyTimeout{30000};

// beanstalkd's customary default priority (lower is more urgent; below 1024
// counts as "urgent"). All benchmark tasks share it.
constexpr unsigned kPriority = 1024;
// Seconds a reserved job may run before beanstalkd hands it out again.
constexpr unsigned kTimeToRunSeconds = 60;
// beanstalkd's default maximum job size (its -z option).
constexpr size_t kMaxJobBytes = 65535;

std::string ErrnoText(int err) { return std::strerror(err); }

// One TCP connection speaking beanstalkd's line protocol. After an I/O or
// protocol error the stream is out of step, so every later call fails with
// that first error.
//
// Thread safety: not thread-safe; one owner.
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(uint16_t port,
                                                  milliseconds connect_timeout,
                                                  milliseconds reply_timeout) {
    const std::string where =
        "beanstalkd: connect to 127.0.0.1:" + std::to_string(port);
    ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid())
      return Status::IOError(where + ": socket: " + ErrnoText(errno));
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
        0) {
      if (errno != EINPROGRESS) {
        return Status::IOError(where + ": " + ErrnoText(errno));
      }
      pollfd p{fd.get(), POLLOUT, 0};
      int ready = poll(&p, 1, static_cast<int>(connect_timeout.count()));
      if (ready == 0) {
        return Status::TimedOut(where + ": no answer within " +
                                std::to_string(connect_timeout.count()) +
                                " ms");
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (ready < 0)
        err = errno;
      else if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
      if (err != 0) return Status::IOError(where + ": " + ErrnoText(err));
    }
    // Blocking from here on, with timeouts on every send and receive.
    int flags = fcntl(fd.get(), F_GETFL);
    if (flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return Status::IOError(where + ": fcntl: " + ErrnoText(errno));
    }
    timeval tv;
    tv.tv_sec = static_cast<time_t>(reply_timeout.count() / 1000);
    tv.tv_usec =
        static_cast<suseconds_t>((reply_timeout.count() % 1000) * 1000);
    int one = 1;
    if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) !=
            0) {
      return Status::IOError(where + ": setsockopt: " + ErrnoText(errno));
    }
    return std::unique_ptr<Connection>(new Connection(std::move(fd)));
  }

  // Sends `data` whole.
  Status Send(std::string_view data) {
    if (!broken_.ok()) return broken_;
    while (!data.empty()) {
      ssize_t n = send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Break(
            errno == EAGAIN || errno == EWOULDBLOCK
                ? Status::TimedOut("beanstalkd: send timed out")
                : Status::IOError("beanstalkd: send: " + ErrnoText(errno)));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::OK();
  }

  // Reads one reply line, without its "\r\n".
  Result<std::string> ReadLine() {
    if (!broken_.ok()) return broken_;
    size_t end;
    while ((end = buffer_.find("\r\n", start_)) == std::string::npos) {
      Status s = Fill();
      if (!s.ok()) return s;
    }
    std::string line = buffer_.substr(start_, end - start_);
    Consume(end + 2 - start_);
    return line;
  }

  // Reads a job body of `n` bytes and its trailing "\r\n" into `out`.
  Status ReadBody(size_t n, std::string* out) {
    if (!broken_.ok()) return broken_;
    while (buffer_.size() - start_ < n + 2) {
      Status s = Fill();
      if (!s.ok()) return s;
    }
    if (buffer_.compare(start_ + n, 2, "\r\n") != 0) {
      return Break(Status::IOError("beanstalkd: a job body lacks its CRLF"));
    }
    out->assign(buffer_, start_, n);
    Consume(n + 2);
    return Status::OK();
  }

  // Marks the connection unusable and returns `error`.
  Status Break(Status error) {
    broken_ = error;
    return error;
  }

 private:
  explicit Connection(ScopedFd fd) : fd_(std::move(fd)) {}

  Status Fill() {
    char chunk[16384];
    while (true) {
      ssize_t n = recv(fd_.get(), chunk, sizeof(chunk), 0);
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        return Status::OK();
      }
      if (n == 0) {
        return Break(Status::IOError("beanstalkd closed the connection"));
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Break(Status::TimedOut("beanstalkd: no reply in time"));
      }
      return Break(Status::IOError("beanstalkd: recv: " + ErrnoText(errno)));
    }
  }

  void Consume(size_t n) {
    start_ += n;
    if (start_ == buffer_.size()) {
      buffer_.clear();
      start_ = 0;
    } else if (start_ > (1 << 16)) {
      buffer_.erase(0, start_);
      start_ = 0;
    }
  }

  ScopedFd fd_;
  std::string buffer_;  // Received bytes; the unread ones start at start_.
  size_t start_ = 0;
  Status broken_;
};

// Parses the unsigned number after `prefix` in `line` ("INSERTED 12").
bool ParseAfter(const std::string& line, std::string_view prefix,
                unsigned long long* value) {
  if (line.compare(0, prefix.size(), prefix) != 0) return false;
  char* end = nullptr;
  errno = 0;
  *value = std::strtoull(line.c_str() + prefix.size(), &end, 10);
  return errno == 0 && end != line.c_str() + prefix.size();
}

// OK for "INSERTED <id>", else the error the reply means.
Status PutReplyStatus(const std::string& reply) {
  unsigned long long id;
  if (ParseAfter(reply, "INSERTED ", &id)) return Status::OK();
  if (reply == "JOB_TOO_BIG") {
    return Status::InvalidArgument("beanstalkd: job larger than " +
                                   std::to_string(kMaxJobBytes) + " bytes");
  }
  if (reply == "DRAINING") return Status::Busy("beanstalkd is draining");
  // "BURIED <id>": the server ran out of memory for its ready queue.
  return Status::IOError("beanstalkd: put answered \"" + reply + "\"");
}

// The job body: the type, a newline, the payload.
void AppendPut(std::string* out, std::string_view type,
               std::string_view payload) {
  const size_t bytes = type.size() + 1 + payload.size();
  char header[96];
  int len = std::snprintf(header, sizeof(header), "put %u 0 %u %zu\r\n",
                          kPriority, kTimeToRunSeconds, bytes);
  out->append(header, static_cast<size_t>(len));
  out->append(type);
  out->push_back('\n');
  out->append(payload);
  out->append("\r\n");
}

class BeanstalkdClient final : public PeerClient {
 public:
  explicit BeanstalkdClient(std::unique_ptr<Connection> connection)
      : connection_(std::move(connection)) {}

  Status Enqueue(std::string_view type, std::string_view payload) override {
    request_.clear();
    AppendPut(&request_, type, payload);
    Status s = connection_->Send(request_);
    if (!s.ok()) return s;
    return ReadPutReply();
  }

  Status Preload(size_t n, std::string_view type,
                 std::string_view payload) override {
    // Pipelined: the server still fsyncs every put (it has no batch put).
    constexpr size_t kPipelineDepth = 100;
    for (size_t done = 0; done < n;) {
      const size_t batch = std::min(kPipelineDepth, n - done);
      request_.clear();
      for (size_t i = 0; i < batch; ++i) AppendPut(&request_, type, payload);
      Status s = connection_->Send(request_);
      if (!s.ok()) return s;
      // Every reply is read, even after an error reply, so that the next
      // call does not read this batch's leftovers.
      Status first_error;
      for (size_t i = 0; i < batch; ++i) {
        Result<std::string> reply = connection_->ReadLine();
        if (!reply.ok()) return reply.status();  // The connection is gone.
        s = PutReplyStatus(*reply);
        if (first_error.ok()) first_error = s;
      }
      if (!first_error.ok()) return first_error;
      done += batch;
    }
    return Status::OK();
  }

  Status ClaimAndComplete() override {
    Status s = connection_->Send("reserve-with-timeout 0\r\n");
    if (!s.ok()) return s;
    Result<std::string> reply = connection_->ReadLine();
    if (!reply.ok()) return reply.status();
    if (*reply == "TIMED_OUT")
      return Status::NotFound("beanstalkd: no ready job");
    // "RESERVED <id> <bytes>"
    unsigned long long id = 0, bytes = 0;
    if (std::sscanf(reply->c_str(), "RESERVED %llu %llu", &id, &bytes) != 2) {
      return connection_->Break(
          Status::IOError("beanstalkd: reserve answered \"" + *reply + "\""));
    }
    s = connection_->ReadBody(static_cast<size_t>(bytes), &body_);
    if (!s.ok()) return s;

    s = connection_->Send("delete " + std::to_string(id) + "\r\n");
    if (!s.ok()) return s;
    reply = connection_->ReadLine();
    if (!reply.ok()) return reply.status();
    if (*reply != "DELETED") {
      return Status::IOError("beanstalkd: delete " + std::to_string(id) +
                             " answered \"" + *reply + "\"");
    }
    return Status::OK();
  }

 private:
  Status ReadPutReply() {
    Result<std::string> reply = connection_->ReadLine();
    if (!reply.ok()) return reply.status();
    return PutReplyStatus(*reply);
  }

  std::unique_ptr<Connection> connection_;
  std::string request_;  // Reused buffers.
  std::string body_;
};

// The value of `field` in beanstalkd's YAML stats ("field: value\n").
std::string StatsField(const std::string& stats, std::string_view field) {
  std::string needle = "\n" + std::string(field) + ": ";
  size_t at = ("\n" + stats).find(needle);
  if (at == std::string::npos) return "";
  size_t start = at + needle.size() - 1;  // -1: the "\n" we prepended.
  size_t end = stats.find('\n', start);
  return stats.substr(start, end == std::string::npos ? end : end - start);
}

// Runs `stats` on a fresh connection and returns its YAML body.
Result<std::string> Stats(uint16_t port, milliseconds timeout) {
  Result<std::unique_ptr<Connection>> c =
      Connection::Open(port, timeout, timeout);
  if (!c.ok()) return c.status();
  Status s = (*c)->Send("stats\r\n");
  if (!s.ok()) return s;
  Result<std::string> line = (*c)->ReadLine();
  if (!line.ok()) return line.status();
  unsigned long long bytes = 0;
  if (!ParseAfter(*line, "OK ", &bytes)) {
    return Status::IOError("beanstalkd: stats answered \"" + *line + "\"");
  }
  std::string body;
  s = (*c)->ReadBody(static_cast<size_t>(bytes), &body);
  if (!s.ok()) return s;
  return body;
}

// Ready when the server on `port` reports our child's pid in its stats.
Status ProbeBeanstalkd(uint16_t port, pid_t pid) {
  Result<std::string> stats = Stats(port, kProbeTimeout);
  if (!stats.ok()) return stats.status();
  std::string server_pid = StatsField(*stats, "pid");
  if (server_pid != std::to_string(pid)) {
    return Status::Busy("beanstalkd: 127.0.0.1:" + std::to_string(port) +
                        " is served by pid " + server_pid + ", not ours (" +
                        std::to_string(pid) + ")");
  }
  return Status::OK();
}

class BeanstalkdPeer final : public Peer {
 public:
  explicit BeanstalkdPeer(const ServerPeerOptions& options)
      : options_(options) {
    if (options_.binary.empty()) options_.binary = kBeanstalkdPath;
  }
  ~BeanstalkdPeer() override { Teardown(); }

  std::string name() const override { return "beanstalkd"; }

  Status Setup(const std::string& workdir) override {
    if (server_ != nullptr) {
      return Status::FailedPrecondition("beanstalkd: Setup called twice");
    }
    LaunchSpec spec;
    spec.port = options_.port;
    spec.start_timeout = options_.start_timeout;
    spec.command = [&](uint16_t port) {
      ChildCommand command;
      command.argv = {options_.binary,
                      "-l",
                      "127.0.0.1",
                      "-p",
                      std::to_string(port),
                      "-b",
                      workdir,
                      "-f",
                      "0",
                      "-z",
                      std::to_string(kMaxJobBytes)};
      command.working_dir = workdir;
      command.log_path = workdir + "/beanstalkd.log";
      command.stop_signal = SIGTERM;
      return command;
    };
    spec.probe = ProbeBeanstalkd;
    Result<LaunchedServer> launched = LaunchServer(spec);
    if (!launched.ok()) return launched.status().WithContext("beanstalkd");
    server_ = std::move(launched->process);
    port_ = launched->port;

    Result<std::string> stats = Stats(port_, kConnectTimeout);
    if (!stats.ok()) {
      Teardown();
      return stats.status();
    }
    std::string version = StatsField(*stats, "version");  // "1.12", quoted.
    if (version.size() >= 2 && version.front() == '"' &&
        version.back() == '"') {
      version = version.substr(1, version.size() - 2);
    }
    version_ = "beanstalkd " + version;
    return Status::OK();
  }

  void Teardown() override {
    if (server_ != nullptr) {
      Status s = server_->Stop();
      if (!s.ok()) {
        std::fprintf(stderr, "beanstalkd peer: %s\n", s.ToString().c_str());
      }
      server_.reset();
    }
    port_ = 0;
  }

  Result<std::unique_ptr<PeerClient>> Connect() override {
    if (server_ == nullptr) {
      return Status::FailedPrecondition("beanstalkd: Connect before Setup");
    }
    Result<std::unique_ptr<Connection>> c =
        Connection::Open(port_, kConnectTimeout, kReplyTimeout);
    if (!c.ok()) return c.status();
    return std::unique_ptr<PeerClient>(
        new BeanstalkdClient(std::move(c).value()));
  }

  std::string Describe() const override {
    return "beanstalkd: " + version_ +
           ", binlog in workdir with -f 0 (fsync after every binlog write, "
           "before the reply); put, then reserve-with-timeout 0 + delete "
           "(reserve is not logged: the claim is in memory, the delete is "
           "fsynced)";
  }

 private:
  ServerPeerOptions options_;
  std::unique_ptr<ChildProcess> server_;  // Null unless set up.
  uint16_t port_ = 0;
  std::string version_ = "beanstalkd";
};

}  // namespace

std::unique_ptr<Peer> MakeBeanstalkdPeer(const ServerPeerOptions& options) {
  return std::make_unique<BeanstalkdPeer>(options);
}

}  // namespace spool::bench
