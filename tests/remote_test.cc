// Remote workers with real processes on loopback: spool-worker children
// connect to a runtime's gateway (docs/scale-out.md), and post http.post
// tasks to a real receiver, spoold_test.py's. Every wait is bounded.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <utility>
#include <vector>

#include <spool/remote_worker.h>
#include <spool/runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/child_process.h"
#include "tests/remote_testing.h"
#include "tests/runtime_testing.h"
#include "tests/testing.h"

namespace spool {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::kRemoteSecret;
using testing::RemoteTest;
using testing::StartsIn;
using testing::WaitUntil;
using testing::WriteSecret;

// The http.post target of tests/server/spoold_test.py (its Hook: /ok
// answers 200, /down 503, /gone 404, any other path 500) in a process of
// its own, which prints each request it gets before it answers.
class Receiver {
 public:
  Receiver() : process_({SPOOL_PYTHON, SPOOL_HOOK_SCRIPT, "--hook"}) {
    auto line = process_.ReadLine(std::chrono::seconds(15));
    const std::string prefix = "hook listening on ";
    if (line && line->rfind(prefix, 0) == 0)
      port_ = std::stoi(line->substr(prefix.size()));
  }

  // 0 when the receiver did not start.
  int port() const { return port_; }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  // The (path, body) of every request so far, once there are `n` of them
  // or `timeout` passed.
  std::multiset<std::pair<std::string, std::string>> Requests(
      size_t n, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (requests_.size() < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      auto line = process_.ReadLine(left);
      if (!line) break;
      nlohmann::json request = nlohmann::json::parse(*line, nullptr, false);
      if (!request.is_object()) continue;
      requests_.emplace(request.value("path", ""), request.value("body", ""));
    }
    return requests_;
  }

 private:
  ChildProcess process_;
  int port_ = 0;
  std::multiset<std::pair<std::string, std::string>> requests_;
};

TEST_F(RemoteTest, ThreeWorkerProcessesDrainTenThousandTasks) {
  Open();
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(Worker("w" + std::to_string(i), "noop", 8));
    ExpectConnected(*workers.back());
  }
  std::vector<TaskId> ids = EnqueueMany("noop", "", 10000);
  ASSERT_EQ(ids.size(), 10000u);
  ASSERT_TRUE(Drain(std::chrono::seconds(60)).ok());
  auto counts = testing::Await(runtime_->CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), 10000u);
  // Each task ran exactly once, and every worker took part.
  std::map<TaskId, int> runs;
  for (int i = 0; i < 3; ++i) {
    auto starts = StartsIn(dir_.Sub("w" + std::to_string(i) + ".log"));
    EXPECT_GT(starts.size(), 0u) << "worker " << i << " ran nothing";
    for (auto [id, attempt] : starts) {
      ++runs[id];
      EXPECT_EQ(attempt, 1u);
    }
  }
  EXPECT_EQ(runs.size(), 10000u);
  for (auto [id, n] : runs) ASSERT_EQ(n, 1) << "task " << id;
}

TEST_F(RemoteTest,
       SigkilledWorkersTasksRunAgainElsewhereWithTheAttemptCounted) {
  Open();
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(Worker("k" + std::to_string(i), "sleep", 4));
    ExpectConnected(*workers.back());
  }
  std::vector<TaskId> ids = EnqueueMany("sleep", "150", 90);
  ASSERT_TRUE(
      WaitUntil([&] { return StartsIn(dir_.Sub("k0.log")).size() >= 6; },
                std::chrono::seconds(20)));
  workers[0]->Kill();
  ASSERT_TRUE(Drain(std::chrono::seconds(40)).ok());
  std::map<TaskId, std::vector<uint32_t>> starts;
  for (int i = 0; i < 3; ++i) {
    for (auto [id, attempt] :
         StartsIn(dir_.Sub("k" + std::to_string(i) + ".log")))
      starts[id].push_back(attempt);
  }
  int interrupted = 0;
  for (TaskId id : ids) {
    TaskInfo info = Info(id);
    ASSERT_EQ(info.status, TaskStatus::kSucceeded) << "task " << id;
    // The succeeding attempt started exactly once and none started after
    // it: a task that succeeded never ran again. A lease the killed worker
    // held ahead, unstarted, also counts its attempt (the gateway cannot
    // know it never started, as after a machine crash), so there may be
    // fewer starts than attempts, never more.
    const std::vector<uint32_t>& ran = starts[id];
    EXPECT_LE(ran.size(), info.attempts) << "task " << id;
    EXPECT_EQ(std::count(ran.begin(), ran.end(), info.attempts), 1)
        << "task " << id;
    for (uint32_t attempt : ran) EXPECT_LE(attempt, info.attempts);
    if (info.attempts > 1) {
      ++interrupted;
      ASSERT_FALSE(info.failures.empty());
      EXPECT_EQ(info.failures.back().error, kInterruptedAttemptError);
    }
  }
  // The killed worker held 4 running attempts and up to 4 leased ahead;
  // those it had started count.
  EXPECT_GE(interrupted, 1);
  EXPECT_TRUE(Logged("lost"));
}

