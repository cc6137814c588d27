// ReadyQueue: the scheduler's in-memory order of queued tasks.
//
// Ready tasks live in lanes, one per (type, group). The next task is the head
// of the best lane, by
//   1. priority, higher first;
//   2. then the group served least recently, so that one busy group cannot
//      starve the others (fair rotation; tasks without a group share one);
//   3. then enqueue sequence, so that with no groups the order is plain
//      priority-then-FIFO.
// A type or a group can be blocked (paused, at its concurrency limit, rate
// limited): its lanes are skipped without being walked.
//
// Timed tasks (a delay or a retry) wait by due time and join their lane when
// it comes, with their original priority and sequence: a due retry keeps its
// place.
//
// Every operation is O(log n) in the number of queued tasks, plus the number
// of types a group holds when it is served; none depends on history, since
// finished tasks are never here.
//
// Not thread safe: the scheduler actor owns it.

#ifndef SPOOL_ACTORS_READY_QUEUE_H_
#define SPOOL_ACTORS_READY_QUEUE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "actors/messages.h"

namespace spool::actors {

class ReadyQueue {
 public:
  ReadyQueue() = default;
  ReadyQueue(const ReadyQueue&) = delete;
  ReadyQueue& operator=(const ReadyQueue&) = delete;

  // Adds a task, or moves it if it is already here.
  void Add(const QueueEntry& entry);
  // Removes a task; returns false if it was not here.
  bool Remove(TaskId id);
  // Moves timed tasks due at or before `now_us` to their lanes.
  void PromoteDue(int64_t now_us);
  // Takes the next ready task of an unblocked type and group out of the
  // queue. Its due_us is the time it was stored with (0 for a task that was
  // ready from the start).
  std::optional<QueueEntry> PopNext();
  // The earliest due time of a timed task, if any.
  std::optional<int64_t> NextDueTime() const;

  // Blocks or unblocks every task of a type, or of a group.
  void SetTypeBlocked(const std::string& type, bool blocked);
  void SetGroupBlocked(const std::string& group, bool blocked);

  size_t size() const { return entries_.size(); }
  // Ready tasks, blocked or not.
  size_t ready_size() const { return ready_count_; }
  bool ready_empty() const { return ready_count_ == 0; }
  // The types that have ready tasks, blocked or not.
  std::vector<std::string> ReadyTypes() const;

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
  struct Lane;
  struct TypeState;
  struct GroupState;
  // How a lane ranks within its type: (-priority, group's last service,
  // sequence) of its head.
  using LaneKey = std::tuple<int64_t, uint64_t, uint64_t, Lane*>;
  // How a type ranks: the key of its best lane.
  using TypeKey = std::tuple<int64_t, uint64_t, uint64_t, TypeState*>;

  struct Lane {
    TypeState* type;
    GroupState* group;
    std::set<QueueEntry, ReadyOrder> tasks;
    std::optional<LaneKey> key;
  };
  struct TypeState {
    std::string name;
    bool blocked = false;
    std::set<LaneKey> lanes;
    std::optional<TypeKey> key;
    size_t lane_count = 0;
  };
  struct GroupState {
    std::string name;
    bool blocked = false;
    uint64_t last_served = 0;
    std::vector<Lane*> lanes;
  };

  // Entries keep the due time they were stored with, even once due: it says
  // which index family holds them on disk.
  struct Slot {
    QueueEntry entry;
    bool ready = false;
  };

  TypeState* TypeOf(const std::string& name);
  GroupState* GroupOf(const std::string& name);
  Lane* LaneOf(const QueueEntry& entry);
  void AddReady(const QueueEntry& entry);
  void RemoveReady(const QueueEntry& entry);
  void Unrank(Lane* lane);
  void Rank(Lane* lane);
  void RefreshType(TypeState* type);
  void DropLaneIfEmpty(Lane* lane);

  std::unordered_map<TaskId, Slot> entries_;
  std::set<std::tuple<int64_t, uint64_t, TaskId>> timed_;
  size_t ready_count_ = 0;

  std::unordered_map<std::string, std::unique_ptr<TypeState>> types_;
  std::unordered_map<std::string, std::unique_ptr<GroupState>> groups_;
  std::map<std::pair<TypeState*, GroupState*>, std::unique_ptr<Lane>> lanes_;
  std::set<TypeKey> types_by_head_;
  uint64_t service_clock_ = 0;
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_READY_QUEUE_H_
