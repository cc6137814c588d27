#include "actors/writer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <random>
#include <unordered_set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/ack_waiters.h"
#include "actors/handler_registry.h"
#include "actors/transitions.h"
#include "storage/queries.h"
#include "storage/start_log.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace spool::actors {
namespace {

using storage::ColumnFamily;
using storage::StateRecord;

bool SameEntry(const QueueEntry& a, const QueueEntry& b) {
  return a.id == b.id && a.priority == b.priority && a.sequence == b.sequence &&
         a.due_us == b.due_us;
}

// The index keys a task whose state cannot be read may have, as far as
// they are known without the state: with its type, its status entry under
// any status. The next open rebuilds the index anyway (counts_dirty);
// these keep the queue from offering the task again meanwhile.
std::vector<std::string> KnownIndexKeys(TaskId id, const std::string* type,
                                        const QueueEntry* queued = nullptr) {
  std::vector<std::string> known;
  for (size_t i = 0; type != nullptr && i < kTaskStatusCount; ++i) {
    known.push_back(
        storage::StatusIndexKey(static_cast<TaskStatus>(i), *type, id));
  }
  if (queued != nullptr && queued->due_us != 0) {
    known.push_back(storage::DueIndexKey(queued->due_us, queued->sequence));
  }
  return known;
}

std::string PeriodicMetaKey(std::string_view name) {
  return "periodic/" + std::string(name);
}

Status NotActionable(TaskId id, std::string_view why) {
  return Status::FailedPrecondition("task " + std::to_string(id) + " " +
                                    std::string(why));
}

// Everything one group commit has gathered.
struct Batch {
  std::unique_ptr<storage::WriteTxn> txn;
  size_t commands = 0;
  // Set when reading storage failed: nothing of this batch is committed and
  // every command gets this error.
  Status abort;
  // Called with the commit's status, after it; each closure knows its own
  // command's result.
  std::vector<std::function<void(const Status&)>> done;
  // Called with the commit's status after the local sync, never waiting
  // for standbys: the runtime's own commands (recovery, a new epoch).
  std::vector<std::function<void(const Status&)>> local_done;
  // Claims as the scheduler asked for them, and the ones that were applied.
  std::vector<QueueEntry> claims;
  std::unordered_set<TaskId> claimed;
  std::vector<QueueEntry> refused;
  std::vector<Outcome> outcomes;
  std::unordered_set<TaskId> timed_out;
  std::vector<TaskId> cancel_requested;
  // Only while someone listens to events: what the enqueued and deferred
  // events of this batch's tasks carry beyond their states.
  struct Enqueued {
    std::string dedup_key;
    std::string idempotency_key;
    int64_t run_at_us = 0;
  };
  std::unordered_map<TaskId, Enqueued> enqueued;
  std::unordered_map<TaskId, std::pair<DeferReason, std::string>> deferrals;
};

struct WriterState {
  static inline const char* name = "spool.writer";

  WriterConfig config;
  // The store was closed after a failed commit and could not be reopened;
  // every batch tries again first (at most once per kReopenInterval).
  bool store_closed = false;
  std::chrono::steady_clock::time_point last_reopen;
  // Commits failed in a row, for StorageHealthEvent.
  uint64_t consecutive_failures = 0;
  scheduler_actor scheduler;
  change_listener_actor change_listener;
  Batch batch;
  bool commit_scheduled = false;
  std::mt19937_64 rng{std::random_device{}()};
  std::shared_ptr<spdlog::logger> log;
  // The metrics slots of the types committed so far (null without metrics).
  std::unique_ptr<metrics::SlotCache> slots;
  // Durability::kReplicated: callers waiting for standbys.
  std::unique_ptr<AckWaiters> acks;
  bool ack_check_scheduled = false;
  // The store's side_writes() when the last commit went to the log.
  uint64_t side_writes_logged = 0;
  // The commit being written was handed to the replication log.
  bool shipped_unwritten = false;
  // The logs retracted lately, each with the position it was retracted
  // after: an acknowledgement of one beyond it, still on its way when the
  // log was retracted, must not count (RetractShipped).
  std::deque<std::pair<uint64_t, uint64_t>> retracted_logs;

  int64_t NowMicros() const {
    return config.clock->Now().time_since_epoch().count();
  }
  double UnitRandom() {
    if (!config.random_fraction) {
      return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    }
    double r = config.random_fraction();
    if (std::isnan(r)) return 0.5;
    return std::clamp(r, 0.0, std::nextafter(1.0, 0.0));
  }
  // Whether this batch's events will be built (someone subscribed).
  bool EventsWanted() const {
    return config.on_events &&
           (!config.events_wanted || config.events_wanted());
  }
  // Handed-off tasks whose progress Runtime::ReportProgress set; cleared
  // from the board when their hand-off ends.
  std::unordered_set<TaskId> external_progress;
  storage::WriteTxn& txn() {
    if (!batch.txn) {
      batch.txn = std::make_unique<storage::WriteTxn>(config.store);
    }
    return *batch.txn;
  }

  // Reads a state for a change. OK, NotFound, or Corruption (the task is
  // moved aside, with the index entries the caller knows of). Any other
  // error aborts the batch.
  Status Load(TaskId id, std::vector<std::string> known, StateRecord* record) {
    Status s = txn().GetState(id, record);
    if (s.ok() || s.IsNotFound()) return s;
    if (s.IsCorruption()) {
      log->error("{}; moving it to the corrupt family, the queue goes on",
                 s.ToString());
      txn().Quarantine(id, std::move(known));
      return s;
    }
    Abort(s.WithContext("reading task " + std::to_string(id)));
    return s;
  }

  void Abort(const Status& error) {
    if (batch.abort.ok()) batch.abort = error;
  }

  // The states of `deps` as this batch sees them; nullopt for missing ones.
  std::vector<DependencyState> StatesOf(const std::vector<TaskId>& deps) {
    std::vector<DependencyState> states;
    states.reserve(deps.size());
    for (TaskId dep : deps) {
      StateRecord record;
      Status s = Load(dep, {}, &record);
      states.push_back({dep, s.ok() ? std::optional<TaskStatus>(record.status)
                                    : std::nullopt});
    }
    return states;
  }

  // What `deps`, as this batch sees them, allow under `policy`. Without
  // dependencies a task is ready, and nothing is read.
  DependencyVerdict JudgeInBatch(const std::vector<TaskId>& deps,
                                 DependencyFailure policy) {
    if (deps.empty()) return DependencyVerdict{};
    return JudgeDependencies(StatesOf(deps), policy);
  }

  // What the dedup index holds for a key, as this batch sees it.
  struct DedupEntry {
    // Some task holds the key.
    bool present = false;
    // The entry is a task id, in `holder`.
    bool well_formed = false;
    TaskId holder = 0;
  };

  // Looks up a dedup key in stored form (TaskStore::StoredDedupKey). OK
  // with *entry filled in, whether or not the key is held; else the error
  // of the read.
  Status LookUpDedupKey(std::string_view stored_key, DedupEntry* entry) {
    std::string value;
    Status s = txn().GetIndex(storage::DedupIndexKey(stored_key), &value);
    if (s.IsNotFound()) return Status::OK();
    if (!s.ok()) return s;
    entry->present = true;
    entry->well_formed = storage::DecodeIdValue(value, &entry->holder);
    return s;
  }

