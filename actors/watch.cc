#include "actors/watch.h"

#include <array>
#include <unordered_map>
#include <unordered_set>

#include <caf/all.hpp>

#include "actors/reader.h"

namespace spool::actors {
namespace {

struct Subscriber {
  uint64_t id = 0;
  std::shared_ptr<WatchSubscriber> mailbox;
  // The hash of the last result offered to it, if any.
  bool has = false;
  uint64_t hash = 0;
  // Results of runs numbered below this are not offered to it: it joined
  // while a run was due, and waits for the first run whose snapshot follows
  // every change matched before it joined. Once that run is done, it gets
  // its result whether or not more changes came meanwhile.
  uint64_t first_run = 0;
};

// One watched query, shared by its subscribers.
struct Entry {
  uint64_t id = 0;
  std::shared_ptr<const LiveQuery> query;
  std::vector<Subscriber> subscribers;
  // The last result and its hash, both from the last run's snapshot.
  bool have_result = false;
  uint64_t hash = 0;
  std::shared_ptr<const void> last;
  // A run is on a reader; `run` numbers it.
  bool in_flight = false;
  uint64_t run = 0;
  // A change came while the run was in flight: one follow-up is due.
  bool dirty = false;
  // The ChangeSet that last considered this entry, to visit it once.
  uint64_t seen = 0;
};

using EntrySet = std::unordered_set<uint64_t>;

struct WatcherState {
  static inline const char* name = "spool.watcher";

  reader_pool_actor readers;
  std::shared_ptr<std::atomic<size_t>> live_queries;
  std::unordered_map<uint64_t, Entry> entries;
  std::unordered_map<std::string, uint64_t> by_key;

  // Tells the writer how many live queries there are (WatcherConfig).
  void PublishCount() {
    if (live_queries) live_queries->store(entries.size());
  }
  // Subscription id -> entry id.
  std::unordered_map<uint64_t, uint64_t> subscriptions;
  // Inverted indexes: which entries a change may affect. A listing is filed
  // under its most selective filter (group, then type, then status);
  // the rest of its filters are checked on the ChangeSet.
  std::unordered_map<TaskId, EntrySet> by_task;
  std::unordered_map<std::string, EntrySet> by_group;
  std::unordered_map<std::string, EntrySet> by_type;
  std::array<EntrySet, kTaskStatusCount> by_status;
  EntrySet any;
  uint64_t next_entry = 1;
  uint64_t change_sets = 0;
  WatchStats stats;

  EntrySet* IndexOf(const WatchScope& scope) {
    switch (scope.kind) {
      case WatchScope::Kind::kTask:
        return &by_task[scope.id];
      case WatchScope::Kind::kList:
        if (!scope.group.empty()) return &by_group[scope.group];
        if (!scope.type.empty()) return &by_type[scope.type];
        if (scope.status) {
          return &by_status[static_cast<size_t>(*scope.status)];
        }
        return &any;
      case WatchScope::Kind::kAny:
        return &any;
    }
    return &any;
  }

