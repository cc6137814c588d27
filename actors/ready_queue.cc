#include "actors/ready_queue.h"

#include <algorithm>

namespace spool::actors {

ReadyQueue::TypeState* ReadyQueue::TypeOf(const std::string& name) {
  auto& state = types_[name];
  if (!state) {
    state = std::make_unique<TypeState>();
    state->name = name;
  }
  return state.get();
}

ReadyQueue::GroupState* ReadyQueue::GroupOf(const std::string& name) {
  auto& state = groups_[name];
  if (!state) {
    state = std::make_unique<GroupState>();
    state->name = name;
  }
  return state.get();
}

ReadyQueue::Lane* ReadyQueue::LaneOf(const QueueEntry& entry) {
  TypeState* type = TypeOf(entry.type);
  GroupState* group = GroupOf(entry.group);
  auto& lane = lanes_[{type, group}];
  if (!lane) {
    lane = std::make_unique<Lane>();
    lane->type = type;
    lane->group = group;
    group->lanes.push_back(lane.get());
    ++type->lane_count;
  }
  return lane.get();
}

void ReadyQueue::Unrank(Lane* lane) {
  if (!lane->key) return;
  lane->type->lanes.erase(*lane->key);
  lane->key.reset();
  RefreshType(lane->type);
}

void ReadyQueue::Rank(Lane* lane) {
  if (lane->group->blocked || lane->tasks.empty()) return;
  const QueueEntry& head = *lane->tasks.begin();
  lane->key = LaneKey{-static_cast<int64_t>(head.priority),
                      lane->group->last_served, head.sequence, lane};
  lane->type->lanes.insert(*lane->key);
  RefreshType(lane->type);
}

void ReadyQueue::RefreshType(TypeState* type) {
  if (type->key) {
    types_by_head_.erase(*type->key);
    type->key.reset();
  }
  if (type->blocked || type->lanes.empty()) return;
  const LaneKey& best = *type->lanes.begin();
  type->key =
      TypeKey{std::get<0>(best), std::get<1>(best), std::get<2>(best), type};
  types_by_head_.insert(*type->key);
}

void ReadyQueue::DropLaneIfEmpty(Lane* lane) {
  if (!lane->tasks.empty()) return;
  TypeState* type = lane->type;
  GroupState* group = lane->group;
  Unrank(lane);
  group->lanes.erase(std::find(group->lanes.begin(), group->lanes.end(), lane));
  --type->lane_count;
  lanes_.erase({type, group});
  // Forget names nothing refers to, so that a stream of one-off groups does
  // not grow memory; a blocked one is remembered for the tasks to come.
  if (group->lanes.empty() && !group->blocked) groups_.erase(group->name);
  if (type->lane_count == 0 && !type->blocked) types_.erase(type->name);
}

void ReadyQueue::AddReady(const QueueEntry& entry) {
  Lane* lane = LaneOf(entry);
  Unrank(lane);
  lane->tasks.insert(entry);
  Rank(lane);
  ++ready_count_;
}

void ReadyQueue::RemoveReady(const QueueEntry& entry) {
  auto type = types_.find(entry.type);
  auto group = groups_.find(entry.group);
  if (type == types_.end() || group == groups_.end()) return;
  auto found = lanes_.find({type->second.get(), group->second.get()});
  if (found == lanes_.end()) return;
  Lane* lane = found->second.get();
  Unrank(lane);
  if (lane->tasks.erase(entry) != 0) --ready_count_;
  Rank(lane);
  DropLaneIfEmpty(lane);
}

void ReadyQueue::Add(const QueueEntry& entry) {
  Remove(entry.id);
  bool ready = entry.due_us == 0;
  entries_.emplace(entry.id, Slot{entry, ready});
  if (ready) {
    AddReady(entry);
  } else {
    timed_.emplace(entry.due_us, entry.sequence, entry.id);
  }
}

bool ReadyQueue::Remove(TaskId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const QueueEntry& entry = it->second.entry;
  if (it->second.ready) {
    RemoveReady(entry);
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
    AddReady(it->second.entry);
  }
}

std::optional<QueueEntry> ReadyQueue::PopNext() {
  if (types_by_head_.empty()) return std::nullopt;
  TypeState* type = std::get<3>(*types_by_head_.begin());
  Lane* lane = std::get<3>(*type->lanes.begin());
  GroupState* group = lane->group;
  auto it = entries_.find(lane->tasks.begin()->id);
  QueueEntry entry = std::move(it->second.entry);
  entries_.erase(it);
  Unrank(lane);
  lane->tasks.erase(lane->tasks.begin());
  --ready_count_;
  // The group goes to the back of its priority's rotation: re-rank every
  // lane it has (one per task type it holds).
  group->last_served = ++service_clock_;
  for (Lane* member : group->lanes) {
    if (member == lane) continue;
    Unrank(member);
    Rank(member);
  }
  Rank(lane);
  DropLaneIfEmpty(lane);
  return entry;
}

std::vector<std::string> ReadyQueue::ReadyTypes() const {
  std::vector<std::string> types;
  for (const auto& [name, type] : types_) {
    if (type->lane_count != 0) types.push_back(name);
  }
  return types;
}

std::optional<int64_t> ReadyQueue::NextDueTime() const {
  if (timed_.empty()) return std::nullopt;
  return std::get<0>(*timed_.begin());
}

void ReadyQueue::SetTypeBlocked(const std::string& name, bool blocked) {
  auto it = types_.find(name);
  if (it == types_.end()) {
    if (!blocked) return;
    it = types_.emplace(name, std::make_unique<TypeState>()).first;
    it->second->name = name;
  }
  TypeState* type = it->second.get();
  if (type->blocked == blocked) return;
  type->blocked = blocked;
  RefreshType(type);
  if (!blocked && type->lane_count == 0) types_.erase(it);
}

void ReadyQueue::SetGroupBlocked(const std::string& name, bool blocked) {
  auto it = groups_.find(name);
  if (it == groups_.end()) {
    if (!blocked) return;
    it = groups_.emplace(name, std::make_unique<GroupState>()).first;
    it->second->name = name;
  }
  GroupState* group = it->second.get();
  if (group->blocked == blocked) return;
  group->blocked = blocked;
  for (Lane* lane : group->lanes) {
    if (blocked) {
      Unrank(lane);
    } else {
      Rank(lane);
    }
  }
  if (!blocked && group->lanes.empty()) groups_.erase(it);
}

}  // namespace spool::actors