  // The task that holds a dedup key (in stored form) at `now`, in *holder,
  // 0 when none does, and its state in *state when it could be read. A
  // finished task whose unique_for window has closed holds it no more: its
  // reservation is dropped here (staged), which frees the key.
  Status HolderOf(std::string_view stored_key, int64_t now, TaskId* holder,
                  std::optional<StateRecord>* state) {
    *holder = 0;
    state->reset();
    DedupEntry entry;
    Status s = LookUpDedupKey(stored_key, &entry);
    if (!s.ok()) return s;
    if (entry.present && !entry.well_formed) {
      return Status::Corruption("dedup index holds a malformed id");
    }
    if (!entry.present) return Status::OK();
    *holder = entry.holder;
    StateRecord record;
    s = Load(entry.holder, {}, &record);
    // A holder that cannot be read still holds the key, as it always did.
    if (!s.ok()) return s.IsNotFound() || s.IsCorruption() ? Status::OK() : s;
    if (!IsActive(record) && !storage::HoldsReservation(record, now)) {
      record.unique_for_us = 0;
      txn().Update(std::move(record));
      *holder = 0;
      return Status::OK();
    }
    *state = std::move(record);
    return Status::OK();
  }

  // An enqueue with on_duplicate = kReplacePayload met `holder`: a holder
  // that has not started takes the new payload.
  Status ReplacePayload(StateRecord holder, const NewTask& task, int64_t now) {
    if (!IsActive(holder) || holder.status == TaskStatus::kRunning) {
      return Status::OK();
    }
    TaskId id = holder.id;
    holder.updated_us = now;
    txn().Update(std::move(holder));
    return txn().ReplacePayload(id, task.payload, task.payload_version);
  }

  // Stages `after` over `before`, then settles the tasks waiting for it if
  // it just finished: the cascade lands in the same batch as its cause.
  void Stage(const StateRecord& before, StateRecord after) {
    bool finished = IsActive(before) && !IsActive(after);
    TaskId id = after.id;
    txn().Update(std::move(after));
    if (finished) SettleWaiters(id);
  }

  // Re-judges, transitively, every task waiting for `finished`.
  void SettleWaiters(TaskId finished) {
    // Most queues have no waiting task: then there is nothing to scan.
    if (txn().MayHave(TaskStatus::kWaiting) == 0) return;
    std::vector<TaskId> work = {finished};
    int64_t now = NowMicros();
    while (!work.empty() && batch.abort.ok()) {
      TaskId dependency = work.back();
      work.pop_back();
      std::vector<TaskId> waiters;
      Status s =
          txn().ScanIndex(storage::WaitingIndexPrefix(dependency), "",
                          [&](std::string_view key, std::string_view) {
                            TaskId waiter = 0;
                            if (storage::DecodeTrailingId(key, &waiter)) {
                              waiters.push_back(waiter);
                            }
                            return true;
                          });
      if (!s.ok()) {
        Abort(s);
        return;
      }
      for (TaskId waiter : waiters) {
        StateRecord record;
        if (!Load(waiter, {}, &record).ok()) continue;
        if (record.status != TaskStatus::kWaiting) continue;
        DependencyVerdict verdict =
            JudgeInBatch(record.depends_on, record.on_dependency_failure);
        if (verdict.kind == DependencyVerdict::Kind::kWait) continue;
        ApplyVerdict(&record, verdict, now);
        bool finished_now = !IsActive(record);
        txn().Update(std::move(record));
        if (finished_now) work.push_back(waiter);
      }
    }
  }

  // ---- Enqueue ----

  void Enqueue(EnqueueCommand& command) {
    Result<std::vector<TaskId>> result = StageEnqueue(command.tasks);
    if (result.ok()) {
      for (AppBatch::Write& write : command.app_writes) {
        txn().PutApp(std::move(write.key), std::move(write.value));
      }
    }
    batch.done.push_back(
        [done = std::move(command.done), result](const Status& commit) {
          if (!result.ok()) {
            done(result.status());
          } else if (!commit.ok()) {
            done(commit);
          } else {
            done(result);
          }
        });
  }

  // Checks every task first (dedup, dependencies, periodic slots), so that a
  // command that fails stages nothing; then stages them in order.
  Result<std::vector<TaskId>> StageEnqueue(std::vector<NewTask>& tasks) {
    std::vector<TaskId> ids(tasks.size());
    std::vector<bool> skip(tasks.size(), false);
    // Ids the caller assigned, mapped to the task that stands for them (the
    // holder of a dedup key, for a deduplicated task).
    std::unordered_map<TaskId, TaskId> actual;
    // Each key taken by a task of this command: that task's index.
    std::unordered_map<std::string, size_t> keys_in_command;
    // Holders that take a new payload, staged once every check passed.
    std::vector<std::pair<StateRecord, size_t>> replaced;
    int64_t now = NowMicros();
    for (size_t i = 0; i < tasks.size(); ++i) {
      NewTask& task = tasks[i];
      ids[i] = task.id;
      if (!task.dedup_key.empty()) {
        TaskId holder = 0;
        if (auto it = keys_in_command.find(task.dedup_key);
            it != keys_in_command.end()) {
          NewTask& first = tasks[it->second];
          holder = first.id;
          if (task.replace_payload) {
            first.payload = task.payload;
            first.payload_version = task.payload_version;
          }
        } else {
          std::optional<StateRecord> state;
          Status s = HolderOf(config.store->StoredDedupKey(task.dedup_key), now,
                              &holder, &state);
          if (!s.ok()) return s;
          if (task.replace_payload && state) replaced.emplace_back(*state, i);
        }
        if (holder != 0) {
          ids[i] = holder;
          actual[task.id] = holder;
          skip[i] = true;
          continue;
        }
        keys_in_command[task.dedup_key] = i;
      }
      for (TaskId& dep : task.depends_on) {
        if (auto it = actual.find(dep); it != actual.end()) dep = it->second;
        bool earlier_here = false;
        for (size_t j = 0; j < i; ++j) earlier_here |= ids[j] == dep;
        if (earlier_here) continue;
        StateRecord record;
        Status s = txn().GetState(dep, &record);
        if (s.IsNotFound()) {
          return Status::NotFound("dependency " + std::to_string(dep) +
                                  " of task " + std::to_string(task.id) +
                                  " does not exist");
        }
        if (!s.ok()) return s;
      }
      if (!task.periodic_name.empty()) {
        std::string last;
        Status s = txn().GetMeta(PeriodicMetaKey(task.periodic_name), &last);
        if (s.ok() && last.size() == 8 &&
            storage::DecodeTime(storage::GetBigEndian64(last.data())) >=
                task.periodic_slot_us) {
          // This slot, or a later one, is stored already.
          skip[i] = true;
          ids[i] = 0;
        } else if (!s.ok() && !s.IsNotFound()) {
          return s;
        }
      }
    }
    for (auto& [holder, i] : replaced) {
      Status s = ReplacePayload(std::move(holder), tasks[i], now);
      if (!s.ok()) return s;
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (skip[i]) continue;
      NewTask& task = tasks[i];
      DependencyVerdict verdict =
          JudgeInBatch(task.depends_on, task.on_dependency_failure);
      NewRecords records =
          NewRecord(task, txn().NextSequence(), now, verdict,
                    config.store->StoredGroup(task.group),
                    config.store->StoredDedupKey(task.dedup_key));
      txn().Insert(std::move(records.spec), std::move(records.state));
      if (EventsWanted()) {
        batch.enqueued[task.id] = Batch::Enqueued{
            task.dedup_key, task.idempotency_key, task.run_at_us};
      }
      if (!task.periodic_name.empty()) {
        std::string slot;
        storage::PutBigEndian64(&slot,
                                storage::EncodeTime(task.periodic_slot_us));
        txn().PutMeta(PeriodicMetaKey(task.periodic_name), slot);
      }
    }
    return ids;
  }

  // ---- Claims, outcomes, recovery ----

