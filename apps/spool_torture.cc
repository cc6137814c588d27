// spool-torture: kills a process running a mixed workload with SIGKILL at
// random moments, reopens its directory, and checks that nothing the
// process was told is stored got lost, and that the store is consistent.
//
//   spool-torture [--kills N] [--seed S] [--dir DIR] [--max-run-ms M]
//                 [--remote-workers N [--remote-port P]
//                  [--worker-binary PATH]]
//
// The child runs the workload through the public API and reports on a pipe:
//   E id type   the enqueue of `id` was acknowledged (stored durably)
//   R id n t    a handler started attempt n of `id` at time t
//   D id        `id` succeeded, durably (a lifecycle event)
//
// With --remote-workers N the child is a pure queue node (workers = 0, the
// [remote] gateway on 127.0.0.1, a 1 s lease) and N spool-worker processes
// run every task; only the child is killed, and the workers reconnect on
// their own each time it comes back on the same port. The workload is the
// same with the types spool-worker serves: "ok" and "slow" are `sleep`
// (0 ms, and 10-99 ms), "flaky" is `sleep` with a payload it refuses in
// two tasks of three (those fail every attempt), "ephemeral" is `noop`,
// the purged type. The R reports come from the workers' --log files
// ("TASK ATTEMPT", no time): the parent reads them every few milliseconds
// and dates each line by the last read that did not see it, a time the
// start is known to come after. Invariants 3 and 4 then use that bound:
// a start dated after the claim is this claim's, and one dated after the
// parent read the task's D line ran after its durable success.
// The parent, after each kill, opens the directory with the storage layer
// (before any recovery) and then with a runtime (which recovers), and
// checks the invariants:
//   1. every acknowledged enqueue exists (tasks of type "ephemeral" may be
//      purged, so they only count when present);
//   2. no task is in two states, and every index matches the records
//      (TaskStore::CheckIndexes);
//   3. every task running at the kill is, after recovery, retried, failed
//      or cancelled with its attempt counted, or, if its handler never
//      started that attempt (a claim ahead, storage/start_log.h), back in
//      the queue (or cancelled) with the attempt not counted; an attempt
//      the child reported started is always counted;
//   4. no task that succeeded durably runs again.
// Progress goes to stderr; the last line is
//   kills=N acknowledged=A checked=C violations=V seed=S
// (in the remote mode followed by remote_workers=N remote_starts=R
// reconnects=C, the attempts the workers started and how often they
// reconnected), and the exit status is non-zero when V > 0 (or, in the
// remote mode, when no worker started anything).

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <set>
#include <signal.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/runtime.h>

#include "storage/task_store.h"