// A worker that comes and goes (a flapping link, a crash loop) takes the
// slots its last session left, instead of growing the scheduler's slot
// table with every reconnect; the reused slots serve as new ones do.
TEST_F(RemoteTest, AReconnectingWorkerReusesTheSlotsItsLastSessionLeft) {
  Open();
  for (int round = 0; round < 4; ++round) {
    auto worker = Worker("r" + std::to_string(round), "noop", 3);
    ExpectConnected(*worker);
    ASSERT_TRUE(
        WaitUntil([&] { return CountLogged(": slots ") == size_t(round) + 1; },
                  std::chrono::seconds(10)));
    if (round == 3) {
      // Another worker beside it, of another size, takes a new range.
      auto other = Worker("other", "noop", 5);
      ExpectConnected(*other);
      ASSERT_TRUE(WaitUntil([&] { return CountLogged("(new)") == 2; },
                            std::chrono::seconds(10)));
      EnqueueMany("noop", "", 300);
      ASSERT_TRUE(Drain(std::chrono::seconds(30)).ok());
      EXPECT_GT(StartsIn(dir_.Sub("r3.log")).size(), 0u);
      break;
    }
    worker->Kill();
    ASSERT_TRUE(
        WaitUntil([&] { return CountLogged(") lost: ") == size_t(round) + 1; },
                  std::chrono::seconds(10)));
  }
  // The first session's range was taken by each of the next three.
  EXPECT_EQ(CountLogged("(reused)"), 3u);
  EXPECT_EQ(CountLogged("(new)"), 2u);
  EXPECT_EQ(CountLogged(": slots 0 to "), 4u);
}

TEST_F(RemoteTest, StalledWorkerLosesItsLeaseAndItsLateOutcomeIsRefused) {
  Open(std::chrono::milliseconds(600));
  auto stalled = Worker("stalled", "sleep", 1);
  ExpectConnected(*stalled);
  std::vector<TaskId> ids = EnqueueMany("sleep", "400", 1);
  ASSERT_TRUE(
      WaitUntil([&] { return StartsIn(dir_.Sub("stalled.log")).size() == 1; },
                std::chrono::seconds(10)));
  // The lease is on record: which node runs the attempt, until when.
  EXPECT_TRUE(WaitUntil([&] { return Info(ids[0]).remote_node == "stalled"; },
                        std::chrono::seconds(5)));
  EXPECT_GT(Info(ids[0]).lease_deadline.time_since_epoch().count(), 0);
  stalled->Signal(SIGSTOP);
  auto healthy = Worker("healthy", "sleep", 1);
  ExpectConnected(*healthy);
  Status drained = Drain(std::chrono::seconds(20));
  ASSERT_TRUE(drained.ok()) << drained.ToString();
  TaskInfo info = Info(ids[0]);
  EXPECT_EQ(info.status, TaskStatus::kSucceeded) << info.last_error;
  EXPECT_EQ(info.attempts, 2u);
  EXPECT_TRUE(Logged("no heartbeat within 600 ms"));
  // Its handler finishes once it runs again; the outcome is refused.
  stalled->Signal(SIGCONT);
  EXPECT_TRUE(WaitUntil([&] { return Logged("refused the outcome of task"); },
                        std::chrono::seconds(10)));
  info = Info(ids[0]);
  EXPECT_EQ(info.status, TaskStatus::kSucceeded);
  EXPECT_EQ(info.attempts, 2u);
  // Settled: no lease is on record any more.
  EXPECT_EQ(info.remote_node, "");
}

