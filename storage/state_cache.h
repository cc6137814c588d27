// StateCache: the states the writer committed last, of tasks it is likely
// to change again soon, so that a claim or an outcome reads nothing from
// RocksDB (a point lookup costs about as much as the whole transition).
//
// Running tasks are always kept: their outcome comes soon, and there are no
// more of them than attempts in flight. Queued tasks are kept up to
// `capacity`; past it, new ones are not added. Tasks are claimed oldest
// first within a priority, so the ones kept are the ones claimed next. A
// finished task leaves.
//
// Not thread safe: the writer owns it.

#ifndef SPOOL_STORAGE_STATE_CACHE_H_
#define SPOOL_STORAGE_STATE_CACHE_H_

#include <cstddef>
#include <unordered_map>

#include "storage/record.h"

namespace spool::storage {

class StateCache {
 public:
  explicit StateCache(size_t capacity) : capacity_(capacity) {}

  // The cached state of `id`, or null.
  const StateRecord* Find(TaskId id) const {
    auto it = states_.find(id);
    return it == states_.end() ? nullptr : &it->second;
  }

  // Records the committed state of a task.
  void Committed(const StateRecord& state) {
    bool running = state.status == TaskStatus::kRunning;
    bool queued = state.status == TaskStatus::kPending ||
                  state.status == TaskStatus::kRetryScheduled;
    if (!running && !queued) {
      states_.erase(state.id);
      return;
    }
    auto it = states_.find(state.id);
    if (it != states_.end()) {
      it->second = state;
      it->second.new_failures.clear();
    } else if (running || states_.size() < capacity_) {
      StateRecord& kept = states_.emplace(state.id, state).first->second;
      kept.new_failures.clear();
    }
  }

  void Erase(TaskId id) { states_.erase(id); }
  void Clear() { states_.clear(); }
  size_t size() const { return states_.size(); }

 private:
  const size_t capacity_;
  std::unordered_map<TaskId, StateRecord> states_;
};

}  // namespace spool::storage

#endif  // SPOOL_STORAGE_STATE_CACHE_H_