namespace {

using namespace std::chrono_literals;

struct Flags {
  int kills = 20;
  uint64_t seed = 0;
  std::string dir;
  int max_run_ms = 600;
  bool max_run_ms_set = false;
  // The remote mode: spool-worker processes run the tasks.
  int remote_workers = 0;
  int remote_port = 0;
  std::string worker_binary = SPOOL_WORKER_BINARY;
  bool child = false;
};

void Usage() {
  std::fprintf(stderr,
               "usage: spool-torture [--kills N] [--seed S] [--dir DIR] "
               "[--max-run-ms M]\n"
               "                     [--remote-workers N [--remote-port P] "
               "[--worker-binary PATH]]\n"
               "  --max-run-ms: the longest life of a child before its kill "
               "(600; 1500 with remote workers)\n"
               "  --remote-workers: run every task on N spool-worker "
               "processes, which stay up across the kills\n"
               "  --remote-port: the gateway's port on 127.0.0.1 (default: "
               "a free one)\n");
}

// Where the remote mode keeps the secret, the workers' logs and output.
std::string RemoteDir(const Flags& flags) { return flags.dir + ".remote"; }

// A whole decimal number in [min, max], or false after saying what is wrong.
bool ParseNumber(const char* name, const char* text, long long min,
                 long long max, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
    std::fprintf(stderr,
                 "spool-torture: %s needs a whole number in [%lld, %lld], got "
                 "'%s'\n",
                 name, min, max, text);
    return false;
  }
  *out = value;
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "spool-torture: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    // The value of `arg` as a whole number in [min, max].
    long long n = 0;
    auto number = [&](long long min, long long max) {
      const char* v = value(arg.c_str());
      return v != nullptr && ParseNumber(arg.c_str(), v, min, max, &n);
    };
    if (arg == "--kills") {
      if (!number(0, 1000000)) return false;
      flags->kills = static_cast<int>(n);
    } else if (arg == "--seed") {
      if (!number(0, std::numeric_limits<long long>::max())) return false;
      flags->seed = static_cast<uint64_t>(n);
    } else if (arg == "--dir") {
      const char* v = value("--dir");
      if (v == nullptr) return false;
      flags->dir = v;
    } else if (arg == "--max-run-ms") {
      if (!number(10, 3600000)) return false;
      flags->max_run_ms = static_cast<int>(n);
      flags->max_run_ms_set = true;
    } else if (arg == "--remote-workers") {
      if (!number(1, 64)) return false;
      flags->remote_workers = static_cast<int>(n);
    } else if (arg == "--remote-port") {
      if (!number(1, 65535)) return false;
      flags->remote_port = static_cast<int>(n);
    } else if (arg == "--worker-binary") {
      const char* v = value("--worker-binary");
      if (v == nullptr) return false;
      flags->worker_binary = v;
    } else if (arg == "--child") {
      flags->child = true;
    } else if (arg == "--help") {
      Usage();
      std::exit(0);
    } else {
      std::fprintf(stderr, "spool-torture: unknown argument %s\n", arg.c_str());
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// The child: a mixed workload that reports what it was told.

std::mutex say_mutex;
void Say(const std::string& line) {
  std::string out = line + "\n";
  std::lock_guard<std::mutex> lock(say_mutex);
  // One write per line: atomic on a pipe, nothing buffered in the process.
  ssize_t ignored = write(STDOUT_FILENO, out.data(), out.size());
  (void)ignored;
}

[[noreturn]] void ChildDie(const spool::Status& s) {
  std::fprintf(stderr, "spool-torture child: %s\n", s.ToString().c_str());
  std::_Exit(3);
}

// With the wall-clock time: a manual retry numbers attempts from 1 again,
// and the parent tells this claim's start from an earlier one's by it.
void SayStarted(const spool::TaskContext& task) {
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  Say("R " + std::to_string(task.id()) + " " + std::to_string(task.attempt()) +
      " " + std::to_string(now.count()));
}

// The local mode's handlers, run by the child's own workers.
void RegisterHandlers(spool::Runtime* runtime,
                      const spool::HandlerOptions& retrying) {
  auto ok = [](spool::TaskContext& task) {
    SayStarted(task);
    return spool::Status::OK();
  };
  for (const char* type : {"ok", "ephemeral"}) {
    spool::Status s = runtime->RegisterHandler(type, ok, retrying);
    if (!s.ok()) ChildDie(s);
  }
  spool::Status s = runtime->RegisterHandler(
      "flaky",
      [](spool::TaskContext& task) {
        SayStarted(task);
        return task.id() % 3 == 0 ? spool::Status::OK()
                                  : spool::Status::Aborted("flaky");
      },
      retrying);
  if (!s.ok()) ChildDie(s);
  // Two slow tasks at a time leave the other workers to the fast types, so
  // that many tasks finish (and must not run again) between kills.
  spool::HandlerOptions slow_options = retrying;
  slow_options.max_concurrent = 2;
  s = runtime->RegisterHandler(
      "slow",
      [](spool::TaskContext& task) {
        SayStarted(task);
        // Long enough to be running at many kills; stops on cancel.
        task.WaitForCancel(std::chrono::milliseconds(50 + task.id() % 200));
        return task.cancelled() ? spool::Status::Cancelled("cancelled")
                                : spool::Status::OK();
      },
      slow_options);
  if (!s.ok()) ChildDie(s);
}

// The remote mode's types, registered so that Enqueue takes them (and the
// retry policy is the queue node's); with no local worker these handlers
// never run: the spool-workers run the tasks.
void RegisterRemoteTypes(spool::Runtime* runtime,
                         const spool::HandlerOptions& retrying) {
  for (const char* type : {"noop", "sleep"}) {
    spool::Status s = runtime->RegisterHandler(
        type,
        [](spool::TaskContext&) {
          return spool::Status::FailedPrecondition(
              "runs on a spool-worker only");
        },
        retrying);
    if (!s.ok()) ChildDie(s);
  }
}

// The workload's four kinds of task (the header comment says what each
// is in the remote mode).
enum Role { kOk, kFlaky, kSlow, kEphemeral };

struct Kind {
  std::string type;
  std::string payload;
};

// The type and payload of a task of `role`: the role's own type with
// `payload`, or in the remote mode one spool-worker serves.
Kind KindOf(Role role, bool remote, const char* payload, std::mt19937_64& rng) {
  static const char* const kLocal[] = {"ok", "flaky", "slow", "ephemeral"};
  if (!remote) return {kLocal[role], payload};
  switch (role) {
    case kOk:
      return {"sleep", "0"};
    case kFlaky:
      return {"sleep", rng() % 3 == 0 ? "0" : "x"};
    case kSlow:
      return {"sleep", std::to_string(10 + rng() % 90)};
    case kEphemeral:
      break;
  }
  return {"noop", payload};
}

// The only type the workload purges, whose tasks may go missing.
const char* PurgedType(bool remote) { return remote ? "noop" : "ephemeral"; }

int RunChild(const Flags& flags) {
  const bool remote = flags.remote_workers > 0;
  spool::Options options;
  options.path = flags.dir;
  options.workers = remote ? 0 : 8;
  options.close_timeout = 100ms;
  if (remote) {
    options.remote_listen = "127.0.0.1:" + std::to_string(flags.remote_port);
    options.remote_secret_file = RemoteDir(flags) + "/secret";
    options.remote_lease = 1s;
    options.remote_heartbeat = 200ms;
  }
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) ChildDie(s);

  spool::HandlerOptions retrying;
  retrying.retry = spool::RetryPolicy::Fixed(3, 0us);
  if (remote) {
    RegisterRemoteTypes(runtime.get(), retrying);
  } else {
    RegisterHandlers(runtime.get(), retrying);
  }
  runtime->Subscribe([](const spool::TaskEvent& event) {
    if (event.kind == spool::TaskEvent::Kind::kSucceeded) {
      Say("D " + std::to_string(event.id));
    }
  });
  s = runtime->Start();
  if (!s.ok()) ChildDie(s);

  std::mt19937_64 rng(flags.seed);
  const Role roles[] = {kOk, kOk, kFlaky, kSlow, kEphemeral};
  std::vector<spool::TaskId> known;
  std::atomic<int> in_flight{0};
  for (uint64_t step = 0;; ++step) {
    while (in_flight.load() > 64) std::this_thread::sleep_for(1ms);
    int op = static_cast<int>(rng() % 100);
    if (op < 55) {
      spool::EnqueueOptions o;
      o.priority = static_cast<int32_t>(rng() % 3);
      if (rng() % 8 == 0) o.group = "g" + std::to_string(rng() % 4);
      if (rng() % 10 == 0) o.dedup_key = "k" + std::to_string(rng() % 16);
      if (rng() % 10 == 0 && !known.empty()) {
        o.depends_on.push_back(known[rng() % known.size()]);
      }
      Kind kind = KindOf(roles[rng() % 5], remote, "p", rng);
      std::string type = kind.type;
      spool::Ticket ticket = runtime->Enqueue(type, kind.payload, o);
      ++in_flight;
      ticket.stored.Then([&in_flight, type, id = ticket.id](
                             const spool::Result<spool::TaskId>& r) {
        // A deduplicated enqueue answers with the holder's id, a task
        // of any type (which a purge may remove): the holder's own
        // enqueue acknowledged it.
        if (r.ok() && *r == id) Say("E " + std::to_string(*r) + " " + type);
        --in_flight;
      });
      if (ticket.id != 0) known.push_back(ticket.id);
    } else if (op < 75) {
      std::vector<spool::TaskSpec> batch;
      size_t n = 2 + rng() % 4;
      std::vector<std::string> batch_types;
      for (size_t i = 0; i < n; ++i) {
        Kind kind = KindOf(roles[rng() % 5], remote, "b", rng);
        batch_types.push_back(kind.type);
        batch.push_back({kind.type, kind.payload, {}});
      }
      spool::BatchTicket ticket = rng() % 2 ? runtime->EnqueueBatch(batch)
                                            : runtime->EnqueueChain(batch);
      ++in_flight;
      ticket.stored.Then(
          [&in_flight,
           batch_types](const spool::Result<std::vector<spool::TaskId>>& r) {
            if (r.ok()) {
              for (size_t i = 0; i < r->size(); ++i) {
                Say("E " + std::to_string((*r)[i]) + " " + batch_types[i]);
              }
            }
            --in_flight;
          });
      known.insert(known.end(), ticket.ids.begin(), ticket.ids.end());
    } else if (op < 85 && !known.empty()) {
      // Results do not matter: cancel races with everything else.
      runtime->Cancel(known[rng() % known.size()]);
    } else if (op < 93 && !known.empty()) {
      runtime->Retry(known[rng() % known.size()]);
    } else if (op < 95) {
      // Only one type is purged: the parent lets its tasks go missing.
      spool::PurgeOptions purge;
      purge.statuses = {spool::TaskStatus::kSucceeded};
      purge.types = {PurgedType(remote)};
      purge.batch_size = 50;
      runtime->Purge(purge);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    }
    if (known.size() > 4096) known.erase(known.begin(), known.begin() + 2048);
  }
}

// ---------------------------------------------------------------------------
// The parent.

struct Ledger {
  std::set<spool::TaskId> acknowledged;
  // Acknowledged tasks of type "ephemeral", which purges may remove.
  std::set<spool::TaskId> purgeable;
  // Tasks that succeeded durably, and when the parent read that (system
  // clock, microseconds): the success came before.
  std::map<spool::TaskId, int64_t> succeeded;
  // The last attempt each task reported started, and when (system clock,
  // microseconds; for a worker's line, a time the start came after).
  struct Start {
    uint32_t attempt = 0;
    int64_t at_us = 0;
  };
  std::map<spool::TaskId, Start> last_attempt_started;
  uint64_t violations = 0;
  uint64_t checked = 0;
};

void Violation(Ledger* ledger, const std::string& what) {
  ++ledger->violations;
  std::fprintf(stderr, "VIOLATION: %s\n", what.c_str());
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Attempt `attempt` of `id` started at `at_us` (the child's R line), or,
// when `after` is set (a worker's log line), at some time after `at_us`.
void RecordStart(Ledger* ledger, spool::TaskId id, uint32_t attempt,
                 int64_t at_us, bool after) {
  // The child's lines come in order on one pipe: a start read after the D
  // line ran after the success. A worker's start did when it is dated
  // after the parent read the D line.
  auto success = ledger->succeeded.find(id);
  if (success != ledger->succeeded.end() &&
      (!after || at_us >= success->second)) {
    Violation(ledger, "task " + std::to_string(id) +
                          " ran again after it succeeded (attempt " +
                          std::to_string(attempt) + ")");
  }
  ledger->last_attempt_started[id] = {attempt, at_us};
}

// Starts argv[0] with stdout (and stderr when `err_fd` >= 0) on the given
// descriptors, killed with SIGKILL when this process dies.
pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  // Built before the fork: the child of a threaded process may not
  // allocate.
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(2);
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// A port on 127.0.0.1 that nothing holds now, below the kernel's ephemeral
// range: the workers connect from ephemeral ports while the child is down,
// and one that drew the gateway's own port would connect to itself and
// hold it. 0 when none was found.
int PickPort() {
  int low = 32768, high = 0;
  if (FILE* range = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(range, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(range);
  }
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 100 && low > 10001; ++attempt) {
    int port =
        10000 + static_cast<int>(rng() % static_cast<unsigned>(low - 10000));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    bool free =
        bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

// The remote mode's spool-worker processes, and the "TASK ATTEMPT" lines
// of their --log files. They live as long as the whole run.
class RemoteWorkers {
 public:
  explicit RemoteWorkers(const Flags& flags) : flags_(flags) {}
  ~RemoteWorkers() { Stop(); }

  // Writes the secret and starts the workers; false after saying why.
  bool Start() {
    std::string dir = RemoteDir(flags_);
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    std::string secret_path = dir + "/secret";
    int fd = open(secret_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0600);
    std::mt19937_64 rng(std::random_device{}());
    std::string secret = std::to_string(rng()) + std::to_string(rng());
    if (error || fd < 0 || fchmod(fd, 0600) != 0 ||
        write(fd, secret.data(), secret.size()) !=
            static_cast<ssize_t>(secret.size())) {
      std::fprintf(stderr, "spool-torture: cannot write %s: %s\n",
                   secret_path.c_str(),
                   error ? error.message().c_str() : std::strerror(errno));
      if (fd >= 0) close(fd);
      return false;
    }
    close(fd);
    for (int i = 0; i < flags_.remote_workers; ++i) {
      Worker worker;
      std::string name = dir + "/worker-" + std::to_string(i);
      worker.out_path = name + ".out";
      std::string log_path = name + ".log";
      // Created here so that reading can start before the worker runs.
      worker.log_fd =
          open(log_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
      int out_fd = open(worker.out_path.c_str(),
                        O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (worker.log_fd < 0 || out_fd < 0) {
        std::fprintf(stderr, "spool-torture: cannot open %s: %s\n",
                     name.c_str(), std::strerror(errno));
        if (out_fd >= 0) close(out_fd);
        return false;
      }
      worker.pid =
          Spawn({flags_.worker_binary, "--connect",
                 "127.0.0.1:" + std::to_string(flags_.remote_port),
                 "--secret-file", secret_path, "--types", "noop,sleep",
                 "--concurrency", "4", "--node", "torture-" + std::to_string(i),
                 "--log", log_path, "--reconnect-max-ms", "100"},
                out_fd, out_fd);
      close(out_fd);
      workers_.push_back(std::move(worker));
    }
    return true;
  }

  // Reads the lines the logs gained since the last call. A line not there
  // at the previous read was written after that read began: its start is
  // dated then.
  void Read(Ledger* ledger) {
    for (Worker& worker : workers_) {
      int64_t began = NowMicros();
      char chunk[8192];
      ssize_t n;
      while ((n = read(worker.log_fd, chunk, sizeof(chunk))) > 0) {
        for (ssize_t i = 0; i < n; ++i) {
          if (worker.partial.empty()) worker.partial_after = worker.last_read;
          if (chunk[i] != '\n') {
            worker.partial.push_back(chunk[i]);
            continue;
          }
          unsigned long long id = 0, attempt = 0;
          if (std::sscanf(worker.partial.c_str(), "%llu %llu", &id, &attempt) ==
              2) {
            ++starts_;
            RecordStart(ledger, id, static_cast<uint32_t>(attempt),
                        worker.partial_after, true);
          }
          worker.partial.clear();
        }
      }
      worker.last_read = began;
    }
  }

  // A worker that exited is a failure of the mode: they must ride out the
  // kills of the queue node.
  void CheckRunning(Ledger* ledger) {
    for (size_t i = 0; i < workers_.size(); ++i) {
      int status = 0;
      if (workers_[i].pid > 0 &&
          waitpid(workers_[i].pid, &status, WNOHANG) == workers_[i].pid) {
        workers_[i].pid = -1;
        Violation(ledger, "spool-worker " + std::to_string(i) +
                              " exited by itself (status " +
                              std::to_string(status) + "), see " +
                              workers_[i].out_path);
      }
    }
  }

  // SIGTERM, and SIGKILL for a worker still there after 15 s; then reads
  // how often each reconnected from its last line.
  void Stop() {
    for (Worker& worker : workers_) {
      if (worker.pid > 0) kill(worker.pid, SIGTERM);
    }
    auto deadline = std::chrono::steady_clock::now() + 15s;
    for (Worker& worker : workers_) {
      while (worker.pid > 0) {
        int status = 0;
        if (waitpid(worker.pid, &status, WNOHANG) != 0) {
          worker.pid = -1;
        } else if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr,
                       "spool-torture: a spool-worker ignored "
                       "SIGTERM; killing it\n");
          kill(worker.pid, SIGKILL);
          waitpid(worker.pid, &status, 0);
          worker.pid = -1;
        } else {
          std::this_thread::sleep_for(10ms);
        }
      }
      if (worker.log_fd >= 0) close(worker.log_fd);
      worker.log_fd = -1;
    }
  }

  uint64_t starts() const { return starts_; }

  // The sum of the workers' reconnects, from their last lines (after Stop).
  uint64_t reconnects() const {
    uint64_t total = 0;
    for (const Worker& worker : workers_) {
      FILE* out = std::fopen(worker.out_path.c_str(), "r");
      if (out == nullptr) continue;
      char line[512];
      unsigned long long finished = 0, count = 0;
      while (std::fgets(line, sizeof(line), out) != nullptr) {
        const char* at = std::strstr(line, "finished=");
        if (at != nullptr)
          std::sscanf(at, "finished=%llu reconnects=%llu", &finished, &count);
      }
      std::fclose(out);
      total += count;
    }
    return total;
  }

 private:
  struct Worker {
    pid_t pid = -1;
    int log_fd = -1;
    std::string out_path;
    // The start of a line not read whole yet, and its date.
    std::string partial;
    int64_t partial_after = 0;
    // When the last read (which reached the end) began.
    int64_t last_read = 0;
  };
  const Flags& flags_;
  std::vector<Worker> workers_;
  uint64_t starts_ = 0;
};

// Reads the child's lines until `deadline`, then kills it.
// `workers`, in the remote mode, has its logs read meanwhile. With
// `from_first_start`, `run_for` counts from the child's first task start
// (its first R line; in the remote mode, whose starts are on the workers'
// logs, its first acknowledgment; at most kFirstStartWait after the spawn)
// rather than from the spawn: once the store holds a few hundred thousand
// tasks, or on a loaded machine under a sanitizer, an open takes longer than
// most lives, and kills counted from the spawn would all land before any
// task runs.
constexpr std::chrono::seconds kFirstStartWait{10};
void RunAndKill(const Flags& flags, const std::string& self, uint64_t seed,
                std::chrono::milliseconds run_for, bool from_first_start,
                RemoteWorkers* workers, Ledger* ledger) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  std::vector<std::string> argv = {self,      "--child", "--dir",
                                   flags.dir, "--seed",  std::to_string(seed)};
  if (workers != nullptr) {
    argv.insert(argv.end(),
                {"--remote-workers", std::to_string(flags.remote_workers),
                 "--remote-port", std::to_string(flags.remote_port)});
  }
  pid_t pid = Spawn(argv, fds[1], -1);
  close(fds[1]);
  auto deadline =
      std::chrono::steady_clock::now() +
      (from_first_start ? std::chrono::milliseconds(kFirstStartWait) : run_for);
  bool waiting_for_start = from_first_start;
  std::string buffer;
  auto handle = [&](const std::string& line) {
    unsigned long long id = 0, attempt = 0;
    long long at_us = 0;
    char type[32] = {0};
    auto started = [&] {
      if (!waiting_for_start) return;
      waiting_for_start = false;
      deadline = std::chrono::steady_clock::now() + run_for;
    };
    if (std::sscanf(line.c_str(), "E %llu %31s", &id, type) == 2) {
      ledger->acknowledged.insert(id);
      if (std::strcmp(type, PurgedType(workers != nullptr)) == 0) {
        ledger->purgeable.insert(id);
      }
      if (workers != nullptr) started();
    } else if (std::sscanf(line.c_str(), "D %llu", &id) == 1) {
      ledger->succeeded.emplace(id, NowMicros());
    } else if (std::sscanf(line.c_str(), "R %llu %llu %lld", &id, &attempt,
                           &at_us) == 3) {
      RecordStart(ledger, id, static_cast<uint32_t>(attempt),
                  static_cast<int64_t>(at_us), false);
      started();
    }
  };
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fds[0], POLLIN, 0};
    // The workers' logs are read every 5 ms: the dates of their lines are
    // that precise.
    int wait_ms = static_cast<int>(left.count());
    if (workers != nullptr) wait_ms = std::min(wait_ms, 5);
    int ready = poll(&pfd, 1, wait_ms);
    if (workers != nullptr) workers->Read(ledger);
    if (ready <= 0) continue;
    char chunk[8192];
    ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;  // the child died on its own
    buffer.append(chunk, static_cast<size_t>(n));
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      handle(buffer.substr(0, newline));
      buffer.erase(0, newline + 1);
    }
  }
  kill(pid, SIGKILL);
  // Lines already in the pipe were acknowledged before the kill landed.
  char chunk[8192];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof(chunk))) > 0) {
    buffer.append(chunk, static_cast<size_t>(n));
  }
  size_t newline;
  while ((newline = buffer.find('\n')) != std::string::npos) {
    handle(buffer.substr(0, newline));
    buffer.erase(0, newline + 1);
  }
  close(fds[0]);
  if (workers != nullptr) workers->Read(ledger);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFSIGNALED(status)) {
    Violation(ledger, "the child exited by itself (status " +
                          std::to_string(status) + ") instead of being killed");
  }
}

