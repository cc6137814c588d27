// Live queries through the runtime: exact emissions for N subscriptions and
// M writes, hash suppression, coalescing, shared queries and late joiners,
// read-your-writes at subscription, ordering, the unsubscribe guarantee,
// and close.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "runtime/test_hooks.h"
#include "runtime/watch_control.h"
#include "tests/runtime_testing.h"

namespace spool {
namespace {
using spool::testing::Await;
using spool::testing::Ok;

using namespace std::chrono_literals;
using spool::testing::TempDir;
using spool::testing::WaitUntil;

constexpr auto kWait = 60s;

// Runs posted callbacks on one thread, in order; can be held shut, and
// tells when it has nothing queued or running.
class TestExecutor final : public Executor {
 public:
  TestExecutor() : thread_([this] { Loop(); }) {}
  ~TestExecutor() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      gated_ = false;
    }
    wake_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(fn));
    }
    wake_.notify_all();
  }
  void Gate(bool gated) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gated_ = gated;
    }
    wake_.notify_all();
  }
  size_t queued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size();
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.empty() && !running_;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || (!gated_ && !queue_.empty()); });
      if (queue_.empty() && stop_) return;
      if (gated_ && !stop_) continue;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      fn();
      lock.lock();
      running_ = false;
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool gated_ = false;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// Records what a watch delivers.
template <class T>
class Recorder {
 public:
  WatchCallback<T> Callback() {
    return [this](const Result<T>& result) {
      std::lock_guard<std::mutex> lock(mutex_);
      values_.push_back(result);
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.size();
  }
  Result<T> last() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (values_.empty()) return Status::NotFound("nothing delivered");
    return values_.back();
  }
  std::vector<Result<T>> all() {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_;
  }

 private:
  std::mutex mutex_;
  std::vector<Result<T>> values_;
};

std::vector<TaskId> Ids(const TaskPage& page) {
  std::vector<TaskId> ids;
  for (const TaskInfo& task : page.tasks) ids.push_back(task.id);
  return ids;
}

