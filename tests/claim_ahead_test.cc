// Tasks claimed ahead of the workers (actors/claimed_pool.h): stored as
// running before a worker is free, and started by the next worker that
// finishes. These tests hold the only worker in a handler so that the next
// task waits, claimed, in the pool, and check that everything that may
// happen to it before it starts leaves no trace of an attempt.

#include <atomic>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>

#include <spool/runtime.h>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool::testing {
namespace {

using namespace std::chrono_literals;

// One worker, held by a task with payload "hold" until `release` opens;
// every task records its payload when it starts.
class ClaimAheadTest : public ::testing::Test {
 protected:
  explicit ClaimAheadTest(Durability durability = Durability::kMemory)
      : h_(1, durability) {}

  void RegisterHandler(HandlerOptions options = {}) {
    ASSERT_TRUE(h_.runtime()
                    .RegisterHandler(
                        "t",
                        [this](TaskContext& task) {
                          h_.journal.Record(task.id(),
                                            std::string(task.payload()));
                          if (task.payload() == "hold") release_.Wait();
                          return Status::OK();
                        },
                        options)
                    .ok());
  }

  // Starts the holding task, then stores `next` and waits until it is
  // claimed ahead: running on disk, not started.
  TaskId HoldWorkerAndClaimNext(EnqueueOptions next_options = {}) {
    holder_ = h_.Put("t", "hold");
    EXPECT_TRUE(h_.runtime().Start().ok());
    EXPECT_TRUE(h_.journal.WaitForSize(1));
    TaskId next = h_.Put("t", "next", std::move(next_options));
    EXPECT_TRUE(h_.WaitForStatus(next, TaskStatus::kRunning))
        << "the next task was not claimed ahead";
    EXPECT_EQ(h_.journal.size(), 1u);
    return next;
  }

  bool Ran(const std::string& payload) {
    auto labels = h_.journal.Labels();
    return std::find(labels.begin(), labels.end(), payload) != labels.end();
  }

  Harness h_;
  Gate release_;
  TaskId holder_ = 0;
};

TEST_F(ClaimAheadTest, ACancelledClaimEndsCancelledWithoutRunning) {
  RegisterHandler();
  TaskId next = HoldWorkerAndClaimNext();
  auto status = Await(h_.runtime().Cancel(next));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, TaskStatus::kCancelled)
      << "a claim that never started is not running";
  release_.Open();
  h_.Drain();
  EXPECT_FALSE(Ran("next"));
  TaskInfo info = h_.Info(next);
  EXPECT_EQ(info.status, TaskStatus::kCancelled);
  EXPECT_EQ(info.attempts, 0u);
  EXPECT_TRUE(info.failures.empty());
}

TEST_F(ClaimAheadTest, AHeldClaimIsHeldAndRunsAfterRelease) {
  RegisterHandler();
  TaskId next = HoldWorkerAndClaimNext();
  ASSERT_TRUE(Await(h_.runtime().Hold(next)).ok());
  EXPECT_EQ(h_.StatusOf(next), TaskStatus::kHeld);
  release_.Open();
  h_.Drain();
  EXPECT_FALSE(Ran("next"));
  ASSERT_TRUE(Await(h_.runtime().Release(next)).ok());
  h_.Drain();
  TaskInfo info = h_.Info(next);
  EXPECT_EQ(info.status, TaskStatus::kSucceeded);
  EXPECT_EQ(info.attempts, 1u);
}

TEST_F(ClaimAheadTest, PauseGivesClaimsBackAndResumeRunsThem) {
  RegisterHandler();
  TaskId next = HoldWorkerAndClaimNext();
  ASSERT_TRUE(h_.runtime().Pause().ok());
  ASSERT_TRUE(h_.WaitForStatus(next, TaskStatus::kPending));
  EXPECT_EQ(h_.Info(next).attempts, 0u);
  release_.Open();
  h_.Drain();  // a paused queue is drained once nothing runs
  EXPECT_FALSE(Ran("next")) << "a task started while the queue was paused";
  ASSERT_TRUE(h_.runtime().Resume().ok());
  h_.Drain();
  EXPECT_EQ(h_.StatusOf(next), TaskStatus::kSucceeded);
  EXPECT_EQ(h_.Info(next).attempts, 1u);
}

