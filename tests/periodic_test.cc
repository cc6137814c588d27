// Periodic tasks: each slot is enqueued exactly once, even across restarts.

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace spool {
namespace {

using namespace std::chrono_literals;
using testing::Await;
using testing::Harness;

PeriodicTask EveryMinute(bool catch_up = true) {
  PeriodicTask p;
  p.name = "report";
  p.schedule = "every 1m";
  p.task = TaskSpec{"report", "tick", {}};
  p.catch_up = catch_up;
  return p;
}

uint64_t Total(Harness& h) {
  return Await(h.runtime().CountByStatus())->total();
}

TEST(PeriodicTest, EachSlotIsEnqueuedOnceEvenAcrossRestarts) {
  Harness h(1, Durability::kSync);
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().AddPeriodic(EveryMinute()).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(h.journal.size(), 0u) << "the first slot is a minute away";
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(1));
  h.Drain();
  EXPECT_EQ(Total(h), 1u);

  // A restart within the same minute does not enqueue that slot again.
  h.Reopen();
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().AddPeriodic(EveryMinute()).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(Total(h), 1u);
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(2));
  h.Drain();
  EXPECT_EQ(Total(h), 2u);
}

TEST(PeriodicTest, AfterDowntimeOnlyTheLatestMissedSlotRuns) {
  Harness h(1, Durability::kSync);
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().AddPeriodic(EveryMinute()).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(1));
  h.Close();
  h.clock().Advance(10min);  // ten slots pass while the runtime is down
  h.Reopen();
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().AddPeriodic(EveryMinute()).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  ASSERT_TRUE(h.journal.WaitForSize(2));
  h.Drain();
  EXPECT_EQ(Total(h), 2u);
}

TEST(PeriodicTest, WithoutCatchUpMissedSlotsAreSkipped) {
  Harness h(1, Durability::kSync);
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().AddPeriodic(EveryMinute(false)).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(1));
  h.Close();
  h.clock().Advance(10min);
  h.Reopen();
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().AddPeriodic(EveryMinute(false)).ok());
  ASSERT_TRUE(h.runtime().Start().ok());
  h.Drain();
  EXPECT_EQ(Total(h), 1u);
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(2));
}

TEST(PeriodicTest, CronSchedulesAndBadDefinitionsAreRefused) {
  Harness h(1);
  h.RegisterRecorder("report");
  PeriodicTask cron = EveryMinute();
  cron.name = "five";
  cron.schedule = "*/5 * * * *";
  ASSERT_TRUE(h.runtime().AddPeriodic(cron).ok());
  EXPECT_TRUE(h.runtime().AddPeriodic(cron).IsFailedPrecondition());
  PeriodicTask bad = EveryMinute();
  bad.name = "bad";
  bad.schedule = "61 * * * *";
  EXPECT_TRUE(h.runtime().AddPeriodic(bad).IsInvalidArgument());
  bad.schedule = "0 0 30 2 *";
  EXPECT_TRUE(h.runtime().AddPeriodic(bad).IsInvalidArgument());
  bad.schedule = "every 1m";
  bad.task.type = "unknown";
  EXPECT_TRUE(h.runtime().AddPeriodic(bad).IsNotFound());
  ASSERT_TRUE(h.runtime().Start().ok());
  EXPECT_TRUE(h.runtime().AddPeriodic(EveryMinute()).IsFailedPrecondition());
  h.clock().Advance(4min);
  h.Drain();
  EXPECT_EQ(h.journal.size(), 0u);
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(1));
}

}  // namespace
}  // namespace spool

namespace spool {
namespace {

TEST(PeriodicTest, TasksFromTheConfigRunLikeOnesAddedInCode) {
  Harness h(1, Durability::kSync);
  h.options().periodic.push_back(EveryMinute());
  h.Reopen();
  h.RegisterRecorder("report");
  ASSERT_TRUE(h.runtime().Start().ok());
  h.clock().Advance(1min);
  ASSERT_TRUE(h.journal.WaitForSize(1));
}

}  // namespace
}  // namespace spool
