// Tests of the peer drivers: every peer stores and (for queue peers) drains
// tasks, and the server peers start, fail and stop without leaving processes
// behind. Peers whose server binary or client library is missing are skipped
// with the reason, so the suite passes on machines without the servers.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "benchmarks/peers/peer.h"
#include "benchmarks/peers/peers_internal.h"
#include "benchmarks/peers/scoped_fd.h"
#include "benchmarks/peers/server_process.h"
#include "tests/testing.h"

#if defined(__SANITIZE_THREAD__)
// Debian's librocksdb is not built with ThreadSanitizer. In its group commit
// the leading writer copies the other writers' batches, and the group's
// writers insert into the memtable concurrently, after synchronizing in code
// TSan cannot see; so these accesses look like races. Between threads,
// rocksdb_raw_peer.cc shares only an atomic counter and the DB.
extern "C" const char* __tsan_default_suppressions() {
  return "race:librocksdb.so\n"
         "race:rocksdb_raw_peer.cc\n";
}
#endif

namespace spool::bench {
namespace {

using spool::testing::TempDir;
using spool::testing::WaitUntil;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kPayload(100, 'p');

bool IsLimitPeer(const std::string& name) {
  return name == "fsync" || name == "rocksdb_raw";
}

bool HasServer(const std::string& name) {
  return name == "redis" || name == "redis_plain" || name == "beanstalkd" ||
         name == "postgres";
}

std::string Canonical(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return path;
  std::string out = real;
  std::free(real);
  return out;
}

// Processes other than this one whose working directory is under `dir` or
// whose command line names it: the servers a peer started there (each runs
// in its workdir or data directory, and so do postgres's backends).
std::vector<pid_t> ProcessesUsing(const std::string& dir) {
  const std::string root = Canonical(dir);
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == getpid()) continue;
    const std::string base = "/proc/" + std::string(entry->d_name);
    char cwd[PATH_MAX];
    ssize_t n = readlink((base + "/cwd").c_str(), cwd, sizeof(cwd) - 1);
    std::string working_dir =
        n > 0 ? std::string(cwd, static_cast<size_t>(n)) : "";
    std::ifstream cmdline_file(base + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(cmdline_file)),
                        std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (working_dir == root || working_dir.rfind(root + "/", 0) == 0 ||
        cmdline.find(root) != std::string::npos) {
      found.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return found;
}

std::string Describe(const std::vector<pid_t>& pids) {
  std::ostringstream out;
  for (pid_t pid : pids) {
    std::ifstream cmdline_file("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(cmdline_file)),
                        std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    out << pid << ": " << cmdline << "\n";
  }
  return out.str();
}

// Waits until no process uses `dir`; on timeout, says which still do.
::testing::AssertionResult NoProcessLeft(const std::string& dir,
                                         milliseconds timeout = seconds(20)) {
  if (WaitUntil([&] { return ProcessesUsing(dir).empty(); }, timeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "processes still use " << dir << ":\n"
                                       << Describe(ProcessesUsing(dir));
}

// A SIGKILLed postmaster leaves its small System V interlock segment behind
// (PostgreSQL removes it only on a clean shutdown). Tests that kill postgres
// on purpose note its id from postmaster.pid while the server runs, and
// remove it afterwards.
class PostgresSegment {
 public:
  // Notes the segment of the postgres server in `workdir`, if any.
  explicit PostgresSegment(const std::string& workdir) {
    std::ifstream pid_file(workdir + "/pgdata/postmaster.pid");
    std::string line;
    // Line 7: the shared memory key and id.
    for (int i = 0; i < 7 && std::getline(pid_file, line); ++i) {
    }
    std::istringstream fields(line);
    long key = 0;
    if (!(fields >> key >> id_)) id_ = -1;
  }
  // Removes it once nothing is attached.
  ~PostgresSegment() {
    shmid_ds info{};
    if (id_ >= 0 && shmctl(id_, IPC_STAT, &info) == 0 && info.shm_nattch == 0) {
      shmctl(id_, IPC_RMID, nullptr);
    }
  }

 private:
  int id_ = -1;
};

// Claims from `threads` threads, each with its own client, until NotFound.
// Returns the number completed; records errors in `errors`.
int DrainConcurrently(Peer* peer, int threads, std::vector<std::string>* errors,
                      int max_per_thread) {
  std::atomic<int> completed{0};
  std::vector<std::thread> workers;
  errors->assign(threads, "");
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Result<std::unique_ptr<PeerClient>> client = peer->Connect();
      if (!client.ok()) {
        (*errors)[t] = client.status().ToString();
        return;
      }
      for (int i = 0; i < max_per_thread; ++i) {
        Status s = (*client)->ClaimAndComplete();
        if (s.IsNotFound()) return;
        if (!s.ok()) {
          (*errors)[t] = s.ToString();
          return;
        }
        completed.fetch_add(1);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return completed.load();
}

TEST(PeerFactoryTest, MakesEveryPeerInOrder) {
  std::vector<std::unique_ptr<Peer>> peers = MakeAllPeers();
  std::vector<std::string> names;
  for (const auto& peer : peers) names.push_back(peer->name());
  EXPECT_EQ(names, (std::vector<std::string>{"fsync", "rocksdb_raw", "sqlite",
                                             "redis", "redis_plain",
                                             "beanstalkd", "postgres"}));
  for (const std::string& name : names) {
    std::unique_ptr<Peer> peer = MakePeer(name);
    ASSERT_NE(peer, nullptr) << name;
    EXPECT_EQ(peer->name(), name);
    EXPECT_FALSE(peer->Describe().empty()) << name;
    Result<std::unique_ptr<PeerClient>> client = peer->Connect();
    EXPECT_FALSE(client.ok()) << name << " connected before Setup";
    peer->Teardown();  // Before Setup: a no-op.
  }
  EXPECT_EQ(MakePeer("kafka"), nullptr);
}

class PeerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PeerTest, EnqueueFromFourThreadsThenDrain) {
  const std::string name = GetParam();
  TempDir dir;
  std::unique_ptr<Peer> peer = MakePeer(name);
  ASSERT_NE(peer, nullptr);
  Status s = peer->Setup(dir.path());
  if (s.IsNotSupported()) GTEST_SKIP() << s.ToString();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(peer->Describe().find(name), std::string::npos) << peer->Describe();

  // 50 tasks from 4 threads, each with its own client.
  constexpr int kTasks = 50;
  constexpr int kThreads = 4;
  std::atomic<int> next{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Result<std::unique_ptr<PeerClient>> client = peer->Connect();
      if (!client.ok()) {
        errors[t] = client.status().ToString();
        return;
      }
      while (next.fetch_add(1) < kTasks) {
        Status e = (*client)->Enqueue("noop", kPayload);
        if (!e.ok()) {
          errors[t] = e.ToString();
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");

  Result<std::unique_ptr<PeerClient>> client = peer->Connect();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  if (IsLimitPeer(name)) {
    EXPECT_TRUE((*client)->ClaimAndComplete().IsNotSupported());
    Status preload = (*client)->Preload(20, "noop", kPayload);
    EXPECT_TRUE(preload.ok()) << preload.ToString();
  } else {
    // Drained by 4 concurrent claimers: each task exactly once.
    EXPECT_EQ(DrainConcurrently(peer.get(), kThreads, &errors, 2 * kTasks),
              kTasks);
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    EXPECT_TRUE((*client)->ClaimAndComplete().IsNotFound());

    // Preloaded tasks are claimable at once.
    Status preload = (*client)->Preload(20, "noop", kPayload);
    ASSERT_TRUE(preload.ok()) << preload.ToString();
    int drained = 0;
    Status c;
    while ((c = (*client)->ClaimAndComplete()).ok() && drained <= 20) {
      ++drained;
    }
    EXPECT_TRUE(c.IsNotFound()) << c.ToString();
    EXPECT_EQ(drained, 20);
  }

  if (HasServer(name)) {
    EXPECT_FALSE(ProcessesUsing(dir.path()).empty())
        << "the process detector must see the running server";
  }
  client = Status::Cancelled("closed");  // Clients go before Teardown.
  peer->Teardown();
  EXPECT_TRUE(NoProcessLeft(dir.path()));
  peer->Teardown();  // Twice is fine.
}

// Open descriptors of this process.
size_t OpenFds() {
  size_t n = 0;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return 0;
  while (dirent* entry = readdir(fds)) n += entry->d_name[0] != '.';
  closedir(fds);
  return n;
}

TEST_P(PeerTest, SetupAndTeardownLeakNoDescriptors) {
  size_t after_first = 0;
  for (int cycle = 0; cycle < 2; ++cycle) {
    // The first cycle may open descriptors that live for the process (e.g.
    // RocksDB's environment); the second must return to the same count.
    TempDir dir;
    std::unique_ptr<Peer> peer = MakePeer(GetParam());
    Status s = peer->Setup(dir.path());
    if (s.IsNotSupported()) GTEST_SKIP() << s.ToString();
    ASSERT_TRUE(s.ok()) << s.ToString();
    {
      Result<std::unique_ptr<PeerClient>> client = peer->Connect();
      ASSERT_TRUE(client.ok()) << client.status().ToString();
      Status e = (*client)->Enqueue("noop", kPayload);
      EXPECT_TRUE(e.ok()) << e.ToString();
    }
    peer->Teardown();
    peer.reset();
    if (cycle == 0) after_first = OpenFds();
  }
  EXPECT_EQ(OpenFds(), after_first);
}

INSTANTIATE_TEST_SUITE_P(AllPeers, PeerTest,
                         ::testing::Values("fsync", "rocksdb_raw", "sqlite",
                                           "redis", "redis_plain", "beanstalkd",
                                           "postgres"),
                         [](const auto& param_info) {
                           return param_info.param;
                         });

// ---- Server peers: start-up failures, teardown, crashes -------------------

std::unique_ptr<Peer> MakeServerPeer(const std::string& name,
                                     const ServerPeerOptions& options) {
  if (name == "redis") return MakeRedisPeer(options);
  if (name == "redis_plain") return MakeRedisPlainPeer(options);
  if (name == "beanstalkd") return MakeBeanstalkdPeer(options);
  return MakePostgresPeer(options);
}

std::unique_ptr<Peer> MakeServerPeerOnPort(const std::string& name,
                                           uint16_t port) {
  ServerPeerOptions options;
  options.port = port;
  return MakeServerPeer(name, options);
}

std::string ServerBinary(const std::string& name) {
  if (name == "redis" || name == "redis_plain") return kRedisServerPath;
  if (name == "beanstalkd") return kBeanstalkdPath;
  return std::string(kPostgresBinDir) + "/postgres";
}

// A socket listening on a free port of 127.0.0.1, which it stores in `port`;
// invalid on failure.
ScopedFd ListenOnLoopback(uint16_t* port) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (!fd.valid() ||
      bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd.get(), 1) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ScopedFd();
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

class ServerPeerTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Skips the test unless this peer can run here.
  void SetUp() override {
    if (access(ServerBinary(GetParam()).c_str(), X_OK) != 0) {
      GTEST_SKIP() << ServerBinary(GetParam()) << " is not installed";
    }
    // A build without the client library has a stand-in peer.
    std::string description = MakePeer(GetParam())->Describe();
    if (description.find("unavailable") != std::string::npos) {
      GTEST_SKIP() << description;
    }
  }
};

TEST_P(ServerPeerTest, MissingBinaryIsNotSupported) {
  TempDir dir;
  ServerPeerOptions options;
  options.binary = "/nonexistent/spool-peer-binary";
  std::unique_ptr<Peer> peer = MakeServerPeer(GetParam(), options);
  Status s = peer->Setup(dir.path());
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.message().find("/nonexistent/spool-peer-binary"),
            std::string::npos)
      << s.ToString();
  peer->Teardown();
  peer->Teardown();
}

TEST_P(ServerPeerTest, PortInUseFailsWithTheServerLog) {
  // Hold a port, then ask the peer to use it.
  uint16_t port = 0;
  ScopedFd holder = ListenOnLoopback(&port);
  ASSERT_TRUE(holder.valid());

  TempDir dir;
  std::unique_ptr<Peer> peer = MakeServerPeerOnPort(GetParam(), port);
  Status s = peer->Setup(dir.path());
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  // The message names the port and carries the server's own complaint.
  EXPECT_NE(s.message().find(std::to_string(port)), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("Address already in use"), std::string::npos)
      << s.ToString();
  Result<std::unique_ptr<PeerClient>> client = peer->Connect();
  EXPECT_TRUE(client.status().IsFailedPrecondition())
      << client.status().ToString();
  peer->Teardown();  // After a failed Setup.
  peer->Teardown();
  EXPECT_TRUE(NoProcessLeft(dir.path()));
}

TEST_P(ServerPeerTest, SetupTwiceFailsAndDestructionStopsTheServer) {
  TempDir dir;
  {
    std::unique_ptr<Peer> peer = MakePeer(GetParam());
    Status s = peer->Setup(dir.path());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(peer->Setup(dir.path()).IsFailedPrecondition());
    EXPECT_FALSE(ProcessesUsing(dir.path()).empty());
    // Destroyed without Teardown.
  }
  EXPECT_TRUE(NoProcessLeft(dir.path()));
}

TEST_P(ServerPeerTest, CallsFailInsteadOfHangingWhenTheServerDies) {
  TempDir dir;
  std::unique_ptr<Peer> peer = MakePeer(GetParam());
  Status s = peer->Setup(dir.path());
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<std::unique_ptr<PeerClient>> client = peer->Connect();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Enqueue("noop", kPayload).ok());

  PostgresSegment segment(dir.path());
  for (pid_t pid : ProcessesUsing(dir.path())) kill(pid, SIGKILL);
  auto start = std::chrono::steady_clock::now();
  Status after = (*client)->Enqueue("noop", kPayload);
  EXPECT_FALSE(after.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(35))
      << after.ToString();
  peer->Teardown();
  EXPECT_TRUE(NoProcessLeft(dir.path()));
}

// A benchmark that crashes (here: is SIGKILLed) right after Setup must not
// leave its server running: PR_SET_PDEATHSIG takes it down.
TEST_P(ServerPeerTest, CrashOfTheOwnerLeavesNoServer) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  pid_t owner = fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    // The owner: sets the peer up, reports, and waits to be killed.
    close(ready[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::unique_ptr<Peer> peer = MakePeer(GetParam());
    Status st = peer->Setup(dir.path());
    char word = st.ok() ? 'k' : 'e';
    ssize_t ignored = write(ready[1], &word, 1);
    (void)ignored;
    while (true) pause();
  }
  close(ready[1]);
  ScopedFd ready_read(ready[0]);
  pollfd p{ready_read.get(), POLLIN, 0};
  char word = 0;
  bool got = poll(&p, 1, 120000) == 1 && read(ready_read.get(), &word, 1) == 1;
  EXPECT_TRUE(got && word == 'k') << "the owner's Setup failed or timed out";
  if (got && word == 'k') {
    EXPECT_FALSE(ProcessesUsing(dir.path()).empty());
  }
  PostgresSegment segment(dir.path());
  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
  EXPECT_TRUE(NoProcessLeft(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(Servers, ServerPeerTest,
                         ::testing::Values("redis", "redis_plain", "beanstalkd",
                                           "postgres"),
                         [](const auto& param_info) {
                           return param_info.param;
                         });

// ---- The Redis peers: what their lists hold ------------------------------

// A minimal RESP client, so that a test can look at a Redis peer's lists
// without the peer's own client code: one command at a time; replies of
// simple strings, errors, integers, bulk strings and arrays of bulk strings.
struct RespReply {
  char type = 0;                      // '+', '-', ':', '$' or '*'; '_' for nil.
  std::string text;                   // A string's or an integer's text.
  std::vector<std::string> elements;  // An array's bulk strings.
};

class RespConnection {
 public:
  explicit RespConnection(uint16_t port)
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    timeval timeout{5, 0};
    ok_ = fd_.valid() &&
          setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout,
                     sizeof(timeout)) == 0 &&
          connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr),
                  sizeof(addr)) == 0;
  }

  // Sends `args` and reads the reply; type 0 when the connection failed.
  RespReply Command(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args) {
      out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    }
    RespReply reply;
    if (!ok_ || write(fd_.get(), out.data(), out.size()) !=
                    static_cast<ssize_t>(out.size())) {
      return reply;
    }
    std::string line;
    if (!ReadLine(&line) || line.empty()) return reply;
    reply.type = line[0];
    reply.text = line.substr(1);
    if (reply.type == '$') {
      if (reply.text == "-1") {
        reply.type = '_';
      } else if (!ReadBytes(std::stoul(reply.text) + 2, &reply.text)) {
        reply.type = 0;
      } else {
        reply.text.resize(reply.text.size() - 2);
      }
    } else if (reply.type == '*') {
      const long n = std::stol(reply.text);
      for (long i = 0; i < n; ++i) {
        std::string element;
        if (!ReadLine(&line) || line.empty() || line[0] != '$' ||
            !ReadBytes(std::stoul(line.substr(1)) + 2, &element)) {
          reply.type = 0;
          return reply;
        }
        element.resize(element.size() - 2);
        reply.elements.push_back(std::move(element));
      }
    }
    return reply;
  }

 private:
  bool Fill() {
    char buf[4096];
    ssize_t n = read(fd_.get(), buf, sizeof(buf));
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }
  bool ReadLine(std::string* line) {
    size_t end;
    while ((end = in_.find("\r\n")) == std::string::npos) {
      if (!Fill()) return false;
    }
    *line = in_.substr(0, end);
    in_.erase(0, end + 2);
    return true;
  }
  bool ReadBytes(size_t n, std::string* bytes) {
    while (in_.size() < n) {
      if (!Fill()) return false;
    }
    *bytes = in_.substr(0, n);
    in_.erase(0, n);
    return true;
  }

  ScopedFd fd_;
  bool ok_ = false;
  std::string in_;
};

// The Redis peers, with the server on a known port so that the test can look
// at its lists.
class RedisPeerTest : public ServerPeerTest {
 protected:
  bool plain() const { return GetParam() == "redis_plain"; }
  std::string pending_key() const {
    return plain() ? kRedisPlainPendingKey : kRedisPendingKey;
  }
  std::string processing_key() const {
    return plain() ? kRedisPlainProcessingKey : kRedisProcessingKey;
  }
  // The payload of a list element: the plain peer's element is
  // "<id>\n<type>\n<payload>"; the other's is an id into its task hashes.
  std::string PayloadOf(RespConnection* redis, const std::string& element) {
    if (plain()) return element.substr(element.rfind('\n') + 1);
    return redis->Command({"HGET", "spool:task:" + element, "payload"}).text;
  }
  // The payloads on the pending list, oldest (next to be claimed) first.
  std::vector<std::string> Pending(RespConnection* redis) {
    RespReply r = redis->Command({"LRANGE", pending_key(), "0", "-1"});
    EXPECT_EQ(r.type, '*') << r.text;
    std::vector<std::string> out;
    for (auto it = r.elements.rbegin(); it != r.elements.rend(); ++it) {
      out.push_back(PayloadOf(redis, *it));
    }
    return out;
  }
  std::string ProcessingLength(RespConnection* redis) {
    return redis->Command({"LLEN", processing_key()}).text;
  }
};

TEST_P(RedisPeerTest, ClaimsOldestFirstAndCompletionLeavesNothingProcessing) {
  uint16_t port = 0;
  ASSERT_TRUE(ListenOnLoopback(&port).valid());  // Closed: the port is free.
  TempDir dir;
  std::unique_ptr<Peer> peer = MakeServerPeerOnPort(GetParam(), port);
  Status s = peer->Setup(dir.path());
  ASSERT_TRUE(s.ok()) << s.ToString();
  {
    Result<std::unique_ptr<PeerClient>> client = peer->Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    RespConnection redis(port);
    for (const char* payload : {"first", "second", "third"}) {
      ASSERT_TRUE((*client)->Enqueue("noop", payload).ok());
    }
    EXPECT_EQ(Pending(&redis),
              (std::vector<std::string>{"first", "second", "third"}));

    ASSERT_TRUE((*client)->ClaimAndComplete().ok());
    EXPECT_EQ(Pending(&redis), (std::vector<std::string>{"second", "third"}));
    EXPECT_EQ(ProcessingLength(&redis), "0");
    if (!plain()) {
      // The task hash follows the steps.
      RespReply task = redis.Command({"HMGET", "spool:task:1", "status"});
      EXPECT_EQ(task.elements, std::vector<std::string>{"completed"});
    }
    ASSERT_TRUE((*client)->ClaimAndComplete().ok());
    EXPECT_EQ(Pending(&redis), std::vector<std::string>{"third"});

    // Preloaded tasks queue behind, each a distinct element (so that LREM
    // removes exactly the task claimed), though their contents are equal.
    ASSERT_TRUE((*client)->Preload(3, "noop", "same").ok());
    EXPECT_EQ(Pending(&redis),
              (std::vector<std::string>{"third", "same", "same", "same"}));
    RespReply elements = redis.Command({"LRANGE", pending_key(), "0", "-1"});
    EXPECT_EQ(std::set<std::string>(elements.elements.begin(),
                                    elements.elements.end())
                  .size(),
              4u);
    if (plain()) {
      // The task carries its type.
      EXPECT_NE(elements.elements.back().find("\nnoop\nthird"),
                std::string::npos);
    }
    int drained = 0;
    while ((s = (*client)->ClaimAndComplete()).ok()) ++drained;
    EXPECT_TRUE(s.IsNotFound()) << s.ToString();
    EXPECT_EQ(drained, 4);
    EXPECT_EQ(Pending(&redis), std::vector<std::string>{});
    EXPECT_EQ(ProcessingLength(&redis), "0");
  }
  peer->Teardown();
  EXPECT_TRUE(NoProcessLeft(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(Redis, RedisPeerTest,
                         ::testing::Values("redis", "redis_plain"),
                         [](const auto& param_info) {
                           return param_info.param;
                         });

// ---- ChildProcess and LaunchServer, with ordinary programs ----------------

TEST(ChildProcessTest, ReportsExitStatusAndLog) {
  TempDir dir;
  ChildCommand command;
  command.argv = {"/bin/sh", "-c",
                  "echo to-stdout; echo to-stderr >&2; exit 3"};
  command.working_dir = dir.path();
  command.log_path = dir.Sub("log");
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(command);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  Result<int> status = (*child)->WaitForExit(seconds(10));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, 3);
  EXPECT_EQ((*child)->exit_description(), "exited with status 3");
  EXPECT_EQ((*child)->LogTail(), "to-stdout\nto-stderr");
  EXPECT_TRUE((*child)->Stop().ok());  // Already gone: a no-op.
}

TEST(ChildProcessTest, ExecFailureNamesTheProgram) {
  TempDir dir;
  ChildCommand command;
  command.argv = {"/nonexistent/program"};
  command.working_dir = dir.path();
  command.log_path = dir.Sub("log");
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(command);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("execve"), std::string::npos)
      << child.status().ToString();
  EXPECT_NE(child.status().message().find("/nonexistent/program"),
            std::string::npos);
}

TEST(ChildProcessTest, StopKillsAGroupThatIgnoresTheStopSignal) {
  TempDir dir;
  ChildCommand command;
  // The shell ignores SIGTERM and has a child of its own in its group.
  command.argv = {"/bin/sh", "-c",
                  "trap '' TERM; sleep 60 & echo started; wait"};
  command.working_dir = dir.path();
  command.log_path = dir.Sub("log");
  Result<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(command);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return (*child)->LogTail() == "started"; }));
  EXPECT_EQ(ProcessesUsing(dir.path()).size(), 2u);
  Status s = (*child)->Stop(milliseconds(200));
  EXPECT_TRUE(s.IsTimedOut()) << s.ToString();
  EXPECT_FALSE((*child)->Running());
  EXPECT_TRUE(NoProcessLeft(dir.path(), seconds(5)));
}

TEST(LaunchServerTest, GivesUpOnAServerThatNeverAnswers) {
  TempDir dir;
  LaunchSpec spec;
  spec.command = [&](uint16_t) {
    ChildCommand command;
    command.argv = {"/bin/sh", "-c", "echo pretending; exec sleep 60"};
    command.working_dir = dir.path();
    command.log_path = dir.Sub("log");
    return command;
  };
  spec.probe = [](uint16_t, pid_t) { return Status::IOError("no answer"); };
  spec.start_timeout = milliseconds(300);
  Result<LaunchedServer> launched = LaunchServer(spec);
  ASSERT_FALSE(launched.ok());
  EXPECT_TRUE(launched.status().IsTimedOut()) << launched.status().ToString();
  EXPECT_NE(launched.status().message().find("pretending"), std::string::npos)
      << launched.status().ToString();
  EXPECT_TRUE(NoProcessLeft(dir.path(), seconds(5)));
}

TEST(LaunchServerTest, ReportsAServerThatExitsDuringStartUp) {
  TempDir dir;
  LaunchSpec spec;
  spec.command = [&](uint16_t) {
    ChildCommand command;
    command.argv = {"/bin/sh", "-c", "echo bad config >&2; exit 2"};
    command.working_dir = dir.path();
    command.log_path = dir.Sub("log");
    return command;
  };
  spec.probe = [](uint16_t, pid_t) { return Status::IOError("no answer"); };
  Result<LaunchedServer> launched = LaunchServer(spec);
  ASSERT_FALSE(launched.ok());
  EXPECT_TRUE(launched.status().IsIOError()) << launched.status().ToString();
  EXPECT_NE(launched.status().message().find("exited with status 2"),
            std::string::npos)
      << launched.status().ToString();
  EXPECT_NE(launched.status().message().find("bad config"), std::string::npos);
}

}  // namespace
}  // namespace spool::bench