  void Unindex(const Entry& entry) {
    const WatchScope& scope = entry.query->scope();
    EntrySet* set = IndexOf(scope);
    set->erase(entry.id);
    if (!set->empty()) return;
    // Keep the maps small: drop empty keys.
    if (scope.kind == WatchScope::Kind::kTask) {
      by_task.erase(scope.id);
    } else if (scope.kind == WatchScope::Kind::kList) {
      if (!scope.group.empty()) {
        by_group.erase(scope.group);
      } else if (!scope.type.empty()) {
        by_type.erase(scope.type);
      }
    }
  }
};

using Self = watch_actor::stateful_pointer<WatcherState>;

bool Contains(const std::vector<std::string>& values, const std::string& v) {
  for (const std::string& value : values) {
    if (value == v) return true;
  }
  return false;
}

// Whether `changes` may have changed the result of a query with `scope`.
bool Affects(const WatchScope& scope, const ChangeSet& changes) {
  switch (scope.kind) {
    case WatchScope::Kind::kTask:
      for (TaskId id : changes.ids) {
        if (id == scope.id) return true;
      }
      return false;
    case WatchScope::Kind::kList:
      if (scope.status && (changes.statuses &
                           (1u << static_cast<unsigned>(*scope.status))) == 0) {
        return false;
      }
      if (!scope.type.empty() && !Contains(changes.types, scope.type)) {
        return false;
      }
      if (!scope.group.empty() && !Contains(changes.groups, scope.group)) {
        return false;
      }
      return true;
    case WatchScope::Kind::kAny:
      return true;
  }
  return true;
}

void StartRun(Self self, Entry& entry) {
  auto& st = self->state;
  entry.in_flight = true;
  entry.dirty = false;
  uint64_t run = ++entry.run;
  ++st.stats.runs;
  ++st.stats.in_flight;
  // The reader answers through a weak address: queued queries must not keep
  // the watcher alive after it stopped.
  caf::actor_addr watcher = self->address();
  auto report = [watcher](WatchRun outcome) {
    auto strong = caf::actor_cast<caf::strong_actor_ptr>(watcher);
    if (strong) {
      caf::anon_send(caf::actor_cast<watch_actor>(strong), watched_atom::value,
                     std::move(outcome));
    }
  };
  std::shared_ptr<const LiveQuery> query = entry.query;
  bool have = entry.have_result;
  uint64_t last_hash = entry.hash;
  uint64_t id = entry.id;
  ReadJob job = MakeReadJob(
      [report, query, have, last_hash, id,
       run](const storage::TaskStore::ReadView& view) {
        WatchRun outcome;
        outcome.query = id;
        outcome.run = run;
        outcome.ran = true;
        outcome.hash = query->Run(view, have, last_hash, &outcome.result);
        report(std::move(outcome));
      },
      [report, id, run](const Status& error) {
        WatchRun outcome;
        outcome.query = id;
        outcome.run = run;
        outcome.error = error;
        report(std::move(outcome));
      });
  self->send(st.readers, read_atom::value, std::move(job));
}

// A change may have affected `entry`.
void Touch(Self self, Entry& entry) {
  if (entry.in_flight) {
    if (!entry.dirty) {
      entry.dirty = true;
    } else {
      ++self->state.stats.coalesced;
    }
    return;
  }
  StartRun(self, entry);
}

// Offers the entry's current result (that of run `run`) to the subscribers
// that have not seen it and do not wait for a later run.
void Deliver(Self self, Entry& entry, uint64_t run) {
  for (Subscriber& sub : entry.subscribers) {
    if (sub.first_run > run) continue;
    if (sub.has && sub.hash == entry.hash) continue;
    sub.has = true;
    sub.hash = entry.hash;
    sub.mailbox->Offer(entry.last);
    ++self->state.stats.emissions;
  }
}

void RemoveEntry(Self self, uint64_t id) {
  auto& st = self->state;
  auto it = st.entries.find(id);
  if (it == st.entries.end()) return;
  if (it->second.in_flight) --st.stats.in_flight;
  st.Unindex(it->second);
  st.by_key.erase(it->second.query->key());
  st.entries.erase(it);
  st.PublishCount();
}

// The entry of `query`, added (and indexed) if no subscriber watches it
// yet.
Entry& EntryOf(Self self, const std::shared_ptr<const LiveQuery>& query) {
  auto& st = self->state;
  if (auto known = st.by_key.find(query->key()); known != st.by_key.end()) {
    return st.entries.at(known->second);
  }
  uint64_t entry_id = st.next_entry++;
  Entry entry;
  entry.id = entry_id;
  entry.query = query;
  st.by_key.emplace(entry.query->key(), entry_id);
  st.IndexOf(entry.query->scope())->insert(entry_id);
  Entry& added = st.entries.emplace(entry_id, std::move(entry)).first->second;
  st.PublishCount();
  return added;
}

// The entries `changes` may have affected, each listed once. The indexes
// give the candidates: those filed under a task, group, type or status that
// changed, and those filed under none; Affects checks the rest of each
// one's scope.
std::vector<uint64_t> AffectedBy(Self self, const ChangeSet& changes) {
  auto& st = self->state;
  uint64_t epoch = ++st.change_sets;
  std::vector<uint64_t> affected;
  auto consider = [&](const EntrySet& set) {
    for (uint64_t id : set) {
      Entry& entry = st.entries.at(id);
      if (entry.seen == epoch) continue;
      entry.seen = epoch;
      if (Affects(entry.query->scope(), changes)) affected.push_back(id);
    }
  };
  for (TaskId id : changes.ids) {
    if (auto it = st.by_task.find(id); it != st.by_task.end()) {
      consider(it->second);
    }
  }
  for (const std::string& group : changes.groups) {
    if (auto it = st.by_group.find(group); it != st.by_group.end()) {
      consider(it->second);
    }
  }
  for (const std::string& type : changes.types) {
    if (auto it = st.by_type.find(type); it != st.by_type.end()) {
      consider(it->second);
    }
  }
  for (size_t status = 0; status < kTaskStatusCount; ++status) {
    if ((changes.statuses & (1u << status)) != 0) {
      consider(st.by_status[status]);
    }
  }
  consider(st.any);
  return affected;
}

// A batch committed: the queries it may have changed run again.
void OnChanged(Self self, const ChangeSet& changes) {
  if (self->state.entries.empty()) return;
  for (uint64_t id : AffectedBy(self, changes)) {
    Touch(self, self->state.entries.at(id));
  }
}

void Subscribe(Self self, WatchRequest& request) {
  auto& st = self->state;
  Entry& entry = EntryOf(self, request.query);
  st.subscriptions[request.id] = entry.id;
  Subscriber sub;
  sub.id = request.id;
  sub.mailbox = std::move(request.subscriber);
  // Every change committed before this request was matched against the
  // entry before the request arrived. So the last result is current if no
  // run is in flight; a run in flight sees all those changes unless one
  // came after it started (dirty), and then the follow-up does.
  if (entry.have_result && !entry.in_flight) {
    sub.has = true;
    sub.hash = entry.hash;
    sub.mailbox->Offer(entry.last);
    ++st.stats.emissions;
  } else if (entry.in_flight) {
    sub.first_run = entry.dirty ? entry.run + 1 : entry.run;
  } else {
    sub.first_run = entry.run + 1;
  }
  entry.subscribers.push_back(std::move(sub));
  if (!entry.have_result && !entry.in_flight) StartRun(self, entry);
}

// Ends subscription `id`; a query left without subscribers is dropped.
void Unsubscribe(Self self, uint64_t id) {
  auto& st = self->state;
  auto sub = st.subscriptions.find(id);
  if (sub == st.subscriptions.end()) return;
  uint64_t entry_id = sub->second;
  st.subscriptions.erase(sub);
  auto entry = st.entries.find(entry_id);
  if (entry == st.entries.end()) return;
  auto& subs = entry->second.subscribers;
  for (auto it = subs.begin(); it != subs.end(); ++it) {
    if (it->id == id) {
      subs.erase(it);
      break;
    }
  }
  if (subs.empty()) RemoveEntry(self, entry_id);
}

// A run came back from a reader: its result goes to the subscribers if it
// changed, and the follow-up starts if a change came meanwhile.
void OnRunDone(Self self, WatchRun& outcome) {
  auto& st = self->state;
  auto it = st.entries.find(outcome.query);
  // Unsubscribed meanwhile, or a duplicate report (a reader that died after
  // running the query has it run again).
  if (it == st.entries.end() || !it->second.in_flight ||
      it->second.run != outcome.run) {
    return;
  }
  Entry& entry = it->second;
  entry.in_flight = false;
  --st.stats.in_flight;
  if (!outcome.ran) {
    if (outcome.error.IsClosed()) return;
    uint64_t hash = 0;
    entry.last = entry.query->Error(outcome.error, &hash);
    entry.hash = hash;
    entry.have_result = true;
  } else if (outcome.result) {
    entry.last = std::move(outcome.result);
    entry.hash = outcome.hash;
    entry.have_result = true;
  } else {
    ++st.stats.unchanged;
  }
  Deliver(self, entry, outcome.run);
  if (entry.dirty) StartRun(self, entry);
}

void ReportStats(Self self, WatchStatsCallback& callback) {
  auto& st = self->state;
  WatchStats stats = st.stats;
  stats.subscriptions = st.subscriptions.size();
  stats.queries = st.entries.size();
  callback(stats);
}

// Closes every subscription, then stops.
void Stop(Self self, Completion& done) {
  auto& st = self->state;
  for (auto& [id, entry] : st.entries) {
    for (Subscriber& sub : entry.subscribers) sub.mailbox->Close();
  }
  st.entries.clear();
  st.subscriptions.clear();
  done(Status::OK());
  self->quit();
}

watch_actor::behavior_type WatcherBehavior(Self self, WatcherConfig config) {
  self->state.readers = std::move(config.readers);
  self->state.live_queries = std::move(config.live_queries);
  return {
      [self](changed_atom, const ChangeSet& changes) {
        OnChanged(self, changes);
      },
      [self](watch_atom, WatchRequest& request) { Subscribe(self, request); },
      [self](unwatch_atom, uint64_t id) { Unsubscribe(self, id); },
      [self](watched_atom, WatchRun& outcome) { OnRunDone(self, outcome); },
      [self](stats_atom, WatchStatsCallback& callback) {
        ReportStats(self, callback);
      },
      [self](stop_atom, Completion& done) { Stop(self, done); },
  };
}

}  // namespace

watch_actor SpawnWatcher(caf::actor_system& system, WatcherConfig config) {
  return system.spawn(WatcherBehavior, std::move(config));
}

}  // namespace spool::actors