class WatchTest : public ::testing::Test {
 protected:
  void Open(int readers = 2, TestHooks hooks = {}) {
    executor_ = std::make_shared<TestExecutor>();
    Options options;
    options.path = dir_.Sub("q");
    options.durability = Durability::kMemory;
    options.workers = 2;
    options.readers = readers;
    options.callback_executor = executor_;
    Status s = OpenWithHooks(options, std::move(hooks), &runtime_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    if (runtime_) {
      EXPECT_TRUE(Await(runtime_->Close()).ok());
    }
    runtime_.reset();
  }

  WatchStats Stats() {
    auto stats = Await(runtime_->GetWatchStats());
    EXPECT_TRUE(stats.ok());
    return stats.ok() ? *stats : WatchStats{};
  }

  // Waits until no query runs and every delivery has been made: the
  // counters hold still across two looks, and the executor is idle.
  WatchStats Settle() {
    WatchStats last = Stats();
    bool settled = WaitUntil(
        [&] {
          std::this_thread::sleep_for(5ms);
          WatchStats now = Stats();
          bool still = now.in_flight == 0 && now.runs == last.runs &&
                       now.emissions == last.emissions && executor_->idle();
          last = now;
          return still;
        },
        kWait);
    EXPECT_TRUE(settled) << "live queries never settled";
    return last;
  }

  TempDir dir_;
  std::shared_ptr<TestExecutor> executor_;
  std::unique_ptr<Runtime> runtime_;
};

TEST_F(WatchTest, NSubscriptionsTimesMWritesGiveExactlyTheExpectedEmissions) {
  Open();
  constexpr int kTypes = 6;
  constexpr int kWrites = 30;
  std::vector<std::string> types;
  for (int i = 0; i < kTypes; ++i) {
    types.push_back("t" + std::to_string(i));
    ASSERT_TRUE(runtime_->RegisterHandler(types.back(), Ok).ok());
  }
  ASSERT_TRUE(runtime_->RegisterHandler("other", Ok).ok());

  std::vector<std::unique_ptr<Recorder<TaskPage>>> lists;
  std::vector<Watch> watches;
  for (int i = 0; i < kTypes; ++i) {
    lists.push_back(std::make_unique<Recorder<TaskPage>>());
    TaskQuery query;
    query.type = types[i];
    query.status = TaskStatus::kPending;
    auto watch = runtime_->WatchList(query, lists.back()->Callback());
    ASSERT_TRUE(watch.ok());
    watches.push_back(std::move(watch).value());
  }
  Recorder<StatusCounts> counts;
  Recorder<TypeCounts> type_counts;
  watches.push_back(
      std::move(runtime_->WatchCountByStatus(counts.Callback())).value());
  watches.push_back(
      std::move(runtime_->WatchCountByType(type_counts.Callback())).value());
  WatchStats stats = Settle();
  for (auto& list : lists) {
    ASSERT_EQ(list->count(), 1u) << "the initial result";
    EXPECT_TRUE(list->last()->tasks.empty());
  }
  EXPECT_EQ(counts.count(), 1u);
  EXPECT_EQ(stats.queries, size_t{kTypes + 2});

  Recorder<TaskInfo> first_task;
  std::optional<Watch> task_watch;
  for (int j = 0; j < kWrites; ++j) {
    int target = j % kTypes;
    // Counted before the write: its result may be delivered before
    // `stored` is seen here.
    std::vector<size_t> before;
    for (auto& list : lists) before.push_back(list->count());
    size_t task_before = first_task.count();
    auto ticket = runtime_->Enqueue(types[target], "w" + std::to_string(j));
    ASSERT_TRUE(Await(ticket.stored).ok());
    WatchStats now = Settle();
    // Exactly the listing of that type, the two counts, and nothing else
    // ran again; each delivered exactly one new result.
    EXPECT_EQ(now.runs - stats.runs, 3u) << "write " << j;
    EXPECT_EQ(now.unchanged, stats.unchanged) << "write " << j;
    for (int i = 0; i < kTypes; ++i) {
      EXPECT_EQ(lists[i]->count(), before[i] + (i == target ? 1 : 0))
          << "write " << j << " listing " << i;
    }
    EXPECT_EQ(first_task.count(), task_before) << "an unrelated task changed";
    stats = now;
    if (j == 0) {
      // From now on one task is watched too (keyed by id: other writes do
      // not run it).
      task_watch.emplace(
          std::move(runtime_->WatchTask(ticket.id, first_task.Callback()))
              .value());
      stats = Settle();
      ASSERT_EQ(first_task.count(), 1u);
      EXPECT_EQ(first_task.last()->status, TaskStatus::kPending);
    }
  }
  EXPECT_EQ(counts.count(), size_t{1 + kWrites});
  EXPECT_EQ(type_counts.count(), size_t{1 + kWrites});

  // Writes no listing filters on: only the counts run.
  for (int j = 0; j < 5; ++j) {
    ASSERT_TRUE(Await(runtime_->Enqueue("other", "x").stored).ok());
    WatchStats now = Settle();
    EXPECT_EQ(now.runs - stats.runs, 2u);
    stats = now;
  }
  for (int i = 0; i < kTypes; ++i) {
    EXPECT_EQ(lists[i]->count(), size_t{1 + kWrites / kTypes});
  }

  // Final values are current, before and after the tasks run.
  for (bool started : {false, true}) {
    if (started) {
      ASSERT_TRUE(runtime_->Start().ok());
      ASSERT_TRUE(Await(runtime_->Drain()).ok());
      Settle();
    }
    for (int i = 0; i < kTypes; ++i) {
      TaskQuery query;
      query.type = types[i];
      query.status = TaskStatus::kPending;
      auto now = Await(runtime_->ListTasks(query));
      ASSERT_TRUE(now.ok());
      EXPECT_EQ(Ids(*lists[i]->last()), Ids(*now)) << "listing " << i;
      EXPECT_EQ(Ids(*now).size(), started ? 0u : size_t{kWrites / kTypes});
    }
    auto now = Await(runtime_->CountByStatus());
    EXPECT_EQ(counts.last()->by_status, now->by_status);
    auto by_type = Await(runtime_->CountByType());
    EXPECT_EQ(type_counts.last()->size(), by_type->size());
    EXPECT_EQ(first_task.last()->status,
              started ? TaskStatus::kSucceeded : TaskStatus::kPending);
  }
}

TEST_F(WatchTest, GroupListingsFollowCancelDeleteAndHold) {
  // Writes of the task-control calls reach live queries like enqueues do:
  // a group listing by status, a task watched by id, and the counts.
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  ASSERT_TRUE(runtime_->RegisterHandler("b", Ok).ok());
  std::vector<TaskId> g1;
  for (int i = 0; i < 6; ++i) {
    EnqueueOptions options;
    options.group = "g1";
    g1.push_back(runtime_->Enqueue(i % 2 ? "b" : "a", "x", options).id);
  }
  EnqueueOptions other;
  other.group = "g2";
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "y", other).stored).ok());

  TaskQuery pending;
  pending.group = "g1";
  pending.status = TaskStatus::kPending;
  Recorder<TaskPage> list;
  Watch listing =
      std::move(runtime_->WatchList(pending, list.Callback())).value();
  TaskQuery typed;
  typed.group = "g1";
  typed.type = "b";
  auto b_only = Await(runtime_->ListTasks(typed));
  ASSERT_TRUE(b_only.ok());
  EXPECT_EQ(Ids(*b_only), (std::vector<TaskId>{g1[1], g1[3], g1[5]}));
  Recorder<TaskInfo> task;
  Watch watched =
      std::move(runtime_->WatchTask(g1[0], task.Callback())).value();
  WatchStats stats = Settle();
  ASSERT_EQ(list.count(), 1u);
  EXPECT_EQ(Ids(*list.last()), g1);

  // A write in another group does not run the g1 listing.
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "z", other).stored).ok());
  WatchStats now = Settle();
  EXPECT_EQ(now.runs, stats.runs) << "g2 writes ran a g1 query";

  auto cancelled = Await(runtime_->Cancel(g1[0]));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  ASSERT_TRUE(Await(runtime_->Hold(g1[2])).ok());
  Settle();
  std::vector<TaskId> expected = {g1[1], g1[3], g1[4], g1[5]};
  EXPECT_EQ(Ids(*list.last()), expected);
  EXPECT_EQ(task.last()->status, TaskStatus::kCancelled);

  ASSERT_TRUE(Await(runtime_->Delete(g1[0])).ok());
  Settle();
  EXPECT_TRUE(task.last().status().IsNotFound());
  ASSERT_TRUE(Await(runtime_->Release(g1[2])).ok());
  Settle();
  expected = {g1[1], g1[2], g1[3], g1[4], g1[5]};
  EXPECT_EQ(Ids(*list.last()), expected);
  auto current = Await(runtime_->ListTasks(pending));
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(Ids(*list.last()), Ids(*current));
}