// A worker is sent only the types it declared. With no local worker, a
// type no connected worker serves is not even claimed: it waits, pending,
// for a worker that serves it, with no attempt spent and no lease bounced
// back and forth.
TEST_F(RemoteTest, AWorkerIsSentOnlyTheTypesItDeclared) {
  Open();
  auto noop = Worker("noop-only", "noop", 4);
  ExpectConnected(*noop);
  std::vector<TaskId> sleeps = EnqueueMany("sleep", "1", 50);
  std::vector<TaskId> noops = EnqueueMany("noop", "", 200);
  auto succeeded = [&] {
    auto counts = testing::Await(runtime_->CountByStatus());
    return counts.ok() ? counts->of(TaskStatus::kSucceeded) : 0;
  };
  ASSERT_TRUE(
      WaitUntil([&] { return succeeded() == 200; }, std::chrono::seconds(20)));
  EXPECT_EQ(runtime_->GetStatistics().claimed, 200u);
  for (TaskId id : sleeps) {
    TaskInfo info = Info(id);
    ASSERT_EQ(info.status, TaskStatus::kPending) << "task " << id;
    EXPECT_EQ(info.attempts, 0u) << "task " << id;
  }
  // A worker for the other type connects: those run now, on it alone.
  auto sleep = Worker("sleep-only", "sleep", 4);
  ExpectConnected(*sleep);
  ASSERT_TRUE(Drain(std::chrono::seconds(20)).ok());
  EXPECT_EQ(succeeded(), 250u);
  EXPECT_EQ(runtime_->GetStatistics().claimed, 250u);
  EXPECT_EQ(StartsIn(dir_.Sub("noop-only.log")).size(), 200u);
  EXPECT_EQ(StartsIn(dir_.Sub("sleep-only.log")).size(), 50u);
}

// A named rate limit admits remote leases on the queue node as it admits
// local attempts: a lease it does not allow yet goes back unstarted, due at
// the slot it reserved, and never reaches the worker.
TEST_F(RemoteTest, ANamedRateLimitAdmitsLeasesOnTheQueueNode) {
  Open(std::chrono::seconds(2), [](Runtime& runtime) {
    ASSERT_TRUE(runtime
                    .AddRateLimit("three_an_hour",
                                  RateLimit{3, std::chrono::hours(1)}, {"noop"})
                    .ok());
  });
  auto worker = Worker("limited", "noop", 4);
  ExpectConnected(*worker);
  Timestamp before = SystemClock()->Now();
  std::vector<TaskId> ids = EnqueueMany("noop", "", 6);
  auto count_of = [&](TaskStatus status) {
    size_t n = 0;
    for (TaskId id : ids) n += Info(id).status == status ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(WaitUntil([&] { return count_of(TaskStatus::kSucceeded) == 3; },
                        std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return count_of(TaskStatus::kPending) == 3; },
                        std::chrono::seconds(20)));
  for (TaskId id : ids) {
    TaskInfo info = Info(id);
    if (info.status != TaskStatus::kPending) continue;
    EXPECT_EQ(info.attempts, 0u) << "task " << id;
    ASSERT_TRUE(info.next_attempt_at.has_value()) << "task " << id;
    // 3 an hour: the next slots are 20, 40 and 60 minutes on.
    EXPECT_GT(*info.next_attempt_at, before + std::chrono::minutes(19))
        << "task " << id;
  }
  EXPECT_EQ(StartsIn(dir_.Sub("limited.log")).size(), 3u);
}

