#include "actors/ready_queue.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace spool::actors {
namespace {

QueueEntry Entry(TaskId id, int32_t priority, uint64_t sequence, int64_t due) {
  QueueEntry entry;
  entry.id = id;
  entry.priority = priority;
  entry.sequence = sequence;
  entry.due_us = due;
  return entry;
}

TEST(ReadyQueueTest, PriorityThenSequence) {
  ReadyQueue q;
  q.Add(Entry(1, 0, 10, 0));
  q.Add(Entry(2, 5, 11, 0));
  q.Add(Entry(3, 0, 9, 0));
  q.Add(Entry(4, -1, 1, 0));
  std::vector<TaskId> order;
  while (auto next = q.PopNext()) order.push_back(next->id);
  EXPECT_EQ(order, (std::vector<TaskId>{2, 3, 1, 4}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(ReadyQueueTest, TimedTasksWaitThenKeepTheirPlace) {
  ReadyQueue q;
  q.Add(Entry(1, 0, 5, 1000));  // a retry from long ago, due at 1000
  q.Add(Entry(2, 0, 7, 0));
  EXPECT_EQ(q.ready_size(), 1u);
  EXPECT_EQ(q.NextDueTime(), std::optional<int64_t>(1000));
  q.PromoteDue(999);
  EXPECT_EQ(q.ready_size(), 1u);
  q.PromoteDue(1000);
  EXPECT_EQ(q.ready_size(), 2u);
  // The older sequence runs first even though it became ready later, and it
  // keeps the due time it was stored with.
  auto first = q.PopNext();
  EXPECT_EQ(first->id, 1u);
  EXPECT_EQ(first->due_us, 1000);
  EXPECT_EQ(q.PopNext()->id, 2u);
  EXPECT_FALSE(q.NextDueTime().has_value());
}

TEST(ReadyQueueTest, RemoveAndMove) {
  ReadyQueue q;
  q.Add(Entry(1, 0, 1, 0));
  q.Add(Entry(2, 0, 2, 500));
  EXPECT_TRUE(q.Remove(2));
  EXPECT_FALSE(q.Remove(2));
  EXPECT_FALSE(q.NextDueTime().has_value());
  q.Add(Entry(1, 0, 1, 800));  // moved from ready to timed
  EXPECT_TRUE(q.ready_empty());
  EXPECT_EQ(q.size(), 1u);
  q.PromoteDue(800);
  EXPECT_EQ(q.PopNext()->id, 1u);
}

TEST(ReadyQueueTest, MatchesASortedReferenceUnderRandomOperations) {
  std::mt19937_64 rng(42);
  ReadyQueue q;
  std::map<TaskId, QueueEntry> model;
  int64_t now = 0;
  for (int step = 0; step < 20000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      TaskId id = rng() % 500 + 1;
      QueueEntry e =
          Entry(id, static_cast<int32_t>(rng() % 5) - 2, rng() % 100000,
                rng() % 3 == 0 ? now + static_cast<int64_t>(rng() % 1000) : 0);
      q.Add(e);
      model[id] = e;
    } else if (op < 7) {
      TaskId id = rng() % 500 + 1;
      EXPECT_EQ(q.Remove(id), model.erase(id) == 1);
    } else if (op < 8) {
      now += static_cast<int64_t>(rng() % 300);
      q.PromoteDue(now);
      for (auto& [id, e] : model) {
        if (e.due_us != 0 && e.due_us <= now) e.due_us = 0;
      }
    } else {
      const QueueEntry* best = nullptr;
      for (const auto& [id, e] : model) {
        if (e.due_us != 0) continue;
        if (!best || e.priority > best->priority ||
            (e.priority == best->priority && e.sequence < best->sequence)) {
          best = &e;
        }
      }
      auto next = q.PopNext();
      ASSERT_EQ(next.has_value(), best != nullptr) << "step " << step;
      if (best) {
        // Sequences may repeat in this random model; compare the order key.
        EXPECT_EQ(next->priority, best->priority) << "step " << step;
        EXPECT_EQ(next->sequence, best->sequence) << "step " << step;
        model.erase(next->id);
      }
    }
    ASSERT_EQ(q.size(), model.size()) << "step " << step;
  }
}

}  // namespace
}  // namespace spool::actors