  void ClaimAll(const std::vector<QueueEntry>& entries) {
    int64_t now = NowMicros();
    for (const QueueEntry& entry : entries) {
      batch.claims.push_back(entry);
      StateRecord record;
      if (!Load(entry.id, KnownIndexKeys(entry.id, &entry.type, &entry),
                &record)
               .ok() ||
          !IsQueued(record)) {
        batch.refused.push_back(entry);
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
      StateRecord record;
      if (Load(outcome.id, KnownIndexKeys(outcome.id, nullptr), &record).ok() &&
          OutcomeMatches(record, outcome)) {
        if (outcome.unreadable) {
          SetAside(record, outcome.status);
        } else {
          StateRecord before = record;
          Settle(&record, outcome, now, UnitRandom());
          if (outcome.timed_out) batch.timed_out.insert(outcome.id);
          NoteDeferral(outcome);
          Stage(before, std::move(record));
        }
      }
      batch.outcomes.push_back(std::move(outcome));
    }
  }

  // For the deferred event: why the outcome, if it turns out a deferral,
  // gave its task back.
  void NoteDeferral(const Outcome& outcome) {
    if (!EventsWanted()) return;
    std::pair<DeferReason, std::string> why{DeferReason::kNone, {}};
    if (!outcome.started) {
      why = {outcome.given_back, outcome.given_back_gate};
    } else if (outcome.stopped) {
      why.first = DeferReason::kStopping;
    } else if (outcome.deferred_until_gate) {
      why = {DeferReason::kGateClosed, *outcome.deferred_until_gate};
    } else if (outcome.snooze_us) {
      why.first = DeferReason::kSnoozed;
    }
    if (why.first != DeferReason::kNone) batch.deferrals[outcome.id] = why;
  }

  // Sets aside a task whose spec a worker could not read: its state is
  // readable, so every index entry it has is known.
  void SetAside(const StateRecord& record, const Status& why) {
    log->error("{}; moving task {} to the corrupt family, the queue goes on",
               why.ToString(), record.id);
    std::vector<std::string> keys;
    for (storage::IndexEntry& e : storage::IndexEntriesOf(record)) {
      keys.push_back(std::move(e.key));
    }
    txn().Quarantine(record.id, std::move(keys));
  }

  void Recover(RecoverCommand& command) {
    int64_t now = NowMicros();
    Recovered recovered;
    Status prefetched = txn().Prefetch(command.running);
    if (!prefetched.ok()) Abort(prefetched.WithContext("recovery"));
    for (TaskId id : command.running) {
      StateRecord record;
      if (!Load(id, KnownIndexKeys(id, nullptr), &record).ok()) continue;
      // A handed-off task was not interrupted: it finishes elsewhere.
      if (record.status != TaskStatus::kRunning ||
          !record.handoff_reference.empty()) {
        continue;
      }
      StateRecord before = record;
      if (command.started && !command.started(id, record.attempts)) {
        ReturnUnstarted(&record, now);
        ++recovered.unstarted;
        // The process stopped before the claim started.
        if (EventsWanted()) {
          batch.deferrals[id] = {DeferReason::kStopping, std::string()};
        }
      } else {
        Interrupt(&record, now, UnitRandom());
        ++recovered.interrupted;
      }
      Stage(before, std::move(record));
    }
    // Open waits for it before any standby can follow: it must not wait
    // for their acknowledgements.
    batch.local_done.push_back(
        [done = std::move(command.done), recovered](const Status& commit) {
          if (commit.ok()) {
            done(recovered);
          } else {
            done(commit);
          }
        });
  }

  // ---- Cluster epochs ----

  // Stages "epoch `epoch` starts with this commit" (storage/keys.h,
  // kClusterEpochsKey). The next commit is this store's committed_batches()
  // + 1: the writer alone commits, and commits the whole batch. Answers
  // `done` after the local sync; false (answered already) when there is
  // nothing to stage.
  bool BeginEpoch(uint64_t epoch, Completion& done) {
    storage::TaskStore& store = *config.store;
    std::vector<storage::EpochStart> epochs;
    Status s = store.ReadEpochs(&epochs);
    if (s.ok() && !epochs.empty() && epochs.back().epoch >= epoch) {
      s = epochs.back().epoch == epoch
              ? Status::OK()
              : Status::FailedPrecondition(
                    "the store's commits are of epoch " +
                    std::to_string(epochs.back().epoch) +
                    ", newer than the leader's epoch " + std::to_string(epoch) +
                    ": was etcd's data reset? (docs/replication.md)");
      done(s);
      return false;
    }
    if (!s.ok()) {
      done(s);
      return false;
    }
    epochs.push_back({epoch, store.committed_batches() + 1});
    if (epochs.size() > storage::kMaxEpochsKept) {
      epochs.erase(epochs.begin(), epochs.end() - static_cast<std::ptrdiff_t>(
                                                      storage::kMaxEpochsKept));
    }
    txn().PutMeta(std::string(storage::kClusterEpochsKey),
                  storage::EncodeEpochs(epochs));
    batch.local_done.push_back(std::move(done));
    return true;
  }

  // ---- Control commands ----

  void Control(ControlCommand& command) {
    Result<ControlResult> result = ApplyControl(command);
    batch.done.push_back(
        [done = std::move(command.done), result](const Status& commit) {
          if (!result.ok()) {
            done(result.status());
          } else if (!commit.ok()) {
            done(commit);
          } else {
            done(result);
          }
        });
  }

  // CancelGroup, Purge and Reencrypt act on many tasks; every other kind on
  // the one task it names, loaded here.
  Result<ControlResult> ApplyControl(const ControlCommand& command) {
    using Kind = ControlCommand::Kind;
    switch (command.kind) {
      case Kind::kCancelGroup:
        return CancelGroup(command.text);
      case Kind::kPurge:
        return PurgeStep(command);
      case Kind::kReencrypt:
        return ReencryptStep(command);
      default:
        break;
    }
    if (command.kind == Kind::kRelease) {
      // A task set aside has no state in `tasks` to load.
      Result<bool> reinstated = ReinstateSetAside(command.id);
      if (!reinstated.ok()) return reinstated.status();
      if (*reinstated) return ControlResult{};
    }
    StateRecord record;
    Status s = Load(command.id, {}, &record);
    if (!s.ok()) return s;
    switch (command.kind) {
      case Kind::kCancel: {
        ControlResult result;
        result.status = CancelTask(&record);
        return result;
      }
      case Kind::kRetry:
        return Retry(command, std::move(record));
      case Kind::kDelete:
        return Delete(record);
      case Kind::kHold:
        return Hold(std::move(record));
      case Kind::kRelease:
        return Release(std::move(record));
      case Kind::kCompleteHandOff:
      case Kind::kFailHandOff:
        return FinishHandOff(command, std::move(record));
      case Kind::kReportProgress:
        return ReportProgress(command, record);
      case Kind::kLease:
        return RecordLease(command, std::move(record));
      default:
        return Status::InvalidArgument("unknown control command");
    }
  }

  // Runs a failed or cancelled task again, with a fresh attempt budget,
  // unless it could not run: no handler for its type, its dedup key taken
  // by another active task, or a dependency that failed.
  Result<ControlResult> Retry(const ControlCommand& command,
                              StateRecord record) {
    if (command.registry && command.registry->count(record.type) == 0) {
      return NotActionable(record.id,
                           "cannot be retried: no handler is registered "
                           "for its type '" +
                               record.type + "'");
    }
    if (record.status != TaskStatus::kFailed &&
        record.status != TaskStatus::kCancelled) {
      return NotActionable(record.id,
                           std::string("is ") + TaskStatusName(record.status) +
                               "; only failed or cancelled tasks can be "
                               "retried");
    }
    if (!record.stored_dedup_key.empty()) {
      TaskId holder = 0;
      std::optional<StateRecord> ignored;
      Status s =
          HolderOf(record.stored_dedup_key, NowMicros(), &holder, &ignored);
      if (!s.ok()) return s;
      if (holder != 0 && holder != record.id) {
        return NotActionable(record.id, "cannot be retried: task " +
                                            std::to_string(holder) +
                                            " holds its dedup key");
      }
    }
    DependencyVerdict verdict =
        JudgeInBatch(record.depends_on, record.on_dependency_failure);
    if (verdict.kind == DependencyVerdict::Kind::kCancel ||
        verdict.kind == DependencyVerdict::Kind::kFail) {
      return NotActionable(record.id, "cannot be retried: " + verdict.reason);
    }
    int64_t now = NowMicros();
    PrepareManualRetry(&record, command.retry, now);
    ApplyVerdict(&record, verdict, now);
    TaskId id = record.id;
    txn().Update(std::move(record));
    if (EventsWanted()) NoteStoredKeys(id);
    return ControlResult{};
  }

  // For the enqueued event of a task retried by hand: its keys, from its
  // spec (the state holds the dedup key only in stored form). A spec that
  // cannot be read leaves them empty; the retry goes on.
  void NoteStoredKeys(TaskId id) {
    std::string bytes;
    storage::SpecRecord spec;
    if (!config.store->GetSpec(id, &bytes).ok() ||
        !storage::DecodeSpec(id, bytes, &spec).ok()) {
      return;
    }
    batch.enqueued[id] =
        Batch::Enqueued{spec.dedup_key, spec.idempotency_key, 0};
  }

  // Puts the progress of a handed-off task on the board. Writes nothing;
  // decided here, against the state as this batch sees it, so that a
  // report never lands after the commit that ended the hand-off.
  Result<ControlResult> ReportProgress(const ControlCommand& command,
                                       const StateRecord& record) {
    if (record.status != TaskStatus::kRunning) {
      return NotActionable(record.id,
                           std::string("is ") + TaskStatusName(record.status) +
                               ", not running and handed off: progress is "
                               "reported for a handed-off task only");
    }
    if (record.handoff_reference.empty()) {
      return NotActionable(record.id,
                           "is running in its handler, not handed off: its "
                           "handler reports through "
                           "TaskContext::ReportProgress");
    }
    if (!config.progress) {
      return Status::FailedPrecondition("progress is not kept");
    }
    config.progress->Set(record.id, command.progress);
    external_progress.insert(record.id);
    return ControlResult{};
  }

  // After a commit: forgets the progress of tasks whose hand-off ended.
  void ClearEndedProgress(const Batch& committed) {
    if (external_progress.empty() || !committed.txn) return;
    for (const auto& [id, entry] : committed.txn->entries()) {
      if (external_progress.count(id) == 0) continue;
      const auto& after = entry.after;
      if (after && after->status == TaskStatus::kRunning &&
          !after->handoff_reference.empty()) {
        continue;
      }
      config.progress->Clear(id);
      external_progress.erase(id);
    }
  }

  // Deletes a finished task that no waiting task depends on.
  Result<ControlResult> Delete(const StateRecord& record) {
    if (IsActive(record)) {
      return NotActionable(record.id,
                           std::string("is ") + TaskStatusName(record.status) +
                               "; only finished tasks can be deleted");
    }
    Result<TaskId> waiter = FirstWaiter(record.id);
    if (!waiter.ok()) return waiter.status();
    if (*waiter != 0) {
      return NotActionable(record.id, "is a dependency of waiting task " +
                                          std::to_string(*waiter));
    }
    txn().Delete(record.id);
    return ControlResult{};
  }

  // Parks a queued or waiting task; a held one stays held.
  // Writes who leases a running attempt (a remote worker), unless the task
  // is no longer in that attempt: a late lease record must not mark a
  // newer attempt.
  Result<ControlResult> RecordLease(const ControlCommand& command,
                                    StateRecord record) {
    if (record.status != TaskStatus::kRunning ||
        record.attempts != command.lease_attempt) {
      return ControlResult{};
    }
    record.lease_node = command.text;
    record.lease_deadline_us = command.lease_deadline_us;
    txn().Update(std::move(record));
    return ControlResult{};
  }

  Result<ControlResult> Hold(StateRecord record) {
    if (record.status == TaskStatus::kHeld) return ControlResult{};
    if (record.status != TaskStatus::kPending &&
        record.status != TaskStatus::kRetryScheduled &&
        record.status != TaskStatus::kWaiting) {
      return NotActionable(record.id, std::string("is ") +
                                          TaskStatusName(record.status) +
                                          "; only queued or waiting "
                                          "tasks can be held");
    }
    HoldTask(&record, NowMicros());
    txn().Update(std::move(record));
    return ControlResult{};
  }

  // Returns a held task to where its dependencies put it. (A task set aside
  // never gets here: ApplyControl reinstates it first.)
  Result<ControlResult> Release(StateRecord record) {
    if (record.status != TaskStatus::kHeld) {
      return NotActionable(
          record.id,
          std::string("is ") + TaskStatusName(record.status) + ", not held");
    }
    StateRecord before = record;
    ApplyVerdict(&record,
                 JudgeInBatch(record.depends_on, record.on_dependency_failure),
                 NowMicros());
    Stage(before, std::move(record));
    return ControlResult{};
  }

  // CompleteHandOff, FailHandOff: the attempt of a task handed off with the
  // command's reference ends, as a worker's outcome would end it.
  Result<ControlResult> FinishHandOff(const ControlCommand& command,
                                      StateRecord record) {
    if (record.status != TaskStatus::kRunning ||
        record.handoff_reference.empty() ||
        record.handoff_reference != command.text) {
      return NotActionable(
          record.id, "is not handed off with reference '" + command.text + "'");
    }
    Outcome outcome;
    outcome.id = record.id;
    outcome.attempt = record.attempts;
    if (command.kind == ControlCommand::Kind::kFailHandOff) {
      outcome.status = Status::Aborted(command.error);
    }
    StateRecord before = record;
    Settle(&record, outcome, NowMicros(), UnitRandom());
    Stage(before, std::move(record));
    return ControlResult{};
  }

  // Cancels one task as Cancel describes; returns its status afterwards.
  TaskStatus CancelTask(StateRecord* record) {
    if (!IsActive(*record)) return record->status;
    StateRecord before = *record;
    int64_t now = NowMicros();
    if (record->status == TaskStatus::kRunning &&
        record->handoff_reference.empty()) {
      if (!record->cancel_requested) {
        record->cancel_requested = true;
        record->updated_us = now;
        txn().Update(*record);
        batch.cancel_requested.push_back(record->id);
      }
      return TaskStatus::kRunning;
    }
    CancelNow(record, "cancelled", now);
    Stage(before, *record);
    return TaskStatus::kCancelled;
  }

  Result<ControlResult> CancelGroup(const std::string& group) {
    std::vector<TaskId> members;
    Status s = txn().ScanIndex(
        storage::GroupIndexPrefix(config.store->StoredGroup(group)), "",
        [&](std::string_view key, std::string_view value) {
          TaskId id = 0;
          if (value.size() == 1 &&
              !IsTerminal(static_cast<TaskStatus>(value[0])) &&
              storage::DecodeTrailingId(key, &id)) {
            members.push_back(id);
          }
          return true;
        });
    if (!s.ok()) return s;
    ControlResult result;
    for (TaskId id : members) {
      StateRecord record;
      // An earlier cancellation's cascade may have ended it already.
      if (!Load(id, {}, &record).ok() || !IsActive(record)) continue;
      CancelTask(&record);
      ++result.count;
    }
    return result;
  }

  // The first task waiting for `id`, or 0.
  Result<TaskId> FirstWaiter(TaskId id) {
    TaskId waiter = 0;
    Status s = txn().ScanIndex(storage::WaitingIndexPrefix(id), "",
                               [&](std::string_view key, std::string_view) {
                                 storage::DecodeTrailingId(key, &waiter);
                                 return false;
                               });
    if (!s.ok()) return s;
    return waiter;
  }

  // The status-index ranges a purge walks, in key order: each purged
  // status, or, with types given, each of those types within it.
  static std::vector<std::string> PurgeRanges(const ControlCommand& command) {
    std::vector<std::string> types = command.purge_types;
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    std::vector<std::string> ranges;
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      if ((command.purge_statuses & (1u << i)) == 0) continue;
      auto status = static_cast<TaskStatus>(i);
      if (types.empty()) ranges.push_back(storage::StatusIndexPrefix(status));
      for (const std::string& type : types) {
        ranges.push_back(storage::StatusIndexPrefix(status, type));
      }
    }
    std::sort(ranges.begin(), ranges.end());
    return ranges;
  }