TEST_F(ClaimAheadTest, AClaimWaitingInThePoolDoesNotTimeOut) {
  HandlerOptions options;
  options.timeout = 1s;
  RegisterHandler(options);
  EnqueueOptions quick;
  quick.timeout = 1s;
  TaskId next = HoldWorkerAndClaimNext(quick);
  // The holder times out (it runs); the claim behind it has not started.
  h_.clock().Advance(5s);
  ASSERT_TRUE(h_.WaitForStatus(holder_, TaskStatus::kRetryScheduled));
  EXPECT_EQ(h_.StatusOf(next), TaskStatus::kRunning);
  release_.Open();
  h_.Drain();
  TaskInfo info = h_.Info(next);
  EXPECT_EQ(info.status, TaskStatus::kSucceeded);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_TRUE(info.failures.empty());
}

class ClaimAheadOnDiskTest : public ClaimAheadTest {
 protected:
  ClaimAheadOnDiskTest() : ClaimAheadTest(Durability::kSync) {}
};

TEST_F(ClaimAheadOnDiskTest, CloseGivesClaimsBackUnstarted) {
  RegisterHandler();
  TaskId next = HoldWorkerAndClaimNext();
  std::thread opener([this] {
    // Close stops dispatch and recalls the pool first, then waits for the
    // running handler.
    std::this_thread::sleep_for(100ms);
    release_.Open();
  });
  h_.Close();
  opener.join();
  h_.Reopen();
  TaskInfo info = h_.Info(next);
  EXPECT_EQ(info.status, TaskStatus::kPending);
  EXPECT_EQ(info.attempts, 0u);
  EXPECT_FALSE(Ran("next"));
}

// Many tasks, four workers, and controls thrown at them while they run:
// every task ends once, a handler never runs a task twice, and a task that
// never ran spent no attempt.
TEST(ClaimAheadStressTest, ControlsDuringADrainLeaveEveryTaskConsistent) {
  const char* extended = std::getenv("SPOOL_TEST_EXTENDED");
  const int kTasks = extended != nullptr && extended[0] == '1' ? 20000 : 3000;
  Harness h(4);
  std::mutex mutex;
  std::map<TaskId, int> runs;
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [&](TaskContext& task) {
                                     std::lock_guard<std::mutex> lock(mutex);
                                     ++runs[task.id()];
                                     return Status::OK();
                                   })
                  .ok());
  std::vector<TaskSpec> specs(kTasks);
  for (auto& spec : specs) spec.type = "t";
  auto ids = Await(h.runtime().EnqueueBatch(std::move(specs)).stored);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(h.runtime().Start().ok());

  std::mt19937_64 rng(20261201);
  std::set<TaskId> held;
  for (int i = 0; i < 400; ++i) {
    TaskId id = (*ids)[rng() % ids->size()];
    switch (rng() % 5) {
      case 0:
        ASSERT_TRUE(Await(h.runtime().Cancel(id)).ok());
        break;
      case 1:
        if (Await(h.runtime().Hold(id)).ok()) held.insert(id);
        break;
      case 2:
        ASSERT_TRUE(h.runtime().Pause().ok());
        break;
      case 3:
        ASSERT_TRUE(h.runtime().Resume().ok());
        break;
      default:
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
    }
  }
  ASSERT_TRUE(h.runtime().Resume().ok());
  for (TaskId id : held) {
    // A later cancel may have ended it.
    if (h.StatusOf(id) == TaskStatus::kHeld) {
      ASSERT_TRUE(Await(h.runtime().Release(id)).ok());
    }
  }
  h.Drain();

  std::lock_guard<std::mutex> lock(mutex);
  for (TaskId id : *ids) {
    TaskInfo info = h.Info(id);
    int ran = runs.count(id) != 0 ? runs.at(id) : 0;
    EXPECT_LE(ran, 1) << "task " << id << " ran twice";
    if (info.status == TaskStatus::kSucceeded) {
      EXPECT_EQ(ran, 1) << id;
      EXPECT_EQ(info.attempts, 1u) << id;
    } else {
      ASSERT_EQ(info.status, TaskStatus::kCancelled)
          << "task " << id << " is " << TaskStatusName(info.status);
      if (ran == 0) {
        EXPECT_EQ(info.attempts, 0u) << id;
      }
    }
  }
  auto counts = Await(h.runtime().CountByStatus());
  EXPECT_EQ(
      counts->of(TaskStatus::kSucceeded) + counts->of(TaskStatus::kCancelled),
      static_cast<uint64_t>(kTasks));
}

}  // namespace
}  // namespace spool::testing