// Runtime::Cancel reaches the handler on the remote worker: the running
// attempt and the one leased ahead behind it (queued on the worker, not
// started) both end cancelled, long before their sleeps would.
TEST_F(RemoteTest, CancelReachesRunningAndQueuedRemoteAttempts) {
  Open();
  auto worker = Worker("canceller", "sleep", 1);
  ExpectConnected(*worker);
  std::vector<TaskId> ids = EnqueueMany("sleep", "20000", 2);
  ASSERT_TRUE(
      WaitUntil([&] { return StartsIn(dir_.Sub("canceller.log")).size() == 1; },
                std::chrono::seconds(10)));
  ASSERT_TRUE(WaitUntil([&] { return Info(ids[1]).remote_node == "canceller"; },
                        std::chrono::seconds(5)));
  auto started = std::chrono::steady_clock::now();
  for (TaskId id : ids) {
    ASSERT_TRUE(testing::Await(runtime_->Cancel(id)).ok());
  }
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Info(ids[0]).status == TaskStatus::kCancelled &&
               Info(ids[1]).status == TaskStatus::kCancelled;
      },
      std::chrono::seconds(10)));
  // The worker's one thread is free again only if both handlers were cut
  // short: a third task runs on it well within the 20 s either would sleep.
  std::vector<TaskId> third = EnqueueMany("sleep", "1", 1);
  ASSERT_TRUE(
      WaitUntil([&] { return Info(third[0]).status == TaskStatus::kSucceeded; },
                std::chrono::seconds(8)));
  EXPECT_LT(std::chrono::steady_clock::now() - started,
            std::chrono::seconds(10));
}

// An embedder's RemoteWorker whose handler ignores TaskContext::stopping:
// Close returns TimedOut within its timeout, having disconnected, and the
// runtime runs the task again (here on a second worker that behaves).
TEST_F(RemoteTest, CloseReturnsWithinItsTimeoutWhenAHandlerIgnoresStopping) {
  Open();
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  RemoteWorkerOptions options;
  options.connect = "127.0.0.1:" + std::to_string(port_);
  options.secret = kRemoteSecret;
  options.node = "stubborn";
  std::unique_ptr<RemoteWorker> stubborn;
  // Declared after `stubborn`, so it runs first: a failed ASSERT below
  // must not leave the destructor waiting forever for the handler.
  struct Release {
    std::atomic<bool>& flag;
    ~Release() { flag.store(true); }
  } release_on_exit{release};
  ASSERT_TRUE(RemoteWorker::Create(options, &stubborn).ok());
  ASSERT_TRUE(stubborn
                  ->RegisterHandler("sleep",
                                    [&](TaskContext&) {
                                      started.fetch_add(1);
                                      while (!release.load()) {
                                        std::this_thread::sleep_for(
                                            std::chrono::milliseconds(5));
                                      }
                                      return Status::OK();
                                    })
                  .ok());
  ASSERT_TRUE(stubborn->Connect().ok());
  std::vector<TaskId> ids = EnqueueMany("sleep", "1", 1);
  ASSERT_TRUE(
      WaitUntil([&] { return started.load() == 1; }, std::chrono::seconds(10)));

  auto closing = std::chrono::steady_clock::now();
  Status closed = stubborn->Close(std::chrono::milliseconds(300));
  auto took = std::chrono::steady_clock::now() - closing;
  EXPECT_TRUE(closed.IsTimedOut()) << closed.ToString();
  EXPECT_THAT(closed.message(), HasSubstr("1 handler(s) still running"));
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_TRUE(stubborn->Close().ok());  // idempotent

  // The session ended with the close: another worker gets the task.
  options.node = "helpful";
  std::unique_ptr<RemoteWorker> helpful;
  ASSERT_TRUE(RemoteWorker::Create(options, &helpful).ok());
  ASSERT_TRUE(helpful->RegisterHandler("sleep", testing::Ok).ok());
  ASSERT_TRUE(helpful->Connect().ok());
  ASSERT_TRUE(
      WaitUntil([&] { return Info(ids[0]).status == TaskStatus::kSucceeded; },
                std::chrono::seconds(15)))
      << "status " << static_cast<int>(Info(ids[0]).status) << " attempts "
      << Info(ids[0]).attempts << " last error " << Info(ids[0]).last_error;
  EXPECT_EQ(Info(ids[0]).attempts, 2u);  // the interrupted one counted
  EXPECT_TRUE(helpful->Close().ok());
  // The destructor waits for the stubborn handler's thread.
  release.store(true);
  stubborn.reset();
}