  // Whether a purge step may delete this task, as far as its own state
  // tells: finished, of a purged status and kind, old enough, and not
  // holding a reservation of its dedup key (unique_for).
  static bool Purgeable(const ControlCommand& command,
                        const StateRecord& record, int64_t now) {
    using FailedTasks = ControlCommand::FailedTasks;
    if (IsActive(record) ||
        (command.purge_statuses &
         (1u << static_cast<unsigned>(record.status))) == 0 ||
        record.updated_us > command.purge_updated_before_us ||
        storage::HoldsReservation(record, now)) {
      return false;
    }
    if (record.status != TaskStatus::kFailed ||
        command.purge_failed == FailedTasks::kAll) {
      return true;
    }
    bool out_of_attempts = record.attempts >= record.max_attempts;
    return out_of_attempts ==
           (command.purge_failed == FailedTasks::kOutOfAttempts);
  }

  // Examines up to purge_step index entries from the cursor and deletes the
  // finished tasks among them that are old enough and needed by no waiting
  // task.
  Result<ControlResult> PurgeStep(const ControlCommand& command) {
    ControlResult result;
    size_t examined = 0;
    const std::string& cursor = command.purge_cursor_key;
    for (const std::string& range : PurgeRanges(command)) {
      std::string end = storage::PrefixSuccessor(range);
      if (!cursor.empty() && !end.empty() && end <= cursor) continue;
      std::string start = cursor > range ? cursor : range;
      std::vector<TaskId> candidates;
      std::string last_key;
      Status s = txn().ScanIndex(range, start,
                                 [&](std::string_view key, std::string_view) {
                                   TaskId id = 0;
                                   if (storage::DecodeTrailingId(key, &id)) {
                                     candidates.push_back(id);
                                   }
                                   last_key.assign(key);
                                   return ++examined < command.purge_step;
                                 });
      if (!s.ok()) return s;
      int64_t now = NowMicros();
      for (TaskId id : candidates) {
        StateRecord record;
        // A state may have moved on since its index entry was read. One
        // that cannot be read is left where it is: a purge (or retention)
        // that only looks at it must not set it aside, as the queue does
        // when it uses the task.
        Status read = txn().GetState(id, &record);
        if (!read.ok() && !read.IsNotFound() && !read.IsCorruption()) {
          Abort(read.WithContext("reading task " + std::to_string(id)));
        }
        if (!read.ok() || !Purgeable(command, record, now)) continue;
        Result<TaskId> waiter = FirstWaiter(id);
        if (!waiter.ok()) return waiter.status();
        if (*waiter != 0) continue;
        txn().Delete(id);
        ++result.count;
      }
      if (examined >= command.purge_step) {
        result.more = true;
        // The smallest key after the last one examined.
        result.cursor_key = last_key + '\0';
        return result;
      }
    }
    return result;
  }