void CheckAfterKill(const Flags& flags, Ledger* ledger) {
  // 1-2: with the storage layer, before any recovery.
  // Running at the kill: the attempt, and when it was claimed.
  struct Claim {
    uint32_t attempts = 0;
    int64_t claimed_us = 0;
  };
  std::map<spool::TaskId, Claim> running;
  {
    spool::storage::StoreOptions options;
    options.path = flags.dir;
    std::unique_ptr<spool::storage::TaskStore> store;
    spool::Status s = spool::storage::TaskStore::Open(options, &store);
    if (!s.ok()) {
      Violation(ledger, "reopening after the kill failed: " + s.ToString());
      return;
    }
    size_t mismatches = 0;
    std::vector<std::string> problems;
    s = store->CheckIndexes(&mismatches, &problems);
    if (!s.ok() || mismatches != 0) {
      Violation(ledger, "indexes disagree with records (" +
                            std::to_string(mismatches) + " mismatches): " +
                            (problems.empty() ? s.ToString() : problems[0]));
    }
    for (spool::TaskId id : ledger->acknowledged) {
      spool::storage::StateRecord record;
      s = store->ReadState(id, &record);
      ++ledger->checked;
      if (s.IsNotFound()) {
        // A deduplicated enqueue acknowledges the holder's id; other than
        // that only purged "ephemeral" tasks may be gone.
        if (ledger->purgeable.count(id) == 0) {
          Violation(ledger,
                    "acknowledged task " + std::to_string(id) + " is missing");
        }
        continue;
      }
      if (!s.ok()) {
        Violation(ledger, s.ToString());
        continue;
      }
      if (ledger->succeeded.count(id) != 0 &&
          record.status != spool::TaskStatus::kSucceeded) {
        Violation(ledger, "task " + std::to_string(id) +
                              " succeeded durably but is now " +
                              spool::TaskStatusName(record.status));
      }
      if (record.status == spool::TaskStatus::kRunning &&
          record.handoff_reference.empty()) {
        running[id] = {record.attempts, record.updated_us};
      }
    }
  }
  // 3: a runtime recovers the interrupted attempts.
  spool::Options options;
  options.path = flags.dir;
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) {
    Violation(ledger,
              "opening a runtime after the kill failed: " + s.ToString());
    return;
  }
  for (const auto& [id, claim] : running) {
    const auto& info = runtime->GetTask(id).Wait();
    if (!info.ok()) {
      Violation(ledger,
                "running task " + std::to_string(id) +
                    " vanished in recovery: " + info.status().ToString());
      continue;
    }
    bool settled = info->status == spool::TaskStatus::kRetryScheduled ||
                   info->status == spool::TaskStatus::kFailed ||
                   info->status == spool::TaskStatus::kCancelled ||
                   info->status == spool::TaskStatus::kPending;
    uint32_t claimed = std::max<uint32_t>(claim.attempts, 1);
    bool counted = info->attempts >= claimed;
    // Given back unstarted: the attempt is not counted.
    bool given_back = info->attempts + 1 == claimed &&
                      info->status != spool::TaskStatus::kFailed;
    auto reported = ledger->last_attempt_started.find(id);
    // Reported by this claim: a start before it belongs to an earlier run
    // of the task (a manual retry counts attempts from 1 again).
    bool started = reported != ledger->last_attempt_started.end() &&
                   reported->second.attempt == claimed &&
                   reported->second.at_us >= claim.claimed_us;
    if (!settled || !(counted || (given_back && !started))) {
      Violation(
          ledger,
          "task " + std::to_string(id) + " was running at the kill (attempt " +
              std::to_string(claimed) + (started ? ", reported started" : "") +
              ") and is now " + spool::TaskStatusName(info->status) + " with " +
              std::to_string(info->attempts) + " attempts");
    }
  }
  const auto& closed = runtime->Close().Wait();
  if (!closed.ok()) {
    Violation(ledger,
              "closing the checking runtime: " + closed.status().ToString());
  }
}