// A cluster's worker lists every node's gateway; only the primary's
// listens. The worker passes over the ones that refuse it, and the bad
// lists are refused naming the option.
TEST_F(RemoteTest, AWorkerTriesEachListedGatewayInTurn) {
  Open();
  RemoteWorkerOptions options;
  options.connect = "127.0.0.1:" + std::to_string(testing::FreePort()) +
                    ",127.0.0.1:" + std::to_string(port_);
  options.secret = kRemoteSecret;
  options.reconnect_initial = std::chrono::milliseconds(20);
  options.connect_timeout = std::chrono::seconds(10);
  std::unique_ptr<RemoteWorker> worker;
  ASSERT_TRUE(RemoteWorker::Create(options, &worker).ok());
  ASSERT_TRUE(worker->RegisterHandler("sleep", testing::Ok).ok());
  ASSERT_TRUE(worker->Connect().ok());
  std::vector<TaskId> ids = EnqueueMany("sleep", "1", 20);
  ASSERT_TRUE(WaitUntil([&] { return worker->finished() == 20; },
                        std::chrono::seconds(15)));
  EXPECT_TRUE(worker->Close().ok());

  for (const char* bad : {"127.0.0.1:1,", ",127.0.0.1:1", "127.0.0.1:1,x",
                          "127.0.0.1:1,127.0.0.1:0"}) {
    options.connect = bad;
    Status s = RemoteWorker::Create(options, &worker);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_THAT(s.message(), HasSubstr("separated by commas")) << bad;
  }
}

TEST_F(RemoteTest, WorkerWithAWrongOrMissingSecretIsRefused) {
  Open();
  std::string wrong = WriteSecret(dir_, "wrong", "not-the-secret-at-all-000");
  // Its stderr goes to a file, through a shell in front of the binary.
  std::string stderr_path = dir_.Sub("intruder.stderr");
  auto refused =
      Worker("intruder", "noop", 1, wrong, {},
             {"/bin/sh", "-c", "exec \"$@\" 2>" + stderr_path, "sh"});
  auto status = refused->Wait(std::chrono::seconds(15));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 3);
  // The challenge is mutual: the gateway's proof fails first, on the
  // worker's side, so the worker never sends a hello of its own.
  std::ifstream err(stderr_path);
  std::string said((std::istreambuf_iterator<char>(err)),
                   std::istreambuf_iterator<char>());
  EXPECT_THAT(said,
              HasSubstr("the gateway could not prove it holds the secret"));
  EXPECT_FALSE(Logged("remote worker 'intruder'"));
  // Nothing was handed to it.
  EnqueueMany("noop", "", 3);
  EXPECT_TRUE(StartsIn(dir_.Sub("intruder.log")).empty());
  // No secret at all: spool-worker refuses to start.
  auto missing = std::make_unique<ChildProcess>(std::vector<std::string>{
      SPOOL_WORKER_BINARY, "--connect", "127.0.0.1:" + std::to_string(port_)});
  status = missing->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(WEXITSTATUS(*status), 2);
}