  // ---- Encryption at rest ----

  // The values of task `id` in `family` (kTasks or kCorrupt), opened, and
  // whether they could be: NotFound when the family has none.
  Status ReadStored(ColumnFamily family, TaskId id, storage::TaskBytes* task,
                    Status* opened) {
    bool found = false;
    Status s = config.store->ScanTasks(
        family, id,
        [&](TaskId found_id, storage::TaskBytes& values, const Status& o) {
          if (found_id != id) return false;
          found = true;
          *task = std::move(values);
          *opened = o;
          return false;
        });
    if (!s.ok()) return s;
    if (!found) return Status::NotFound("task " + std::to_string(id));
    return Status::OK();
  }

  // Seals up to purge_step tasks of one family again with the current key,
  // every value in place. A task with a value no configured key opens is
  // left as it is and reported; the queue sets it aside when it next uses
  // it.
  Result<ControlResult> ReencryptStep(const ControlCommand& command) {
    txn();  // every batch has a transaction, even one that changes nothing
    ControlResult result;
    std::vector<TaskId> stale;
    TaskId last = 0;
    bool more = false;
    bool set_aside = command.reencrypt_family == ColumnFamily::kCorrupt;
    Status s = config.store->FindStale(
        command.reencrypt_family, command.reencrypt_after, command.purge_step,
        &stale, &last, &more);
    if (!s.ok()) return s;
    for (TaskId id : stale) {
      storage::TaskBytes task;
      Status opened;
      s = ReadStored(command.reencrypt_family, id, &task, &opened);
      if (s.IsNotFound()) continue;  // deleted or released meanwhile
      if (!s.ok()) return s;
      if (!opened.ok()) {
        result.unreadable.push_back(id);
        continue;
      }
      txn().Reseal(id, set_aside);
      if (set_aside) {
        ++result.resealed_set_aside;
      } else {
        ++result.count;
      }
    }
    result.more = more;
    result.cursor_id = last;
    return result;
  }

  // Release of a task set aside in `corrupt`: when its values can be read
  // now (its key is configured again), returns it to `tasks` and to where
  // it belongs: a queued task to the queue, a held or waiting one as
  // Release and its dependencies decide, a running one (its attempt's fate
  // unknown) as a crash leaves it: the attempt counts as interrupted.
  // Returns false when the task is not set aside (Release goes on as
  // usual), FailedPrecondition when it still cannot be read or another
  // active task took its dedup key meanwhile.
  Result<bool> ReinstateSetAside(TaskId id) {
    StateRecord probe;
    Status s = txn().GetState(id, &probe);
    if (!s.IsNotFound()) return false;
    storage::TaskBytes task;
    Status opened;
    s = ReadStored(ColumnFamily::kCorrupt, id, &task, &opened);
    if (s.IsNotFound()) return false;
    if (!s.ok()) return s;
    StateRecord record;
    s = opened;
    if (s.ok()) s = task.Verify(id);
    if (s.ok()) s = storage::DecodeState(id, task.state(), &record);
    if (!s.ok()) {
      return NotActionable(
          id, "is set aside and still cannot be read (" + s.message() + ")");
    }
    if ((IsActive(record) || record.unique_for_us > 0) &&
        !record.stored_dedup_key.empty()) {
      TaskId holder = 0;
      std::optional<StateRecord> ignored;
      s = HolderOf(record.stored_dedup_key, NowMicros(), &holder, &ignored);
      // A malformed entry names no holder: it does not stop the return.
      if (!s.ok() && !s.IsCorruption()) return s;
      if (holder != 0 && holder != id && IsActive(record)) {
        return NotActionable(id, "cannot return from being set aside: task " +
                                     std::to_string(holder) +
                                     " holds its dedup key now");
      }
      // A finished task gives up a reservation another task took over.
      if (holder != 0 && holder != id) record.unique_for_us = 0;
    }
    StateRecord as_stored = record;
    int64_t now = NowMicros();
    switch (record.status) {
      case TaskStatus::kRunning:
        if (record.handoff_reference.empty()) {
          Interrupt(&record, now, UnitRandom());
        }
        break;
      case TaskStatus::kHeld:
      case TaskStatus::kWaiting:
        ApplyVerdict(
            &record,
            JudgeInBatch(record.depends_on, record.on_dependency_failure), now);
        break;
      default:
        break;
    }
    bool finished = !IsActive(record);
    log->warn("task {} is readable again and returns from being set aside", id);
    txn().Reinstate(std::move(record), std::move(as_stored));
    if (finished) SettleWaiters(id);
    return true;
  }