int RunParent(Flags flags, const std::string& self) {
  Ledger ledger;
  std::unique_ptr<RemoteWorkers> workers;
  if (flags.remote_workers > 0) {
    if (flags.remote_port == 0) flags.remote_port = PickPort();
    if (flags.remote_port == 0) {
      std::fprintf(stderr, "spool-torture: found no free port\n");
      return 2;
    }
    workers = std::make_unique<RemoteWorkers>(flags);
    if (!workers->Start()) return 2;
  }
  std::mt19937_64 rng(flags.seed);
  for (int kill = 1; kill <= flags.kills; ++kill) {
    auto run_for = std::chrono::milliseconds(50 + rng() % flags.max_run_ms);
    // Every other kill counts from the first task start, so that kills
    // land while tasks run however long the open takes; the others count
    // from the spawn, and some land inside the open.
    bool from_first_start = kill % 2 == 0;
    RunAndKill(flags, self, flags.seed * 1000003 + kill, run_for,
               from_first_start, workers.get(), &ledger);
    CheckAfterKill(flags, &ledger);
    if (workers != nullptr) workers->CheckRunning(&ledger);
    std::string remote =
        workers == nullptr
            ? ""
            : ", " + std::to_string(workers->starts()) + " started on workers";
    std::fprintf(stderr,
                 "spool-torture: kill %d/%d after %lld ms%s: %zu acknowledged, "
                 "%zu succeeded%s, %llu violations\n",
                 kill, flags.kills, static_cast<long long>(run_for.count()),
                 from_first_start ? " from the first start" : "",
                 ledger.acknowledged.size(), ledger.succeeded.size(),
                 remote.c_str(),
                 static_cast<unsigned long long>(ledger.violations));
  }
  std::string remote;
  bool ran = true;
  if (workers != nullptr) {
    workers->Stop();
    remote = " remote_workers=" + std::to_string(flags.remote_workers) +
             " remote_starts=" + std::to_string(workers->starts()) +
             " reconnects=" + std::to_string(workers->reconnects());
    ran = workers->starts() > 0;
    if (!ran) {
      std::fprintf(stderr,
                   "spool-torture: no worker started any attempt; "
                   "see their output in %s\n",
                   RemoteDir(flags).c_str());
    }
  }
  std::fprintf(stderr,
               "kills=%d acknowledged=%zu checked=%llu violations=%llu "
               "seed=%llu%s\n",
               flags.kills, ledger.acknowledged.size(),
               static_cast<unsigned long long>(ledger.checked),
               static_cast<unsigned long long>(ledger.violations),
               static_cast<unsigned long long>(flags.seed), remote.c_str());
  return ledger.violations == 0 && ran ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    Usage();
    return 2;
  }
  if (flags.child) return RunChild(flags);
  if (flags.seed == 0) {
    flags.seed = std::random_device{}() | 1;
  }
  // The workers need a moment to reconnect after each kill.
  if (flags.remote_workers > 0 && !flags.max_run_ms_set) {
    flags.max_run_ms = 1500;
  }
  bool own_dir = flags.dir.empty();
  if (own_dir) {
    std::string pattern = std::filesystem::temp_directory_path().string() +
                          "/spool-torture-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    flags.dir = pattern + "/queue";
  }
  std::string self = std::filesystem::canonical("/proc/self/exe").string();
  int rc = RunParent(flags, self);
  if (own_dir && rc == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(flags.dir).parent_path(),
                                ignored);
  }
  return rc;
}