TEST_F(WatchTest, AnUnchangedResultIsNotDelivered) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  // Three tasks, a page of two: the page holds tasks 1 and 2 and a cursor.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  }
  Recorder<TaskPage> page;
  TaskQuery query;
  query.type = "a";
  query.limit = 2;
  Watch watch = std::move(runtime_->WatchList(query, page.Callback())).value();
  WatchStats before = Settle();
  ASSERT_EQ(page.count(), 1u);
  EXPECT_EQ(page.last()->tasks.size(), 2u);
  EXPECT_FALSE(page.last()->next_cursor.empty());
  // A fourth task of the type: the listing runs again, but its first page
  // is what it was.
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  WatchStats after = Settle();
  EXPECT_EQ(after.runs, before.runs + 1);
  EXPECT_EQ(after.unchanged, before.unchanged + 1);
  EXPECT_EQ(page.count(), 1u);
}

TEST_F(WatchTest, IdenticalQueriesShareOneRunAndLateJoinersGetTheLastResult) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  Recorder<StatusCounts> one;
  Recorder<StatusCounts> two;
  Watch first = std::move(runtime_->WatchCountByStatus(one.Callback())).value();
  Settle();
  Watch second =
      std::move(runtime_->WatchCountByStatus(two.Callback())).value();
  WatchStats stats = Settle();
  EXPECT_EQ(stats.queries, 1u);
  EXPECT_EQ(stats.subscriptions, 2u);
  EXPECT_EQ(stats.runs, 1u) << "the late joiner reuses the last result";
  ASSERT_EQ(two.count(), 1u);
  EXPECT_EQ(two.last()->of(TaskStatus::kPending), 1u);
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  stats = Settle();
  EXPECT_EQ(stats.runs, 2u);
  EXPECT_EQ(one.last()->of(TaskStatus::kPending), 2u);
  EXPECT_EQ(two.last()->of(TaskStatus::kPending), 2u);
  first.Unsubscribe();
  EXPECT_EQ(Settle().queries, 1u);
  second.Unsubscribe();
  stats = Settle();
  EXPECT_EQ(stats.queries, 0u);
  EXPECT_EQ(stats.subscriptions, 0u);
}