  // ---- After a commit ----

  QueueChanges ChangesOf(const Batch& committed) const {
    QueueChanges changes;
    for (const auto& [id, entry] : committed.txn->entries()) {
      bool was_queued = entry.before && IsQueued(*entry.before);
      if (entry.after && IsQueued(*entry.after)) {
        QueueEntry now_entry = QueueEntryOf(*entry.after);
        if (!was_queued || !SameEntry(QueueEntryOf(*entry.before), now_entry)) {
          changes.queued.push_back(std::move(now_entry));
        }
      } else if (was_queued && committed.claimed.count(id) == 0) {
        changes.dequeued.push_back(id);
      }
    }
    // In the order the scheduler asked for them: its order of priority.
    for (const QueueEntry& asked : committed.claims) {
      if (committed.claimed.count(asked.id) == 0) continue;
      const auto& entry = committed.txn->entries().at(asked.id);
      if (!entry.after || entry.after->status != TaskStatus::kRunning) continue;
      const StateRecord& claimed = *entry.after;
      changes.claimed.push_back(ClaimedTask{
          asked.id, claimed.attempts, claimed.max_attempts, claimed.priority,
          claimed.timeout_us, claimed.type, claimed.stored_group, nullptr,
          storage::StartLog::kNoSlot, claimed.last_error == kInterruptedError,
          claimed.snoozes, claimed.depends_on});
    }
    changes.refused = committed.refused;
    changes.settled = committed.outcomes.size();
    for (const Outcome& outcome : committed.outcomes) {
      if (outcome.start_slot != storage::StartLog::kNoSlot) {
        changes.released_slots.push_back(outcome.start_slot);
      }
    }
    changes.cancel_requested = committed.cancel_requested;
    return changes;
  }

  QueueChanges FailedChangesOf(Batch& failed, const Status& error) const {
    QueueChanges changes;
    changes.write_status = error;
    changes.claim_failed = std::move(failed.claims);
    changes.unsettled = std::move(failed.outcomes);
    return changes;
  }

  ChangeSet ChangeSetOf(const Batch& committed) const {
    ChangeSet changes;
    std::unordered_set<std::string> types;
    std::unordered_set<std::string> groups;
    auto note = [&](const StateRecord& record) {
      changes.statuses |= 1u << static_cast<unsigned>(record.status);
      if (types.insert(record.type).second)
        changes.types.push_back(record.type);
      if (!record.stored_group.empty() &&
          groups.insert(record.stored_group).second) {
        changes.groups.push_back(record.stored_group);
      }
    };
    for (const auto& [id, entry] : committed.txn->entries()) {
      changes.ids.push_back(id);
      if (entry.before) note(*entry.before);
      if (entry.after) note(*entry.after);
    }
    return changes;
  }

  // An enqueued event's keys and run-at time, as the batch noted them.
  static void AddEnqueuedFields(const Batch& committed, TaskEvent* event) {
    auto it = committed.enqueued.find(event->id);
    if (it == committed.enqueued.end()) return;
    event->dedup_key = it->second.dedup_key;
    event->idempotency_key = it->second.idempotency_key;
    if (it->second.run_at_us != 0) {
      event->run_at = Timestamp(Duration(it->second.run_at_us));
    }
  }

  // The lifecycle events of a committed batch, in the order its changes
  // were staged (a cause before its cascade).
  std::vector<TaskEvent> EventsOf(const Batch& committed) const {
    std::vector<TaskEvent> events;
    Timestamp at = std::chrono::time_point_cast<Duration>(config.clock->Now());
    for (TaskId id : committed.txn->order()) {
      const auto& entry = committed.txn->entries().at(id);
      if (!entry.after) continue;
      const StateRecord& after = *entry.after;
      std::optional<TaskStatus> before;
      if (entry.before) before = entry.before->status;
      if (before == after.status) continue;
      TaskEvent event;
      event.id = id;
      event.type = after.type;
      event.attempt = after.attempts;
      event.max_attempts = after.max_attempts;
      event.at = at;
      if (after.next_attempt_us != 0) {
        event.next_attempt_at = Timestamp(Duration(after.next_attempt_us));
      }
      auto deferral = committed.deferrals.find(id);
      bool deferred = before == TaskStatus::kRunning &&
                      deferral != committed.deferrals.end();
      if (deferred) {
        event.defer_reason = deferral->second.first;
        event.gate = deferral->second.second;
      }
      switch (after.status) {
        case TaskStatus::kPending:
        case TaskStatus::kWaiting:
          if (before == TaskStatus::kRunning) {
            event.kind = TaskEvent::Kind::kDeferred;
            break;
          }
          // New, retried by hand, or released; not a retry after a failure.
          if (before && *before != TaskStatus::kFailed &&
              *before != TaskStatus::kCancelled) {
            continue;
          }
          event.kind = TaskEvent::Kind::kEnqueued;
          break;
        case TaskStatus::kRunning:
          event.kind = TaskEvent::Kind::kStarted;
          break;
        case TaskStatus::kRetryScheduled:
          if (deferred) {
            // Given back unstarted after an earlier failure: no attempt
            // failed now.
            event.kind = TaskEvent::Kind::kDeferred;
            break;
          }
          event.kind = TaskEvent::Kind::kRetryScheduled;
          event.error = after.last_error;
          break;
        case TaskStatus::kSucceeded:
          event.kind = TaskEvent::Kind::kSucceeded;
          break;
        case TaskStatus::kFailed:
          event.kind = TaskEvent::Kind::kFailed;
          event.error = after.last_error;
          break;
        case TaskStatus::kCancelled:
          event.kind = TaskEvent::Kind::kCancelled;
          event.error = after.last_error;
          event.was_running = before == TaskStatus::kRunning;
          break;
        case TaskStatus::kHeld:
          continue;
      }
      if (event.kind == TaskEvent::Kind::kEnqueued ||
          (!before && IsTerminal(after.status))) {
        AddEnqueuedFields(committed, &event);
      }
      if (!before && IsTerminal(after.status)) {
        // Born finished (a dependency had failed): it was still enqueued.
        TaskEvent enqueued = event;
        enqueued.kind = TaskEvent::Kind::kEnqueued;
        enqueued.error.clear();
        events.push_back(std::move(enqueued));
        event.dedup_key.clear();
        event.idempotency_key.clear();
        event.run_at.reset();
      }
      if (committed.timed_out.count(id) != 0) {
        TaskEvent timed_out = event;
        timed_out.kind = TaskEvent::Kind::kTimedOut;
        timed_out.next_attempt_at.reset();
        events.push_back(std::move(timed_out));
      }
      events.push_back(std::move(event));
    }
    return events;
  }
};

using Self = writer_actor::stateful_pointer<WriterState>;

constexpr auto kReopenInterval = std::chrono::milliseconds(50);

// Reopens the store after a failure. RocksDB refuses every write after a
// WAL write or sync error until then, and a retry on the same instance can
// even trip an assertion (storage/fault_env_test.cc).
Status ReopenStore(WriterState& st) {
  st.last_reopen = std::chrono::steady_clock::now();
  Status s = st.config.store->Reopen();
  st.store_closed = !s.ok();
  if (s.ok()) {
    st.log->warn("storage reopened after a write failure");
  } else {
    st.log->error("reopening storage after a write failure failed: {}",
                  s.ToString());
  }
  return s;
}

// With standbys, hands the staged batch to the replication log just before
// the store writes and syncs it, so that the standbys' syncs run beside
// ours: a commit waits for the longer of the two, not their sum
// (docs/replication.md, "Shipping before the sync"). A new log first when
// something was written around the commits since the last one.
storage::TaskStore::BeforeWrite ShipHook(WriterState& st) {
  if (!st.config.replication) return nullptr;
  return [&st](std::string_view data) {
    storage::TaskStore& store = *st.config.store;
    uint64_t position = store.committed_batches() + 1;
    if (store.side_writes() != st.side_writes_logged) {
      st.side_writes_logged = store.side_writes();
      st.config.replication->StartOver(position - 1);
    }
    st.config.replication->Append(position, std::string(data));
    st.shipped_unwritten = true;
  };
}

// The commit shipped last failed here: standbys may hold it, this disk may
// not, and the next commit takes its position. Every standby copies a new
// base, and no acknowledgement of it counts.
void RetractShipped(WriterState& st) {
  uint64_t last = st.config.store->committed_batches();
  st.log->warn(
      "commit {} reached the standbys but not this disk: they copy a new "
      "base",
      last + 1);
  st.retracted_logs.emplace_back(st.config.replication->log_id(), last);
  if (st.retracted_logs.size() > 16) st.retracted_logs.pop_front();
  st.config.replication->Retract(last);
  if (st.acks) st.acks->Rewind(last);
}

// Whether an acknowledgement of `position` in log `log_id` counts: not
// when it reaches past where that log was retracted.
bool AckCounts(const WriterState& st, uint64_t log_id, uint64_t position) {
  for (const auto& [retracted, after] : st.retracted_logs) {
    if (retracted == log_id && position > after) return false;
  }
  return true;
}

// Commits the batch; after an I/O error, reopens the store and tells from
// the stored batch number whether the batch reached the disk anyway (its
// write landed, then the sync failed).
// Sets *operation to what failed: "reopen" or "commit".
Status CommitToStore(WriterState& st, storage::WriteTxn* txn,
                     const char** operation) {
  *operation = "reopen";
  if (st.store_closed) {
    if (std::chrono::steady_clock::now() - st.last_reopen < kReopenInterval) {
      return Status::IOError(
          "storage is closed after a write failure; "
          "reopening it is being retried");
    }
    Status s = ReopenStore(st);
    if (!s.ok())
      return s.WithContext("storage is closed after a write failure");
  }
  *operation = "commit";
  uint64_t before = st.config.store->committed_batches();
  Status status = st.config.store->Commit(txn, ShipHook(st));
  if (!status.IsIOError()) return status;
  Status reopened = ReopenStore(st);
  if (!reopened.ok()) {
    return status.WithContext("and reopening storage failed (" +
                              reopened.ToString() + ")");
  }
  if (st.config.store->committed_batches() == before + 1) {
    // The batch was in the log; reopening replayed it and flushed it to a
    // synced table file. A flush makes sure of that before anyone is told.
    Status flushed = st.config.store->Flush();
    if (!flushed.ok()) return status;
    st.log->warn("a commit reported an error but reached the disk: {}",
                 status.ToString());
    return Status::OK();
  }
  return status;
}

// Counts a commit into the writer's statistics, with the thread's CPU time
// so far.
void CountCommit(WriterState& st, const Batch& batch) {
  WriterStats* stats = st.config.stats.get();
  if (stats == nullptr) return;
  size_t changed = batch.txn ? batch.txn->entries().size() : 0;
  stats->commits.fetch_add(1, std::memory_order_relaxed);
  stats->tasks_changed.fetch_add(changed, std::memory_order_relaxed);
  stats->commit_sizes[WriterStats::BucketOf(changed)].fetch_add(
      1, std::memory_order_relaxed);
  stats->outcomes.fetch_add(batch.outcomes.size(), std::memory_order_relaxed);
  stats->claims.fetch_add(batch.claims.size(), std::memory_order_relaxed);
  timespec cpu;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) {
    stats->cpu_ns.store(uint64_t(cpu.tv_sec) * 1000000000u + cpu.tv_nsec,
                        std::memory_order_relaxed);
  }
}

