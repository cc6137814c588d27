// An injected id source and jitter source (issue 14, item 7).

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Harness;

// Fails every attempt, so that each schedules a retry.
void RegisterFailing(Harness& h, std::atomic<int>* runs) {
  ASSERT_TRUE(h.runtime()
                  .RegisterHandler("t",
                                   [runs](TaskContext&) {
                                     ++*runs;
                                     return Status::Aborted("try again");
                                   })
                  .ok());
}

// The delay from the failed attempt to the retry, as stored.
Duration RetryDelay(Harness& h, TaskId id) {
  TaskInfo info = h.Info(id);
  EXPECT_EQ(info.status, TaskStatus::kRetryScheduled);
  if (!info.next_attempt_at) return Duration(-1);
  return *info.next_attempt_at - info.updated_at;
}

TEST(JitterSourceTest, AnInjectedFractionMakesJitteredDelaysExact) {
  Harness h(1);
  h.options().random_fraction = [] { return 0.25; };
  h.Reopen();  // an empty in-memory store, opened with the source
  std::atomic<int> runs{0};
  RegisterFailing(h, &runs);
  EnqueueOptions jittered;
  jittered.retry = RetryPolicy::Exponential(4, 1s, 1h, /*jitter=*/0.2);
  TaskId id = h.Put("t", "x", jittered);
  ASSERT_TRUE(h.runtime().Start().ok());

  // 1 s * (1 - 0.2 + 2 * 0.2 * 0.25) = 900 ms, then 2 s * 0.9 = 1.8 s.
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 1; }));
  h.Drain();
  EXPECT_EQ(RetryDelay(h, id), 900ms);
  EXPECT_EQ(RetryDelay(h, id), jittered.retry->DelayAfter(1, 0.25));
  h.clock().Advance(900ms);
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 2; }));
  h.Drain();
  EXPECT_EQ(RetryDelay(h, id), 1800ms);
}

TEST(JitterSourceTest, FractionsOutOfRangeAreClamped) {
  Harness h(1);
  auto value = std::make_shared<std::atomic<double>>(
      std::numeric_limits<double>::quiet_NaN());
  h.options().random_fraction = [value] { return value->load(); };
  h.Reopen();
  std::atomic<int> runs{0};
  RegisterFailing(h, &runs);
  EnqueueOptions jittered;
  jittered.retry = RetryPolicy::Exponential(5, 1s, 1h, /*jitter=*/0.5);
  TaskId nan = h.Put("t", "nan", jittered);
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 1; }));
  h.Drain();
  // NaN counts as 0.5: the policy's plain delay.
  EXPECT_EQ(RetryDelay(h, nan), 1s);

  value->store(-3.0);  // clamped to 0: the low end, 1 s * 0.5
  h.clock().Advance(1s);
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 2; }));
  h.Drain();
  EXPECT_EQ(RetryDelay(h, nan), 1s);  // 2 s * 0.5

  value->store(7.0);  // clamped just below 1: just under 1.5 times
  h.clock().Advance(1s);
  ASSERT_TRUE(testing::WaitUntil([&] { return runs.load() == 3; }));
  h.Drain();
  Duration delay = RetryDelay(h, nan);
  // 4 s * (1.5 - 2^-53): the top of the range (doubles round it to 6 s).
  EXPECT_LE(delay, 6s);
  EXPECT_GT(delay, 5999ms);
}

TEST(IdSourceTest, InjectedIdsAreUsedAndBadOnesRefusedBeforeStoring) {
  Harness h(1, Durability::kSync);
  auto next = std::make_shared<std::atomic<TaskId>>(1000);
  h.options().id_source = [next] { return next->fetch_add(10); };
  h.Reopen();
  h.RegisterRecorder("t");

  Ticket first = h.runtime().Enqueue("t", "a");
  EXPECT_EQ(first.id, 1000u);
  ASSERT_EQ(*Await(first.stored), 1000u);
  EXPECT_EQ(h.Put("t", "b"), 1010u);
  EXPECT_EQ(h.Info(1010).payload, "b");

  // Going back, repeating, 0 and 2^63: refused, naming the source and the
  // id, and nothing is stored.
  for (TaskId bad : {TaskId{5}, TaskId{1010}, TaskId{0}, TaskId{1} << 63}) {
    next->store(bad);
    Ticket refused = h.runtime().Enqueue("t", "bad");
    EXPECT_EQ(refused.id, 0u);
    auto stored = Await(refused.stored);
    ASSERT_TRUE(stored.status().IsInvalidArgument()) << bad;
    EXPECT_NE(stored.status().message().find("Options::id_source"),
              std::string::npos)
        << stored.status().ToString();
    EXPECT_NE(stored.status().message().find(std::to_string(bad)),
              std::string::npos)
        << stored.status().ToString();
  }
  next->store(1020);
  auto counts = Await(h.runtime().CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 2u);

  // The next good id is judged against the last one accepted.
  EXPECT_EQ(h.Put("t", "c"), 1020u);

  // After a restart, the source must stay above the highest stored id.
  next->store(1025);
  h.options().id_source = [next] {
    return next->fetch_add(1) == 1025 ? TaskId{1015} : next->load() + 100;
  };
  h.Reopen();
  h.RegisterRecorder("t");
  auto below = Await(h.runtime().Enqueue("t", "below").stored);
  EXPECT_TRUE(below.status().IsInvalidArgument());
  EXPECT_NE(below.status().message().find("1020"), std::string::npos)
      << below.status().ToString();
  std::vector<TaskSpec> batch(3, TaskSpec{"t", "batch", {}});
  BatchTicket accepted = h.runtime().EnqueueBatch(batch);
  ASSERT_EQ(accepted.ids.size(), 3u);
  EXPECT_GT(accepted.ids[0], 1020u);
  EXPECT_LT(accepted.ids[0], accepted.ids[1]);
  EXPECT_LT(accepted.ids[1], accepted.ids[2]);
  ASSERT_TRUE(Await(accepted.stored).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  counts = Await(h.runtime().CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->of(TaskStatus::kSucceeded), 6u);
  EXPECT_EQ(counts->total(), 6u);
}

TEST(IdSourceTest, ABatchWithARefusedIdStoresNothing) {
  Harness h(1);
  auto ids = std::make_shared<std::vector<TaskId>>(
      std::vector<TaskId>{10, 20, 15, 30});
  auto at = std::make_shared<size_t>(0);
  h.options().id_source = [ids, at] { return (*ids)[(*at)++ % ids->size()]; };
  h.Reopen();
  h.RegisterRecorder("t");
  std::vector<TaskSpec> batch(3, TaskSpec{"t", "batch", {}});
  BatchTicket refused = h.runtime().EnqueueBatch(batch);
  auto stored = Await(refused.stored);
  EXPECT_TRUE(stored.status().IsInvalidArgument())
      << stored.status().ToString();
  EXPECT_NE(stored.status().message().find("task 2 of the batch"),
            std::string::npos)
      << stored.status().ToString();
  auto counts = Await(h.runtime().CountByStatus());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->total(), 0u);
  // 30 is above 20, the last accepted, although the batch was refused.
  EXPECT_EQ(h.Put("t", "single"), 30u);
}

}  // namespace
}  // namespace spool