// spool-worker serves spoold's http.post with the [handlers."http.post"]
// table of its --config file: each body reaches the receiver once, a 4xx
// answer fails the task at its first attempt, and a 500 is retried until
// the policy gives up.
TEST_F(RemoteTest, SpoolWorkerPostsWebhooksAndRetriesOnlyServerErrors) {
  Receiver hook;
  ASSERT_GT(hook.port(), 0) << "the receiver did not start";
  Open();
  std::string config = dir_.Sub("worker.toml");
  std::ofstream(config) << "[handlers.\"http.post\"]\n"
                        << "allow = [\"http://127.0.0.1:" << hook.port()
                        << "/**\"]\n"
                        << "timeout_ms = 5000\n";
  auto worker = Worker("poster", "http.post", 3, "", {"--config", config});
  ExpectConnected(*worker);
  auto post = [&](const std::string& path, const std::string& body) {
    TaskSpec spec;
    spec.type = "http.post";
    spec.payload =
        nlohmann::json{{"url", hook.Url(path)}, {"body", body}}.dump();
    spec.options.retry = RetryPolicy::Fixed(3, std::chrono::milliseconds(10));
    auto stored = testing::Await(runtime_->Enqueue(std::move(spec)).stored,
                                 std::chrono::seconds(30));
    EXPECT_TRUE(stored.ok()) << stored.status().ToString();
    return stored.ok() ? *stored : TaskId{0};
  };
  std::vector<TaskId> delivered;
  for (int i = 0; i < 5; ++i)
    delivered.push_back(post("/ok", "delivery " + std::to_string(i)));
  TaskId gone = post("/gone", "refused");
  TaskId broken = post("/broken", "retried");
  Status drained = Drain(std::chrono::seconds(30));
  ASSERT_TRUE(drained.ok()) << drained.ToString();

  for (TaskId id : delivered) {
    TaskInfo info = Info(id);
    EXPECT_EQ(info.status, TaskStatus::kSucceeded) << info.last_error;
    EXPECT_EQ(info.attempts, 1u) << "task " << id;
  }
  TaskInfo refused = Info(gone);
  EXPECT_EQ(refused.status, TaskStatus::kFailed);
  EXPECT_EQ(refused.attempts, 1u);
  EXPECT_THAT(refused.last_error, HasSubstr("HTTP 404"));
  EXPECT_THAT(refused.last_error, HasSubstr("no such hook here"));
  TaskInfo retried = Info(broken);
  EXPECT_EQ(retried.status, TaskStatus::kFailed);
  EXPECT_EQ(retried.attempts, 3u);
  EXPECT_THAT(retried.last_error, HasSubstr("HTTP 500"));

  // What the receiver got: each delivery once, the 404 once, the 500 at
  // each of its three attempts; all of them run on the worker.
  auto requests = hook.Requests(9, std::chrono::seconds(10));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(requests.count({"/ok", "delivery " + std::to_string(i)}), 1u)
        << "delivery " << i;
  }
  EXPECT_EQ(requests.count({"/gone", "refused"}), 1u);
  EXPECT_EQ(requests.count({"/broken", "retried"}), 3u);
  EXPECT_EQ(requests.size(), 9u);
  EXPECT_EQ(StartsIn(dir_.Sub("poster.log")).size(), 9u);
}

// Asked for http.post with no allow-list (no --config file, or one whose
// table sets none), spool-worker says so and exits with status 2 before it
// connects.
TEST_F(RemoteTest, SpoolWorkerRefusesHttpPostWithoutAnAllowList) {
  Open();
  std::string no_allow = dir_.Sub("no-allow.toml");
  std::ofstream(no_allow) << "[handlers.\"http.post\"]\ntimeout_ms = 1000\n";
  for (const std::string& config : {std::string(), no_allow}) {
    // Through sh, for its stderr on the pipe ChildProcess reads.
    std::vector<std::string> argv = {"/bin/sh",
                                     "-c",
                                     "exec \"$0\" \"$@\" 2>&1",
                                     SPOOL_WORKER_BINARY,
                                     "--connect",
                                     "127.0.0.1:" + std::to_string(port_),
                                     "--secret-file",
                                     dir_.Sub("secret"),
                                     "--types",
                                     "noop,http.post"};
    if (!config.empty()) {
      argv.push_back("--config");
      argv.push_back(config);
    }
    ChildProcess worker(argv);
    std::string output;
    while (auto line = worker.ReadLine(std::chrono::seconds(10)))
      output += *line + "\n";
    auto status = worker.Wait(std::chrono::seconds(10));
    ASSERT_TRUE(status.has_value()) << output;
    EXPECT_TRUE(WIFEXITED(*status)) << output;
    EXPECT_EQ(WEXITSTATUS(*status), 2) << output;
    EXPECT_THAT(output, HasSubstr("http.post"));
    EXPECT_THAT(output, HasSubstr("allow list"));
    EXPECT_THAT(output, HasSubstr(config.empty() ? "no --config file"
                                                 : no_allow + " sets none"));
    EXPECT_THAT(output, ::testing::Not(HasSubstr("connected")));
  }
}

}  // namespace
}  // namespace spool