// Publishes a committed batch into the metrics: the counters of the status
// moves it made, its size and times, and the counts of every status and of
// each type it touched. One pass over the batch's changes, then one relaxed
// add per counter.
void PublishMetrics(WriterState& st, const Batch& batch, uint64_t commit_ns) {
  metrics::Metrics* m = st.config.metrics.get();
  if (m == nullptr || !batch.txn || batch.txn->entries().empty()) return;
  const storage::TaskStore& store = *st.config.store;
  uint64_t stored = 0, claimed = 0, succeeded = 0, failed = 0, retried = 0,
           dead = 0, cancelled = 0;
  std::vector<const std::string*> types;
  auto note_type = [&types](const std::string& type) {
    for (const std::string* t : types) {
      if (*t == type) return;
    }
    types.push_back(&type);
  };
  for (const auto& [id, entry] : batch.txn->entries()) {
    if (entry.before) note_type(entry.before->type);
    if (!entry.after) continue;
    const StateRecord& after = *entry.after;
    note_type(after.type);
    std::optional<TaskStatus> before;
    if (entry.before) before = entry.before->status;
    if (!before) ++stored;
    if (before == after.status) continue;
    bool was_running = before == TaskStatus::kRunning;
    switch (after.status) {
      case TaskStatus::kRunning:
        ++claimed;
        break;
      case TaskStatus::kRetryScheduled:
        if (was_running) ++failed, ++retried;
        break;
      case TaskStatus::kSucceeded:
        ++succeeded;
        break;
      case TaskStatus::kFailed:
        ++dead;
        if (was_running) ++failed;
        break;
      case TaskStatus::kCancelled:
        ++cancelled;
        break;
      default:
        break;
    }
  }
  auto add = [](std::atomic<uint64_t>& counter, uint64_t n) {
    if (n != 0) counter.fetch_add(n, std::memory_order_relaxed);
  };
  add(m->stored, stored);
  add(m->claimed, claimed);
  add(m->succeeded, succeeded);
  add(m->failed, failed);
  add(m->retried, retried);
  add(m->dead, dead);
  add(m->cancelled, cancelled);
  m->commit_batch.Record(batch.txn->entries().size());
  m->commit_latency.Record(commit_ns);
  if (store.times_wal()) m->sync_latency.Record(store.last_commit_wal_nanos());
  for (size_t i = 0; i < kTaskStatusCount; ++i) {
    m->tasks[i].store(store.CountOf(static_cast<TaskStatus>(i)),
                      std::memory_order_relaxed);
  }
  if (!st.slots) st.slots = std::make_unique<metrics::SlotCache>(m);
  const storage::TypeCounts& counts = store.type_counts();
  for (const std::string* type : types) {
    metrics::TypeSlot* slot = st.slots->Get(*type);
    auto it = counts.find(*type);
    for (size_t i = 0; i < kTaskStatusCount; ++i) {
      slot->tasks[i].store(it == counts.end() ? 0 : it->second[i],
                           std::memory_order_relaxed);
    }
  }
}

// Counts a commit's fate into the storage health figures, and reports a
// failure, or the first success after failures (spool/storage_health.h).
void ReportHealth(WriterState& st, const Status& status,
                  const char* operation) {
  if (status.ok() && st.consecutive_failures == 0) return;
  StorageHealthEvent event;
  event.time = std::chrono::time_point_cast<std::chrono::microseconds>(
      st.config.clock->Now());
  metrics::Metrics* m = st.config.metrics.get();
  if (status.ok()) {
    event.kind = StorageHealthEvent::Kind::kRecovery;
    event.operation = "commit";
    event.consecutive_failures = st.consecutive_failures;
    st.consecutive_failures = 0;
    if (m != nullptr) m->storage_recoveries.fetch_add(1);
  } else {
    event.kind = StorageHealthEvent::Kind::kFailure;
    event.operation = operation;
    event.error = status;
    event.consecutive_failures = ++st.consecutive_failures;
    if (m != nullptr) m->storage_failures.fetch_add(1);
  }
  if (m != nullptr) m->storage_consecutive_failures = st.consecutive_failures;
  if (st.config.on_storage_health) {
    st.config.on_storage_health(std::move(event));
  }
}

