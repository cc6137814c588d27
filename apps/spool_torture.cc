// spool-torture: kills a process running a mixed workload with SIGKILL at
// random moments, reopens its directory, and checks that nothing the
// process was told is stored got lost, and that the store is consistent.
//
//   spool-torture [--kills N] [--seed S] [--dir DIR] [--max-run-ms M]
//
// The child runs the workload through the public API and reports on a pipe:
//   E id type   the enqueue of `id` was acknowledged (stored durably)
//   R id n      a handler started attempt n of `id`
//   D id        `id` succeeded, durably (a lifecycle event)
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
// and the exit status is non-zero when V > 0.

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
#include <mutex>
#include <poll.h>
#include <random>
#include <set>
#include <signal.h>
#include <string>
#include <sys/prctl.h>
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
  bool child = false;
};

void Usage() {
  std::fprintf(stderr,
               "usage: spool-torture [--kills N] [--seed S] [--dir DIR] "
               "[--max-run-ms M]\n");
}

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
    if (arg == "--kills") {
      const char* v = value("--kills");
      long long n = 0;
      if (v == nullptr || !ParseNumber("--kills", v, 0, 1000000, &n)) {
        return false;
      }
      flags->kills = static_cast<int>(n);
    } else if (arg == "--seed") {
      const char* v = value("--seed");
      long long n = 0;
      if (v == nullptr ||
          !ParseNumber("--seed", v, 0, std::numeric_limits<long long>::max(),
                       &n)) {
        return false;
      }
      flags->seed = static_cast<uint64_t>(n);
    } else if (arg == "--dir") {
      const char* v = value("--dir");
      if (v == nullptr) return false;
      flags->dir = v;
    } else if (arg == "--max-run-ms") {
      const char* v = value("--max-run-ms");
      long long n = 0;
      if (v == nullptr || !ParseNumber("--max-run-ms", v, 10, 3600000, &n)) {
        return false;
      }
      flags->max_run_ms = static_cast<int>(n);
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

int RunChild(const Flags& flags) {
  spool::Options options;
  options.path = flags.dir;
  options.workers = 8;
  options.close_timeout = 100ms;
  std::unique_ptr<spool::Runtime> runtime;
  spool::Status s = spool::Runtime::Open(options, &runtime);
  if (!s.ok()) ChildDie(s);

  spool::HandlerOptions retrying;
  retrying.retry = spool::RetryPolicy::Fixed(3, 0us);
  // With the wall-clock time: a manual retry numbers attempts from 1 again,
  // and the parent tells this claim's start from an earlier one's by it.
  auto started = [](spool::TaskContext& task) {
    auto now = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    Say("R " + std::to_string(task.id()) + " " +
        std::to_string(task.attempt()) + " " + std::to_string(now.count()));
  };
  auto ok = [&](spool::TaskContext& task) {
    started(task);
    return spool::Status::OK();
  };
  for (const char* type : {"ok", "ephemeral"}) {
    s = runtime->RegisterHandler(type, ok, retrying);
    if (!s.ok()) ChildDie(s);
  }
  s = runtime->RegisterHandler(
      "flaky",
      [&](spool::TaskContext& task) {
        started(task);
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
      [&](spool::TaskContext& task) {
        started(task);
        // Long enough to be running at many kills; stops on cancel.
        task.WaitForCancel(std::chrono::milliseconds(50 + task.id() % 200));
        return task.cancelled() ? spool::Status::Cancelled("cancelled")
                                : spool::Status::OK();
      },
      slow_options);
  if (!s.ok()) ChildDie(s);
  runtime->Subscribe([](const spool::TaskEvent& event) {
    if (event.kind == spool::TaskEvent::Kind::kSucceeded) {
      Say("D " + std::to_string(event.id));
    }
  });
  s = runtime->Start();
  if (!s.ok()) ChildDie(s);

  std::mt19937_64 rng(flags.seed);
  const char* types[] = {"ok", "ok", "flaky", "slow", "ephemeral"};
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
      std::string type = types[rng() % 5];
      spool::Ticket ticket = runtime->Enqueue(type, "p", o);
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
        batch_types.push_back(types[rng() % 5]);
        batch.push_back({batch_types.back(), "b", {}});
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
      // Only "ephemeral" tasks are purged: the parent lets those go missing.
      spool::PurgeOptions purge;
      purge.statuses = {spool::TaskStatus::kSucceeded};
      purge.types = {"ephemeral"};
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
  std::set<spool::TaskId> succeeded;
  // The last attempt each task reported started, and when (system clock,
  // microseconds).
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

// Reads the child's lines until `deadline`, then kills it.
void RunAndKill(const Flags& flags, const std::string& self, uint64_t seed,
                std::chrono::milliseconds run_for, Ledger* ledger) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fds[1], STDOUT_FILENO);
    std::string seed_text = std::to_string(seed);
    execl(self.c_str(), self.c_str(), "--child", "--dir", flags.dir.c_str(),
          "--seed", seed_text.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + run_for;
  std::string buffer;
  auto handle = [&](const std::string& line) {
    unsigned long long id = 0, attempt = 0;
    long long at_us = 0;
    char type[32] = {0};
    if (std::sscanf(line.c_str(), "E %llu %31s", &id, type) == 2) {
      ledger->acknowledged.insert(id);
      if (std::strcmp(type, "ephemeral") == 0) ledger->purgeable.insert(id);
    } else if (std::sscanf(line.c_str(), "D %llu", &id) == 1) {
      ledger->succeeded.insert(id);
    } else if (std::sscanf(line.c_str(), "R %llu %llu %lld", &id, &attempt,
                           &at_us) == 3) {
      if (ledger->succeeded.count(id) != 0) {
        Violation(ledger, "task " + std::to_string(id) +
                              " ran again after it succeeded (attempt " +
                              std::to_string(attempt) + ")");
      }
      ledger->last_attempt_started[id] = {static_cast<uint32_t>(attempt),
                                          static_cast<int64_t>(at_us)};
    }
  };
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fds[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
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

int RunParent(const Flags& flags, const std::string& self) {
  Ledger ledger;
  std::mt19937_64 rng(flags.seed);
  for (int kill = 1; kill <= flags.kills; ++kill) {
    auto run_for = std::chrono::milliseconds(50 + rng() % flags.max_run_ms);
    RunAndKill(flags, self, flags.seed * 1000003 + kill, run_for, &ledger);
    CheckAfterKill(flags, &ledger);
    std::fprintf(stderr,
                 "spool-torture: kill %d/%d after %lld ms: %zu acknowledged, "
                 "%zu succeeded, %llu violations\n",
                 kill, flags.kills, static_cast<long long>(run_for.count()),
                 ledger.acknowledged.size(), ledger.succeeded.size(),
                 static_cast<unsigned long long>(ledger.violations));
  }
  std::fprintf(stderr,
               "kills=%d acknowledged=%zu checked=%llu violations=%llu "
               "seed=%llu\n",
               flags.kills, ledger.acknowledged.size(),
               static_cast<unsigned long long>(ledger.checked),
               static_cast<unsigned long long>(ledger.violations),
               static_cast<unsigned long long>(flags.seed));
  return ledger.violations == 0 ? 0 : 1;
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
