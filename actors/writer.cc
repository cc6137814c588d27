#include "actors/writer.h"

#include <chrono>
#include <random>
#include <unordered_set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/transitions.h"
#include "runtime/logging.h"

namespace spool::actors {
namespace {

bool SameEntry(const QueueEntry& a, const QueueEntry& b) {
  return a.id == b.id && a.priority == b.priority && a.sequence == b.sequence &&
         a.due_us == b.due_us;
}

// The index entries a queued task has, known without its record.
std::vector<storage::IndexEntry> KnownIndexEntries(const QueueEntry& entry) {
  std::vector<storage::IndexEntry> known;
  if (entry.due_us == 0) {
    known.push_back({storage::ColumnFamily::kReady,
                     storage::EncodeReadyKey({entry.priority, entry.sequence}),
                     ""});
  } else {
    known.push_back(
        {storage::ColumnFamily::kScheduled,
         storage::EncodeScheduledKey({entry.due_us, entry.sequence}), ""});
  }
  known.push_back(
      {storage::ColumnFamily::kRunning, storage::TaskKey(entry.id), ""});
  return known;
}

// Everything one group commit has gathered.
struct Batch {
  std::unique_ptr<storage::WriteTxn> txn;
  size_t commands = 0;
  // Enqueue and barrier callers, answered with the commit's status.
  std::vector<Completion> done;
  // Claims as the scheduler asked for them, and the ones that were applied.
  std::vector<QueueEntry> claims;
  std::unordered_set<TaskId> claimed;
  std::vector<TaskId> refused;
  std::vector<Outcome> outcomes;
  std::vector<std::pair<RecoverCommand, size_t>> recoveries;
};

struct WriterState {
  static inline const char* name = "spool.writer";

  WriterConfig config;
  scheduler_actor scheduler;
  change_listener_actor change_listener;
  Batch batch;
  bool commit_scheduled = false;
  std::mt19937_64 rng{std::random_device{}()};
  std::shared_ptr<spdlog::logger> log;

  int64_t NowMicros() const {
    return config.clock->Now().time_since_epoch().count();
  }
  double UnitRandom() {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }
  storage::WriteTxn& txn() {
    if (!batch.txn)
      batch.txn = std::make_unique<storage::WriteTxn>(config.store);
    return *batch.txn;
  }

  // Reads a record for a change; moves it aside when it is unreadable.
  // Returns false when there is nothing to change.
  bool Load(TaskId id, std::vector<storage::IndexEntry> known,
            storage::TaskRecord* record) {
    Status s = txn().Get(id, record);
    if (s.ok()) return true;
    if (s.IsCorruption()) {
      log->error("{}; moving it to the corrupt family, the queue goes on",
                 s.ToString());
      txn().Quarantine(id, std::move(known));
    } else if (!s.IsNotFound()) {
      log->error("reading task {} for an update: {}", id, s.ToString());
    }
    return false;
  }

  void Enqueue(EnqueueCommand& command) {
    int64_t now = NowMicros();
    for (const NewTask& task : command.tasks) {
      txn().Insert(NewRecord(task, txn().NextSequence(), now));
    }
    batch.done.push_back(std::move(command.done));
  }

  void ClaimAll(const std::vector<QueueEntry>& entries) {
    int64_t now = NowMicros();
    for (const QueueEntry& entry : entries) {
      batch.claims.push_back(entry);
      storage::TaskRecord record;
      if (!Load(entry.id, KnownIndexEntries(entry), &record) ||
          !IsQueued(record)) {
        batch.refused.push_back(entry.id);
        continue;
      }
      Claim(&record, now);
      txn().Update(std::move(record));
      batch.claimed.insert(entry.id);
    }
  }

  void SettleAll(std::vector<Outcome>& outcomes) {
    int64_t now = NowMicros();
    for (Outcome& outcome : outcomes) {
      storage::TaskRecord record;
      std::vector<storage::IndexEntry> known = {
          {storage::ColumnFamily::kRunning, storage::TaskKey(outcome.id), ""}};
      if (Load(outcome.id, std::move(known), &record) &&
          OutcomeMatches(record, outcome)) {
        Settle(&record, outcome, now, UnitRandom());
        txn().Update(std::move(record));
      }
      batch.outcomes.push_back(std::move(outcome));
    }
  }

  void Recover(RecoverCommand& command) {
    int64_t now = NowMicros();
    size_t recovered = 0;
    for (TaskId id : command.running) {
      storage::TaskRecord record;
      std::vector<storage::IndexEntry> known = {
          {storage::ColumnFamily::kRunning, storage::TaskKey(id), ""}};
      if (!Load(id, std::move(known), &record)) continue;
      if (record.status != TaskStatus::kRunning) continue;
      Interrupt(&record, now, UnitRandom());
      txn().Update(std::move(record));
      ++recovered;
    }
    batch.recoveries.emplace_back(std::move(command), recovered);
  }