TEST_F(WatchTest, ASubscriptionSeesEveryWriteStoredBeforeIt) {
  // Read your writes at subscription, also for a late joiner of a shared
  // query whose last result predates the write.
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  TaskQuery query;
  query.type = "a";
  query.limit = 1000;
  Recorder<TaskPage> anchor;
  Watch keep = std::move(runtime_->WatchList(query, anchor.Callback())).value();
  for (int i = 0; i < 100; ++i) {
    TaskId id = runtime_->Enqueue("a", "x").id;
    ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
    Promise<std::vector<TaskId>> first;
    Watch watch =
        std::move(runtime_->WatchList(query, [first](
                                                 const Result<TaskPage>& page) {
          first.Set(Ids(*page));
        })).value();
    auto ids = Await(first.GetFuture());
    ASSERT_TRUE(ids.ok());
    ASSERT_FALSE(ids->empty());
    EXPECT_EQ(ids->back(), id + 1) << "round " << i;
  }
}

TEST_F(WatchTest, ChangesDuringARunAreCoalescedAndTheFinalValueIsCurrent) {
  // One reader, kept busy by large listings, so that many commits land
  // while a run of the watched counts is queued or running.
  TestHooks hooks;
  hooks.before_commit = [] { std::this_thread::sleep_for(200us); };
  Open(/*readers=*/1, hooks);
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  std::vector<TaskSpec> filler(3000, TaskSpec{"a", std::string(200, 'f'), {}});
  ASSERT_TRUE(Await(runtime_->EnqueueBatch(filler).stored).ok());
  Recorder<StatusCounts> counts;
  Watch watch =
      std::move(runtime_->WatchCountByStatus(counts.Callback())).value();
  Settle();
  std::atomic<bool> busy{true};
  std::thread loader([&] {
    TaskQuery big;
    big.limit = 3000;
    while (busy) (void)runtime_->ListTasksJson(big).WaitFor(kWait);
  });
  std::vector<Ticket> tickets;
  for (int i = 0; i < 400; ++i) {
    tickets.push_back(runtime_->Enqueue("a", "x"));
    if (i % 10 == 0) std::this_thread::sleep_for(1ms);
  }
  for (auto& ticket : tickets) ASSERT_TRUE(Await(ticket.stored).ok());
  busy = false;
  loader.join();
  WatchStats stats = Settle();
  EXPECT_GT(stats.coalesced, 0u) << "commits should have piled up";
  EXPECT_LE(stats.emissions, stats.runs);
  auto all = counts.all();
  for (size_t i = 1; i < all.size(); ++i) {
    ASSERT_TRUE(all[i].ok());
    // Only enqueues happen: a newer result never has fewer tasks.
    EXPECT_GE(all[i]->total(), all[i - 1]->total()) << "went back in time";
  }
  EXPECT_EQ(counts.last()->total(), 3400u);
}

