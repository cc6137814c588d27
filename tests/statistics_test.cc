// Runtime::GetStatistics after known workloads on a real store, its
// Prometheus text checked by promtool, and Options::log_sink.

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <spool/runtime.h>
#include <spool/statistics.h>

#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using spool::testing::Await;
using spool::testing::OpenOrDie;
using spool::testing::TempDir;
using spool::testing::WaitUntil;

constexpr size_t Of(TaskStatus status) { return static_cast<size_t>(status); }

Options DiskOptions(const TempDir& dir) {
  Options options;
  options.path = dir.Sub("queue");
  options.workers = 4;
  return options;
}

const TypeStatistics* FindType(const Statistics& stats, std::string_view type) {
  for (const TypeStatistics& t : stats.types) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

// A handler that returns OK once *release is true.
Handler BlockUntil(const std::atomic<bool>* release) {
  return [release](TaskContext&) {
    while (!*release) std::this_thread::sleep_for(1ms);
    return Status::OK();
  };
}

HandlerOptions Retries(uint32_t max_attempts) {
  HandlerOptions options;
  options.retry = RetryPolicy::Fixed(max_attempts, Duration(0));
  return options;
}

// 20 tasks that succeed, 4 that fail once then succeed (2 attempts each),
// 5 that fail all 3 of their attempts, and 1 delayed task cancelled before
// it runs.
void RunKnownWorkload(Runtime& runtime, const std::string& ok_type = "ok") {
  ASSERT_TRUE(runtime.RegisterHandler(ok_type, testing::Ok).ok());
  ASSERT_TRUE(runtime
                  .RegisterHandler(
                      "flaky",
                      [](TaskContext& task) {
                        return task.attempt() == 1
                                   ? Status::IOError("first attempt fails")
                                   : Status::OK();
                      },
                      Retries(2))
                  .ok());
  ASSERT_TRUE(runtime
                  .RegisterHandler(
                      "doomed",
                      [](TaskContext&) { return Status::IOError("always"); },
                      Retries(3))
                  .ok());
  ASSERT_TRUE(runtime.Start().ok());
  std::vector<Ticket> tickets;
  for (int i = 0; i < 20; ++i) tickets.push_back(runtime.Enqueue(ok_type, "x"));
  for (int i = 0; i < 4; ++i) tickets.push_back(runtime.Enqueue("flaky", "x"));
  for (int i = 0; i < 5; ++i) tickets.push_back(runtime.Enqueue("doomed", "x"));
  EnqueueOptions later;
  later.delay = std::chrono::hours(1);
  Ticket delayed = runtime.Enqueue(ok_type, "x", later);
  for (Ticket& ticket : tickets) ASSERT_TRUE(Await(ticket.stored).ok());
  ASSERT_TRUE(Await(delayed.stored).ok());
  ASSERT_TRUE(Await(runtime.Drain()).ok());
  Result<TaskStatus> cancelled = Await(runtime.Cancel(delayed.id));
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(*cancelled, TaskStatus::kCancelled);
}

TEST(StatisticsTest, CountersAndGaugesAfterAKnownWorkload) {
  TempDir dir;
  Options options = DiskOptions(dir);
  options.measure_sync_time = true;
  auto runtime = OpenOrDie(options);
  ASSERT_NE(runtime, nullptr);
  RunKnownWorkload(*runtime);
  Statistics s = runtime->GetStatistics();

  EXPECT_EQ(s.enqueued, 30u);
  EXPECT_EQ(s.stored, 30u);
  EXPECT_EQ(s.claimed, 20u + 4 * 2 + 5 * 3);
  EXPECT_EQ(s.succeeded, 24u);
  EXPECT_EQ(s.failed, 4u + 5 * 3);
  EXPECT_EQ(s.retried, 4u + 5 * 2);
  EXPECT_EQ(s.dead, 5u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.recovered, 0u);

  EXPECT_EQ(s.tasks[Of(TaskStatus::kSucceeded)], 24u);
  EXPECT_EQ(s.tasks[Of(TaskStatus::kFailed)], 5u);
  EXPECT_EQ(s.tasks[Of(TaskStatus::kCancelled)], 1u);
  EXPECT_EQ(s.tasks[Of(TaskStatus::kPending)], 0u);
  EXPECT_EQ(s.tasks[Of(TaskStatus::kRunning)], 0u);
  EXPECT_EQ(s.running, 0u);
  EXPECT_EQ(s.ready, 0u);
  EXPECT_EQ(s.reader_queue_depth, 0u);
  EXPECT_EQ(s.watchers, 0u);

  const TypeStatistics* ok = FindType(s, "ok");
  const TypeStatistics* flaky = FindType(s, "flaky");
  const TypeStatistics* doomed = FindType(s, "doomed");
  ASSERT_TRUE(ok && flaky && doomed);
  EXPECT_EQ(s.types.size(), 3u);
  EXPECT_EQ(ok->tasks[Of(TaskStatus::kSucceeded)], 20u);
  EXPECT_EQ(ok->tasks[Of(TaskStatus::kCancelled)], 1u);
  EXPECT_EQ(flaky->tasks[Of(TaskStatus::kSucceeded)], 4u);
  EXPECT_EQ(doomed->tasks[Of(TaskStatus::kFailed)], 5u);
  EXPECT_EQ(ok->handler_seconds.count, 20u);
  EXPECT_EQ(flaky->handler_seconds.count, 8u);
  EXPECT_EQ(doomed->handler_seconds.count, 15u);

  // First attempts only: the cancelled task never started.
  EXPECT_EQ(s.start_latency_seconds.count, 29u);
  // Every commit that changed tasks is in the histograms, each of its tasks
  // once per commit that changed it.
  EXPECT_GT(s.commit_batch_tasks.count, 0u);
  EXPECT_EQ(s.commit_seconds.count, s.commit_batch_tasks.count);
  EXPECT_EQ(s.sync_seconds.count, s.commit_batch_tasks.count);
  EXPECT_GT(s.commit_seconds.sum, 0);
  EXPECT_GT(s.sync_seconds.sum, 0);  // sync mode: a real fsync per commit
  EXPECT_LE(s.sync_seconds.sum, s.commit_seconds.sum);
  EXPECT_GE(s.commit_batch_tasks.sum, 30.0 + 43 * 2 + 1);

  // A live query is a watcher.
  Result<Watch> watch =
      runtime->WatchCountByStatus([](const Result<StatusCounts>&) {});
  ASSERT_TRUE(watch.ok());
  EXPECT_TRUE(
      WaitUntil([&] { return runtime->GetStatistics().watchers == 1; }));
  watch->Unsubscribe();
  EXPECT_TRUE(
      WaitUntil([&] { return runtime->GetStatistics().watchers == 0; }));
  ASSERT_TRUE(Await(runtime->Close()).ok());
  // The figures stay readable after Close.
  EXPECT_EQ(runtime->GetStatistics().succeeded, 24u);
}

// Sync time costs the writer (Options::measure_sync_time): off by default,
// its histogram stays empty while the commit histograms fill.
TEST(StatisticsTest, SyncTimeIsMeasuredOnlyWhenAskedFor) {
  TempDir dir;
  auto runtime = OpenOrDie(DiskOptions(dir));
  ASSERT_NE(runtime, nullptr);
  ASSERT_TRUE(runtime->RegisterHandler("ok", testing::Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  ASSERT_TRUE(Await(runtime->Enqueue("ok", "x").stored).ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  Statistics s = runtime->GetStatistics();
  EXPECT_GT(s.commit_seconds.count, 0u);
  EXPECT_EQ(s.sync_seconds.count, 0u);
  EXPECT_EQ(s.sync_seconds.sum, 0);
}

TEST(StatisticsTest, RunningAndReadyGaugesWhileHandlersBlock) {
  TempDir dir;
  Options options = DiskOptions(dir);
  options.workers = 2;
  auto runtime = OpenOrDie(options);
  ASSERT_NE(runtime, nullptr);
  std::atomic<bool> release{false};
  ASSERT_TRUE(runtime->RegisterHandler("block", BlockUntil(&release)).ok());
  HandlerOptions limited;
  limited.max_concurrent = 2;  // nothing claimed ahead: the rest stay ready
  ASSERT_TRUE(
      runtime
          ->RegisterHandler(
              "limited", [&](TaskContext&) { return Status::OK(); }, limited)
          .ok());
  ASSERT_TRUE(runtime->Start().ok());
  std::vector<Ticket> tickets;
  for (int i = 0; i < 2; ++i) tickets.push_back(runtime->Enqueue("block", ""));
  for (Ticket& t : tickets) ASSERT_TRUE(Await(t.stored).ok());
  EXPECT_TRUE(WaitUntil([&] { return runtime->GetStatistics().running == 2; }));
  for (int i = 0; i < 5; ++i)
    tickets.push_back(runtime->Enqueue("limited", ""));
  for (Ticket& t : tickets) ASSERT_TRUE(Await(t.stored).ok());
  EXPECT_TRUE(WaitUntil([&] { return runtime->GetStatistics().ready == 5; }));
  Statistics s = runtime->GetStatistics();
  EXPECT_EQ(s.tasks[Of(TaskStatus::kRunning)], 2u);
  EXPECT_EQ(s.tasks[Of(TaskStatus::kPending)], 5u);
  release = true;
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  s = runtime->GetStatistics();
  EXPECT_EQ(s.running, 0u);
  EXPECT_EQ(s.ready, 0u);
  EXPECT_EQ(s.succeeded, 7u);
}

TEST(StatisticsTest, GetStatisticsReturnsWhileTheWriterIsStalled) {
  TempDir dir;
  std::atomic<bool> stall{false};
  std::atomic<bool> stalled{false};
  std::atomic<bool> release{false};
  TestHooks hooks;
  hooks.before_commit = [&] {
    if (!stall) return;
    stalled = true;
    while (!release) std::this_thread::sleep_for(1ms);
  };
  std::unique_ptr<Runtime> runtime;
  ASSERT_TRUE(OpenWithHooks(DiskOptions(dir), hooks, &runtime).ok());
  ASSERT_TRUE(runtime->RegisterHandler("t", testing::Ok).ok());
  ASSERT_TRUE(runtime->Start().ok());
  stall = true;
  Ticket ticket = runtime->Enqueue("t", "x");
  ASSERT_TRUE(WaitUntil([&] { return stalled.load(); }));
  // The writer is inside a commit and will not answer anything: the
  // snapshot must not need it.
  Statistics s = runtime->GetStatistics();
  EXPECT_EQ(s.enqueued, 1u);
  EXPECT_EQ(s.stored, 0u);
  release = true;
  ASSERT_TRUE(Await(ticket.stored).ok());
  ASSERT_TRUE(Await(runtime->Drain()).ok());
  EXPECT_EQ(runtime->GetStatistics().stored, 1u);
  EXPECT_EQ(runtime->GetStatistics().succeeded, 1u);
}

TEST(StatisticsTest, RecoveredCountsWhatTheLastRuntimeLeftRunning) {
  TempDir dir;
  Options options = DiskOptions(dir);
  options.close_timeout = 100ms;
  std::atomic<bool> release{false};
  {
    auto runtime = OpenOrDie(options);
    ASSERT_NE(runtime, nullptr);
    ASSERT_TRUE(runtime->RegisterHandler("stuck", BlockUntil(&release)).ok());
    ASSERT_TRUE(runtime->Start().ok());
    Ticket ticket = runtime->Enqueue("stuck", "");
    ASSERT_TRUE(Await(ticket.stored).ok());
    ASSERT_TRUE(
        WaitUntil([&] { return runtime->GetStatistics().running == 1; }));
    Result<void> closed = Await(runtime->Close());
    EXPECT_TRUE(closed.status().IsTimedOut()) << closed.status().ToString();
    release = true;
  }
  auto reopened = OpenOrDie(options);
  ASSERT_NE(reopened, nullptr);
  Statistics s = reopened->GetStatistics();
  EXPECT_EQ(s.recovered, 1u);
  EXPECT_EQ(s.failed, 1u);  // the interrupted attempt
  EXPECT_EQ(s.retried, 1u);
  EXPECT_EQ(s.enqueued, 0u);  // counters start at open
  EXPECT_EQ(s.tasks[Of(TaskStatus::kRetryScheduled)], 1u);
}

// Runs `command` through the shell and returns its exit status and output.
int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    output->append(buffer, n);
  }
  return pclose(pipe);
}

TEST(StatisticsTest, PromtoolAcceptsThePrometheusText) {
  const char* promtool = "/usr/bin/promtool";
  ASSERT_EQ(access(promtool, X_OK), 0)
      << promtool << " is missing: scripts/install-deps installs it "
      << "(Debian package prometheus)";
  TempDir dir;
  auto runtime = OpenOrDie(DiskOptions(dir));
  ASSERT_NE(runtime, nullptr);
  // A type name that needs escaping in a label value.
  RunKnownWorkload(*runtime, "mail \"bulk\" \\ eu");
  std::string text = FormatPrometheus(runtime->GetStatistics());
  EXPECT_NE(text.find("spool_tasks_succeeded_total 24\n"), std::string::npos);
  EXPECT_NE(text.find("spool_type_tasks{type=\"mail \\\"bulk\\\" \\\\ eu\","
                      "status=\"succeeded\"} 20\n"),
            std::string::npos)
      << text;
  // The back-pressure figures (issue 15): nothing refused, nothing held.
  EXPECT_NE(text.find("spool_enqueues_refused_busy_total 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("spool_pending_enqueued_tasks 0\n"), std::string::npos);
  EXPECT_NE(text.find("spool_waiting_enqueued_bytes 0\n"), std::string::npos);
  std::string file = dir.Sub("metrics.txt");
  std::ofstream(file) << text;
  std::string output;
  int status =
      RunCommand(std::string(promtool) + " check metrics < " + file, &output);
  EXPECT_EQ(status, 0) << output << "\n---\n" << text;
  // Lint warnings are printed too (with a zero status for some of them).
  EXPECT_EQ(output, "") << text;
}

TEST(StatisticsTest, TheLogSinkGetsTheRuntimesLines) {
  TempDir dir;
  Options options = DiskOptions(dir);
  options.log_level = LogLevel::kDebug;  // every commit is logged
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  std::atomic<bool> closed{false};
  std::atomic<int> after_close{0};
  options.log_sink = [&](LogLevel level, std::string_view message) {
    if (closed) ++after_close;
    std::lock_guard<std::mutex> lock(mutex);
    lines.emplace_back(level, std::string(message));
  };
  {
    auto runtime = OpenOrDie(options);
    ASSERT_NE(runtime, nullptr);
    ASSERT_TRUE(runtime->RegisterHandler("t", testing::Ok).ok());
    ASSERT_TRUE(runtime->Start().ok());
    ASSERT_TRUE(Await(runtime->Enqueue("t", "x").stored).ok());
    ASSERT_TRUE(Await(runtime->Drain()).ok());
  }
  closed = true;
  {
    std::lock_guard<std::mutex> lock(mutex);
    bool commit_line = false;
    for (const auto& [level, message] : lines) {
      if (level == LogLevel::kDebug && message.rfind("commit: ", 0) == 0) {
        commit_line = true;
      }
    }
    EXPECT_TRUE(commit_line) << lines.size() << " lines, none a commit";
  }
  // Destroyed: the sink is no longer called, by this runtime or another.
  Options quiet = DiskOptions(dir);
  quiet.log_level = LogLevel::kDebug;
  {
    auto runtime = OpenOrDie(quiet);
    ASSERT_NE(runtime, nullptr);
  }
  EXPECT_EQ(after_close.load(), 0);
}

}  // namespace
}  // namespace spool
