// RateBuckets on its own: reservations, holds, the sweep that bounds its
// memory, and what it hands the writer to store.

#include "actors/rate_buckets.h"

#include <gtest/gtest.h>

#include "actors/handler_registry.h"

namespace spool::actors {
namespace {

using namespace std::chrono_literals;

class RateBucketsTest : public ::testing::Test {
 protected:
  // Admits attempt `id` whose payload is the bucket key.
  RateBuckets::Verdict Admit(TaskId id, const std::string& key) {
    ClaimedTask task;
    task.id = id;
    task.attempt = 1;
    task.type = "t";
    TaskContext context =
        TaskContextBuilder::For(task, key, "", "", nullptr, {});
    return buckets_.Admit(id, "t", context);
  }
  int64_t Now() const { return clock_->Now().time_since_epoch().count(); }
  // Adds limit "l" on type "t", one bucket per payload.
  Status AddKeyedByPayload(RateLimit rate) {
    return buckets_.Add({"l", rate, {"t"}, [](const TaskContext& a) {
                           return std::string(a.payload());
                         }});
  }

  std::shared_ptr<ManualClock> clock_ =
      std::make_shared<ManualClock>(Timestamp(std::chrono::hours(1)));
  RateBuckets buckets_{clock_, nullptr};
};

TEST_F(RateBucketsTest, AWaitingAttemptKeepsItsSlotAndIsNotCountedTwice) {
  ASSERT_TRUE(AddKeyedByPayload(RateLimit{1, 10s}).ok());
  int64_t t0 = Now();
  EXPECT_EQ(Admit(1, "k").wait_until_us, 0);
  EXPECT_EQ(Admit(2, "k").wait_until_us, t0 + 10'000'000);
  EXPECT_EQ(Admit(3, "k").wait_until_us, t0 + 20'000'000);
  // Back early, task 2 keeps its slot rather than taking a later one.
  EXPECT_EQ(Admit(2, "k").wait_until_us, t0 + 10'000'000);
  EXPECT_EQ(buckets_.reservation_count(), 2u);
  clock_->Advance(10s);
  RateBuckets::Verdict at_slot = Admit(2, "k");
  EXPECT_EQ(at_slot.wait_until_us, 0);
  EXPECT_EQ(at_slot.buckets.size(), 1u);
  EXPECT_EQ(buckets_.reservation_count(), 1u);
  // A new attempt queues behind task 3's reservation.
  EXPECT_EQ(Admit(4, "k").wait_until_us, t0 + 30'000'000);
  // Another key is a bucket of its own.
  EXPECT_EQ(Admit(5, "other").wait_until_us, 0);
}

TEST_F(RateBucketsTest, AHoldVoidsTheReservationsItCovers) {
  ASSERT_TRUE(buckets_.Add({"l", RateLimit{1, 1s}, {"t"}, nullptr}).ok());
  int64_t t0 = Now();
  RateBuckets::Verdict first = Admit(1, "");
  ASSERT_EQ(first.wait_until_us, 0);
  EXPECT_EQ(Admit(2, "").wait_until_us, t0 + 1'000'000);
  buckets_.Hold(first.buckets, 30s);
  clock_->Advance(1s);
  // Task 2's slot fell inside the hold: it waits for the hold's end.
  EXPECT_EQ(Admit(2, "").wait_until_us, t0 + 30'000'000);
}

TEST_F(RateBucketsTest, PassedBucketsAreSweptAndTheirStoredStateDeleted) {
  ASSERT_TRUE(AddKeyedByPayload(RateLimit{1, 1s}).ok());
  for (TaskId id = 1; id <= 2000; ++id) {
    ASSERT_EQ(Admit(id, "key" + std::to_string(id)).wait_until_us, 0);
  }
  std::vector<std::pair<std::string, std::string>> changes;
  buckets_.TakeChanges(&changes);
  EXPECT_EQ(changes.size(), 2000u);
  for (const auto& [key, value] : changes) EXPECT_EQ(value.size(), 8u);
  EXPECT_GE(buckets_.bucket_count(), 1024u);

  // Past every bucket's time, the next admission sweeps them: a key
  // function with many keys holds memory only for buckets in use.
  clock_->Advance(2s);
  for (TaskId id = 2001; id <= 2100; ++id) {
    ASSERT_EQ(Admit(id, "new" + std::to_string(id)).wait_until_us, 0);
  }
  EXPECT_LE(buckets_.bucket_count(), 100u);
  changes.clear();
  buckets_.TakeChanges(&changes);
  size_t deleted = 0;
  for (const auto& [key, value] : changes) deleted += value.empty() ? 1 : 0;
  EXPECT_GE(deleted, 1024u) << "swept buckets are deleted from storage too";
}

TEST_F(RateBucketsTest, RestoredStateWaitsForItsLimitAndThenApplies) {
  int64_t t0 = Now();
  buckets_.Restore("l", "k", t0 + 5'000'000);
  buckets_.Restore("gone", "k", t0 + 5'000'000);
  ASSERT_TRUE(AddKeyedByPayload(RateLimit{1, 1s}).ok());
  EXPECT_EQ(Admit(1, "k").wait_until_us, t0 + 5'000'000);
  EXPECT_EQ(Admit(2, "j").wait_until_us, 0);
}

}  // namespace
}  // namespace spool::actors