TEST_F(WatchTest, ANewSubscriberGetsItsFirstResultUnderSustainedWrites) {
  // Every run of the watched query overlaps a commit that affects it (one
  // reader, kept busy; commits every ~200 us). A subscriber that joins while
  // a run is in flight must still get its first result, from the first run
  // that saw everything before it joined, not wait for a quiet moment.
  TestHooks hooks;
  hooks.before_commit = [] { std::this_thread::sleep_for(200us); };
  Open(/*readers=*/1, hooks);
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  std::vector<TaskSpec> filler(3000, TaskSpec{"a", std::string(200, 'f'), {}});
  ASSERT_TRUE(Await(runtime_->EnqueueBatch(filler).stored).ok());
  std::atomic<bool> busy{true};
  std::thread loader([&] {
    TaskQuery big;
    big.limit = 3000;
    while (busy) (void)runtime_->ListTasksJson(big).WaitFor(kWait);
  });
  std::thread writer([&] {
    while (busy) (void)runtime_->Enqueue("a", "x").stored.WaitFor(kWait);
  });
  std::vector<Watch> watches;
  for (int i = 0; i < 20 && !HasFailure(); ++i) {
    Promise<void> first;
    auto watch = runtime_->WatchCountByStatus(
        [first](const Result<StatusCounts>&) { first.Set(Status()); });
    ASSERT_TRUE(watch.ok());
    watches.push_back(std::move(watch).value());
    // Joins the shared query while its runs are in flight.
    EXPECT_TRUE(first.GetFuture().WaitFor(10s))
        << "subscriber " << i << " starved of its first result";
  }
  busy = false;
  writer.join();
  loader.join();
}

TEST_F(WatchTest, ResultsNeverGoBackWhileTasksRun) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  std::mutex mutex;
  std::vector<uint64_t> succeeded;
  Watch watch =
      std::move(
          runtime_->WatchCountByStatus([&](const Result<StatusCounts>& counts) {
            std::lock_guard<std::mutex> lock(mutex);
            succeeded.push_back(counts->of(TaskStatus::kSucceeded));
          }))
          .value();
  std::vector<TaskStatus> lifecycle;
  TaskId id = runtime_->Enqueue("a", "x").id;
  Watch task =
      std::move(runtime_->WatchTask(id, [&](const Result<TaskInfo>& info) {
        std::lock_guard<std::mutex> lock(mutex);
        if (info.ok()) lifecycle.push_back(info->status);
      })).value();
  ASSERT_TRUE(runtime_->Start().ok());
  for (int i = 0; i < 300; ++i) (void)runtime_->Enqueue("a", "x");
  ASSERT_TRUE(Await(runtime_->Drain()).ok());
  Settle();
  std::lock_guard<std::mutex> lock(mutex);
  for (size_t i = 1; i < succeeded.size(); ++i) {
    EXPECT_GE(succeeded[i], succeeded[i - 1]);
  }
  EXPECT_EQ(succeeded.back(), 301u);
  ASSERT_FALSE(lifecycle.empty());
  EXPECT_EQ(lifecycle.back(), TaskStatus::kSucceeded);
  auto order = [](TaskStatus s) {
    return s == TaskStatus::kPending ? 0 : s == TaskStatus::kRunning ? 1 : 2;
  };
  for (size_t i = 1; i < lifecycle.size(); ++i) {
    EXPECT_GT(order(lifecycle[i]), order(lifecycle[i - 1]));
  }
}