// OK, or the fence's refusal once a clustered primary's lease lapsed.
Status FenceStatus(const WriterState& st) {
  return st.config.fence ? st.config.fence->Check() : Status::OK();
}

void ScheduleAckCheck(Self self, AckWaiters::TimePoint deadline) {
  auto& st = self->state;
  if (st.ack_check_scheduled) return;
  st.ack_check_scheduled = true;
  auto delay = std::max<AckWaiters::TimePoint::duration>(
      deadline - std::chrono::steady_clock::now(),
      AckWaiters::TimePoint::duration::zero());
  self->delayed_send(self, delay, ack_check_atom::value);
}

// Answers the batch's callers: at once, or, with standbys to wait for, once
// they acknowledged the commit (or at its deadline).
void Answer(Self self, Batch& batch, const Status& status) {
  auto& st = self->state;
  bool committed = status.ok() && batch.txn && !batch.txn->empty();
  for (auto& done : batch.local_done) done(status);
  if (!st.acks) {
    const Status fenced = status.ok() ? FenceStatus(st) : status;
    for (auto& done : batch.done) done(fenced);
    return;
  }
  if (!status.ok()) {
    // Nothing of it is stored: no standby will acknowledge it.
    for (auto& done : batch.done) done(status);
  } else if (committed) {
    if (batch.done.empty()) return;
    auto now = std::chrono::steady_clock::now();
    st.acks->Hold(st.config.store->committed_batches(), std::move(batch.done),
                  now);
    ScheduleAckCheck(self, now + st.config.ack_timeout);
  } else {
    st.acks->After(std::move(batch.done));
  }
}

// A clustered primary past its lease refuses an enqueue at once: it could
// never acknowledge it.
bool RefusedForLease(WriterState& st, EnqueueCommand& command) {
  if (FenceStatus(st).ok()) return false;
  command.done(Status::Busy(
      "this primary's leadership lease lapsed (it could not renew it in "
      "time); nothing was stored: send it to the new primary"));
  return true;
}

// Durability::kReplicated: refuses an enqueue at once while fewer standbys
// are connected than must acknowledge it, rather than storing it on one
// disk and failing its caller a timeout later.
bool RefusedForStandbys(WriterState& st, EnqueueCommand& command) {
  if (!st.acks) return false;
  uint32_t connected = st.config.replication->Connected();
  if (connected >= st.config.min_acks) return false;
  command.done(
      Status::Busy("replication: " + std::to_string(connected) + " of the " +
                   std::to_string(st.config.min_acks) +
                   " standby(s) that must acknowledge each commit "
                   "(replication.min_acks) are connected; nothing was stored"));
  return true;
}

void CommitBatch(Self self) {
  auto& st = self->state;
  Batch batch = std::move(st.batch);
  st.batch = Batch{};
  if (batch.commands == 0) return;

  Status status = batch.abort;
  auto started = std::chrono::steady_clock::now();
  if (status.ok() && batch.txn && !batch.txn->empty()) {
    if (st.config.before_commit) st.config.before_commit();
    started = std::chrono::steady_clock::now();
    const char* operation = "commit";
    st.shipped_unwritten = false;
    status = CommitToStore(st, batch.txn.get(), &operation);
    if (st.shipped_unwritten && !status.ok()) RetractShipped(st);
    st.shipped_unwritten = false;
    ReportHealth(st, status, operation);
  }
  uint64_t commit_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - started)
          .count());
  if (st.log->should_log(spdlog::level::debug)) {
    double ms = static_cast<double>(commit_ns) / 1e6;
    st.log->debug("commit: {} commands, {} tasks changed, {:.3f} ms, {}",
                  batch.commands,
                  batch.txn ? batch.txn->entries().size() : size_t{0}, ms,
                  status.ToString());
  }
  if (!status.ok()) {
    st.log->error("commit of {} commands failed: {}", batch.commands,
                  status.ToString());
  }

  // Metrics, then events, before anyone hears of this commit: a Drain
  // answered or a caller told finds it counted.
  if (status.ok()) PublishMetrics(st, batch, commit_ns);

  // Events next: whoever hears of this commit next (the scheduler, which
  // may answer a Drain, or a caller) must find its events already posted.
  bool changed = status.ok() && batch.txn && !batch.txn->entries().empty();
  if (changed) st.ClearEndedProgress(batch);
  if (changed && st.config.on_events &&
      (!st.config.events_wanted || st.config.events_wanted())) {
    std::vector<TaskEvent> events = st.EventsOf(batch);
    if (!events.empty()) st.config.on_events(std::move(events));
  }
  if (st.scheduler) {
    QueueChanges changes =
        status.ok() ? st.ChangesOf(batch) : st.FailedChangesOf(batch, status);
    self->send(st.scheduler, changes_atom::value, std::move(changes));
  }
  if (changed && st.change_listener &&
      (!st.config.live_queries || st.config.live_queries->load() > 0)) {
    self->send(st.change_listener, changed_atom::value, st.ChangeSetOf(batch));
  }
  Answer(self, batch, status);
  CountCommit(st, batch);
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
  NameThisThread("spool-writer");
  // Per thread; the writer's own, where every write and the transaction's
  // reads happen.
  storage::DisablePerfCountersOnThisThread();
  self->state.config = std::move(config);
  self->state.log = Logger();
  if (self->state.config.replication) {
    self->state.side_writes_logged = self->state.config.store->side_writes();
  }
  if (self->state.config.replication && self->state.config.min_acks > 0) {
    self->state.acks = std::make_unique<AckWaiters>(
        self->state.config.min_acks, self->state.config.ack_timeout,
        self->state.config.fence.get());
  }
  return {
      [self](enqueue_atom, EnqueueCommand& command) {
        // Refused before it is counted: nothing of it was taken.
        if (RefusedForLease(self->state, command)) return;
        if (RefusedForStandbys(self->state, command)) return;
        if (auto* stats = self->state.config.stats.get()) {
          stats->enqueued.fetch_add(command.tasks.size(),
                                    std::memory_order_relaxed);
        }
        if (auto* m = self->state.config.metrics.get()) {
          m->enqueued.fetch_add(command.tasks.size(),
                                std::memory_order_relaxed);
        }
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
      [self](control_atom, ControlCommand& command) {
        if (auto* stats = self->state.config.stats.get()) {
          stats->controls.fetch_add(1, std::memory_order_relaxed);
        }
        self->state.Control(command);
        Admit(self);
      },
      [self](meta_atom, MetaUpdate& update) {
        for (auto& [key, value] : update.values) {
          self->state.txn().PutMeta(std::move(key), std::move(value));
        }
        Admit(self);
      },
      [self](epoch_atom, uint64_t epoch, Completion& done) {
        if (self->state.BeginEpoch(epoch, done)) Admit(self);
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
      [self](replicated_atom, uint64_t log_id, uint64_t position) {
        auto& st = self->state;
        if (st.acks && AckCounts(st, log_id, position))
          st.acks->Acked(position);
      },
      [self](ack_check_atom) {
        auto& st = self->state;
        st.ack_check_scheduled = false;
        if (!st.acks) return;
        auto next = st.acks->Expire(std::chrono::steady_clock::now());
        if (next) ScheduleAckCheck(self, *next);
      },
  };
}

}  // namespace

writer_actor SpawnWriter(caf::actor_system& system, WriterConfig config) {
  return system.spawn<caf::detached>(WriterBehavior, std::move(config));
}

}  // namespace spool::actors
