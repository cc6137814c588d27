#include "actors/ready_queue.h"

namespace spool::actors {

void ReadyQueue::Add(const QueueEntry& entry) {
  Remove(entry.id);
  bool ready = entry.due_us == 0;
  entries_.emplace(entry.id, Slot{entry, ready});
  if (ready) {
    ready_.insert(entry);
  } else {
    timed_.emplace(entry.due_us, entry.sequence, entry.id);
  }
}

bool ReadyQueue::Remove(TaskId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const QueueEntry& entry = it->second.entry;
  if (it->second.ready) {
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
    it->second.ready = true;
    ready_.insert(it->second.entry);
  }
}

std::optional<QueueEntry> ReadyQueue::PopNext() {
  if (ready_.empty()) return std::nullopt;
  auto it = entries_.find(ready_.begin()->id);
  QueueEntry entry = std::move(it->second.entry);
  ready_.erase(ready_.begin());
  entries_.erase(it);
  return entry;
}

std::optional<int64_t> ReadyQueue::NextDueTime() const {
  if (timed_.empty()) return std::nullopt;
  return std::get<0>(*timed_.begin());
}

}  // namespace spool::actors
