#include "actors/ready_queue.h"

namespace spool::actors {

void ReadyQueue::Add(const QueueEntry& entry) {
  Remove(entry.id);
  entries_.emplace(entry.id, entry);
  if (entry.due_us == 0) {
    ready_.insert(entry);
  } else {
    timed_.emplace(entry.due_us, entry.sequence, entry.id);
  }
}

bool ReadyQueue::Remove(TaskId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const QueueEntry& entry = it->second;
  if (entry.due_us == 0) {
    ready_.erase(entry);
  } else {
    timed_.erase({entry.due_us, entry.sequence, entry.id});
  }
  entries_.erase(it);
  return true;
}

void ReadyQueue::PromoteDue(int64_t now_us) {
  while (!timed_.empty() && std::get<0>(*timed_.begin()) <= now_us) {
    auto it = entries_.find(std::get<2>(*timed_.begin()));
    timed_.erase(timed_.begin());
    it->second.due_us = 0;
    ready_.insert(it->second);
  }
}

std::optional<QueueEntry> ReadyQueue::PopNext() {
  if (ready_.empty()) return std::nullopt;
  QueueEntry entry = *ready_.begin();
  ready_.erase(ready_.begin());
  entries_.erase(entry.id);
  return entry;
}

std::optional<int64_t> ReadyQueue::NextDueTime() const {
  if (timed_.empty()) return std::nullopt;
  return std::get<0>(*timed_.begin());
}

}  // namespace spool::actors