TEST_F(WatchTest, UnsubscribeWaitsForARunningCallbackAndNothingFollows) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  std::atomic<int> calls{0};
  std::atomic<bool> in_callback{false};
  std::atomic<bool> callback_returned{false};
  std::atomic<bool> unsubscribed{false};
  std::atomic<bool> late_call{false};
  Watch watch =
      std::move(runtime_->WatchCountByStatus([&](const Result<StatusCounts>&) {
        if (unsubscribed) late_call = true;
        if (++calls == 2) {
          in_callback = true;
          std::this_thread::sleep_for(300ms);
          callback_returned = true;
        }
      })).value();
  ASSERT_TRUE(WaitUntil([&] { return calls.load() == 1; }, kWait));
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  ASSERT_TRUE(WaitUntil([&] { return in_callback.load(); }, kWait));
  watch.Unsubscribe();
  unsubscribed = true;
  EXPECT_TRUE(callback_returned) << "Unsubscribe returned mid-callback";
  EXPECT_FALSE(watch.active());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  }
  Settle();
  EXPECT_FALSE(late_call) << "a callback ran after Unsubscribe returned";
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(Stats().subscriptions, 0u);
}

TEST_F(WatchTest, UnsubscribeDropsADeliveryAlreadyQueuedOnTheExecutor) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  executor_->Gate(true);
  std::atomic<int> calls{0};
  Watch watch =
      std::move(runtime_->WatchCountByStatus([&](const Result<StatusCounts>&) {
        calls++;
      })).value();
  // The initial result is on the executor's queue, not yet run.
  ASSERT_TRUE(WaitUntil([&] { return executor_->queued() == 1; }, kWait));
  watch.Unsubscribe();
  executor_->Gate(false);
  ASSERT_TRUE(WaitUntil([&] { return executor_->idle(); }, kWait));
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(WatchTest, UnsubscribeFromInsideTheCallbackEndsIt) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  std::atomic<int> calls{0};
  Watch watch;
  std::mutex mutex;
  std::unique_lock<std::mutex> hold(mutex);
  watch =
      std::move(runtime_->WatchCountByStatus([&](const Result<StatusCounts>&) {
        calls++;
        std::lock_guard<std::mutex> lock(mutex);
        watch.Unsubscribe();
      })).value();
  hold.unlock();
  ASSERT_TRUE(WaitUntil([&] { return calls.load() == 1; }, kWait));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  }
  Settle();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(watch.active());
}

TEST_F(WatchTest, JsonWatchesAndPayloadDeclarations) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("doc", Ok).ok());
  TaskId id = runtime_->Enqueue("doc", "{\"a\":1}").id;
  ASSERT_TRUE(Await(runtime_->Enqueue("doc", "[]").stored).ok());
  Recorder<std::string> before;
  Watch old = std::move(runtime_->WatchTaskJson(id, before.Callback())).value();
  Settle();
  ASSERT_EQ(before.count(), 1u);
  EXPECT_NE(before.last()->find("\"payload_base64\":"), std::string::npos);
  ASSERT_TRUE(runtime_->DeclareJsonPayload("doc").ok());
  Recorder<std::string> after;
  Watch fresh =
      std::move(runtime_->WatchTaskJson(id, after.Callback())).value();
  Recorder<std::string> list;
  TaskQuery query;
  query.type = "doc";
  Watch listing =
      std::move(runtime_->WatchListJson(query, list.Callback())).value();
  WatchStats stats = Settle();
  EXPECT_EQ(stats.queries, 3u) << "a declaration makes a new query";
  EXPECT_NE(after.last()->find("\"payload\":{\"a\":1}"), std::string::npos)
      << *after.last();
  EXPECT_NE(list.last()->find("\"payload\":[]"), std::string::npos);
  // The first watch keeps the form it was made with.
  EXPECT_EQ(before.count(), 1u);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(Await(runtime_->Drain()).ok());
  Settle();
  EXPECT_NE(after.last()->find("\"status\":\"succeeded\""), std::string::npos);
  EXPECT_NE(before.last()->find("\"payload_base64\":"), std::string::npos);
  EXPECT_NE(before.last()->find("\"status\":\"succeeded\""), std::string::npos);
}