  QueueChanges ChangesOf(const Batch& committed) const {
    QueueChanges changes;
    for (const auto& [id, entry] : committed.txn->entries()) {
      bool was_queued = entry.before && IsQueued(*entry.before);
      if (entry.after && IsQueued(*entry.after)) {
        QueueEntry now_entry = QueueEntryOf(*entry.after);
        if (!was_queued || !SameEntry(QueueEntryOf(*entry.before), now_entry)) {
          changes.queued.push_back(now_entry);
        }
      } else if (committed.claimed.count(id) != 0 && entry.after) {
        changes.claimed.push_back(ClaimedTask{
            std::make_shared<const storage::TaskRecord>(*entry.after)});
      } else if (was_queued) {
        changes.dequeued.push_back(id);
      }
    }
    changes.refused = committed.refused;
    changes.settled = committed.outcomes.size();
    return changes;
  }

  ChangeSet ChangeSetOf(const Batch& committed) const {
    ChangeSet changes;
    std::unordered_set<std::string> types;
    std::unordered_set<std::string> groups;
    auto note = [&](const storage::TaskRecord& record) {
      changes.statuses |= 1u << static_cast<unsigned>(record.status);
      if (types.insert(record.type).second)
        changes.types.push_back(record.type);
      if (!record.group.empty() && groups.insert(record.group).second) {
        changes.groups.push_back(record.group);
      }
    };
    for (const auto& [id, entry] : committed.txn->entries()) {
      changes.ids.push_back(id);
      if (entry.before) note(*entry.before);
      if (entry.after) note(*entry.after);
    }
    return changes;
  }

  QueueChanges FailedChangesOf(Batch& failed, const Status& error) const {
    QueueChanges changes;
    changes.write_status = error;
    changes.claim_failed = std::move(failed.claims);
    changes.unsettled = std::move(failed.outcomes);
    return changes;
  }
};

using Self = writer_actor::stateful_pointer<WriterState>;

void CommitBatch(Self self) {
  auto& st = self->state;
  Batch batch = std::move(st.batch);
  st.batch = Batch{};
  if (batch.commands == 0) return;

  Status status;
  auto started = std::chrono::steady_clock::now();
  if (batch.txn && !batch.txn->empty()) {
    if (st.config.before_commit) st.config.before_commit();
    status = st.config.store->Commit(batch.txn.get());
  }
  if (st.log->should_log(spdlog::level::debug)) {
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - started)
                    .count();
    st.log->debug("commit: {} commands, {} tasks changed, {:.3f} ms, {}",
                  batch.commands,
                  batch.txn ? batch.txn->entries().size() : size_t{0}, ms,
                  status.ToString());
  }
  if (!status.ok()) {
    st.log->error("commit of {} commands failed: {}", batch.commands,
                  status.ToString());
  }

  if (st.scheduler) {
    QueueChanges changes =
        status.ok() ? st.ChangesOf(batch) : st.FailedChangesOf(batch, status);
    self->send(st.scheduler, changes_atom::value, std::move(changes));
  }
  if (st.change_listener && status.ok() && batch.txn &&
      !batch.txn->entries().empty()) {
    self->send(st.change_listener, changed_atom::value, st.ChangeSetOf(batch));
  }
  for (auto& done : batch.done) done(status);
  for (auto& [command, recovered] : batch.recoveries) {
    if (status.ok()) {
      command.done(recovered);
    } else {
      command.done(status);
    }
  }
}

// Counts a command into the batch; commits when the batch is full, and makes
// sure a commit marker is on its way otherwise.
void Admit(Self self) {
  auto& st = self->state;
  if (++st.batch.commands >= st.config.max_batch) {
    CommitBatch(self);
    return;
  }
  if (!st.commit_scheduled) {
    st.commit_scheduled = true;
    self->send(self, commit_atom::value);
  }
}

writer_actor::behavior_type WriterBehavior(Self self, WriterConfig config) {
  self->state.config = std::move(config);
  self->state.log = Logger();
  return {
      [self](enqueue_atom, EnqueueCommand& command) {
        self->state.Enqueue(command);
        Admit(self);
      },
      [self](claim_atom, const std::vector<QueueEntry>& entries) {
        self->state.ClaimAll(entries);
        Admit(self);
      },
      [self](settle_atom, std::vector<Outcome>& outcomes) {
        self->state.SettleAll(outcomes);
        Admit(self);
      },
      [self](recover_atom, RecoverCommand& command) {
        self->state.Recover(command);
        Admit(self);
      },
      [self](barrier_atom, Completion& done) {
        if (self->state.batch.commands == 0) {
          done(Status::OK());
          return;
        }
        self->state.batch.done.push_back(std::move(done));
      },
      [self](attach_atom, scheduler_actor scheduler) {
        self->state.scheduler = std::move(scheduler);
      },
      [self](attach_atom, change_listener_actor listener) {
        self->state.change_listener = std::move(listener);
      },
      [self](commit_atom) {
        self->state.commit_scheduled = false;
        CommitBatch(self);
      },
  };
}

}  // namespace

writer_actor SpawnWriter(caf::actor_system& system, WriterConfig config) {
  return system.spawn<caf::detached>(WriterBehavior, std::move(config));
}

}  // namespace spool::actors
