// ReadyQueue: the scheduler's in-memory order of queued tasks.
//
// Ready tasks are ordered by priority (higher first), then enqueue sequence.
// Timed tasks (a delay or a retry) wait by due time and join the ready order
// when their time comes, with their original priority and sequence: a due
// retry keeps its place. Every operation is O(log n) in the number of queued
// tasks and independent of history: finished tasks are never here.
//
// Not thread safe: the scheduler actor owns it.

#ifndef SPOOL_ACTORS_READY_QUEUE_H_
#define SPOOL_ACTORS_READY_QUEUE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "actors/messages.h"

namespace spool::actors {

class ReadyQueue {
 public:
  // Adds a task, or moves it if it is already here.
  void Add(const QueueEntry& entry);
  // Removes a task; returns false if it was not here.
  bool Remove(TaskId id);
  // Moves timed tasks due at or before `now_us` to the ready order.
  void PromoteDue(int64_t now_us);
  // Takes the first ready task out of the queue. Its due_us is the time it
  // was stored with (0 for a task that was ready from the start).
  std::optional<QueueEntry> PopNext();
  // The earliest due time of a timed task, if any.
  std::optional<int64_t> NextDueTime() const;

  bool contains(TaskId id) const { return entries_.count(id) != 0; }
  size_t size() const { return entries_.size(); }
  size_t ready_size() const { return ready_.size(); }
  bool ready_empty() const { return ready_.empty(); }

 private:
  struct ReadyOrder {
    bool operator()(const QueueEntry& a, const QueueEntry& b) const {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.sequence != b.sequence) return a.sequence < b.sequence;
      // Sequences are unique; the id only keeps the order strict if a
      // damaged store ever repeats one.
      return a.id < b.id;
    }
  };

  // Entries keep the due time they were stored with, even once due: it says
  // which index family holds them on disk.
  struct Slot {
    QueueEntry entry;
    bool ready = false;
  };
  std::unordered_map<TaskId, Slot> entries_;
  std::set<QueueEntry, ReadyOrder> ready_;
  std::set<std::tuple<int64_t, uint64_t, TaskId>> timed_;
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_READY_QUEUE_H_