TEST_F(WatchTest, WatchingAMissingTaskDeliversNotFoundThenTheTask) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  ASSERT_TRUE(Await(runtime_->Enqueue("a", "x").stored).ok());
  Recorder<TaskInfo> task;
  // The next id the runtime hands out.
  TaskId next = runtime_->Enqueue("a", "x").id + 1;
  Watch watch = std::move(runtime_->WatchTask(next, task.Callback())).value();
  Settle();
  ASSERT_GE(task.count(), 1u);
  EXPECT_TRUE(task.all().front().status().IsNotFound());
  ASSERT_EQ(runtime_->Enqueue("a", "x").id, next);
  ASSERT_TRUE(WaitUntil([&] { return task.last().ok(); }, kWait));
  EXPECT_EQ(task.last()->id, next);
}

TEST_F(WatchTest, CloseEndsEveryWatchWithClosedOnce) {
  Open();
  ASSERT_TRUE(runtime_->RegisterHandler("a", Ok).ok());
  Recorder<StatusCounts> counts;
  Recorder<TaskPage> page;
  Watch a = std::move(runtime_->WatchCountByStatus(counts.Callback())).value();
  Watch b =
      std::move(runtime_->WatchList(TaskQuery{}, page.Callback())).value();
  Settle();
  ASSERT_TRUE(Await(runtime_->Close()).ok());
  ASSERT_TRUE(WaitUntil([&] { return executor_->idle(); }, kWait));
  EXPECT_TRUE(counts.last().status().IsClosed());
  EXPECT_TRUE(page.last().status().IsClosed());
  EXPECT_EQ(counts.count(), 2u);
  EXPECT_FALSE(a.active());
  runtime_.reset();
  // The watches outlive the runtime; unsubscribing them is harmless.
  a.Unsubscribe();
  b.Unsubscribe();
  EXPECT_EQ(counts.count(), 2u);
}

// The delivery slot alone, without actors, so that ThreadSanitizer sees
// every synchronization: offers from several threads, a slow callback, and
// an Unsubscribe racing them.
TEST(WatchControlTest, ConcurrentOffersDeliverInOrderAndStopAtUnsubscribe) {
  for (int round = 0; round < 20; ++round) {
    auto executor = std::make_shared<TestExecutor>();
    auto link = std::make_shared<WatchLink>(actors::watch_actor());
    std::atomic<bool> unsubscribed{false};
    std::atomic<bool> late{false};
    std::atomic<int> calls{0};
    std::mutex order_mutex;
    int last_seen = -1;
    bool backwards = false;
    auto control = std::make_shared<internal::TypedWatch<int>>(
        1, link, executor, [&](const Result<int>& value) {
          if (unsubscribed) late = true;
          calls++;
          std::lock_guard<std::mutex> lock(order_mutex);
          if (*value < last_seen) backwards = true;
          last_seen = *value;
        });
    Watch watch(control);
    // One producer at a time offers increasing values (the watcher is one
    // actor); others race Unsubscribe and active().
    std::atomic<int> next{0};
    std::mutex offer_mutex;
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 300; ++i) {
          std::lock_guard<std::mutex> lock(offer_mutex);
          control->Offer(std::make_shared<const Result<int>>(next++));
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100 * round));
    watch.Unsubscribe();
    unsubscribed = true;
    EXPECT_FALSE(watch.active());
    for (auto& thread : threads) thread.join();
    ASSERT_TRUE(WaitUntil([&] { return executor->idle(); }, kWait));
    EXPECT_FALSE(late) << "round " << round;
    EXPECT_FALSE(backwards) << "round " << round;
    // Latest value, no backlog: far fewer calls than offers.
    EXPECT_LE(calls.load(), 900);
  }
}

}  // namespace
}  // namespace spool
