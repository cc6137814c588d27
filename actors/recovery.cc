#include "actors/recovery.h"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/scheduler.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace spool::actors {
namespace {

struct RecoveryState {
  static inline const char* name = "spool.recovery";
  const storage::TaskStore* store = nullptr;
  const storage::StartLog* start_log = nullptr;
  writer_actor writer;
  std::optional<RecoveryJob> job;
};

using Self = recovery_actor::stateful_pointer<RecoveryState>;

Result<std::vector<TaskId>> FindRunning(const storage::TaskStore& store) {
  std::vector<TaskId> running;
  Status s = store.ForEachEntry(
      storage::ColumnFamily::kIndex,
      storage::StatusIndexPrefix(TaskStatus::kRunning),
      [&](std::string_view key, std::string_view) {
        TaskId id = 0;
        TaskStatus status;
        std::string_view type;
        if (!storage::DecodeStatusIndexKey(key, &status, &type, &id)) {
          return Status::Corruption("the status index holds a malformed key");
        }
        running.push_back(id);
        return Status::OK();
      });
  if (!s.ok()) return s;
  return running;
}

void Finish(Self self, const Result<RecoveryResult>& result) {
  if (self->state.job) self->state.job->done(result);
  self->state.job.reset();
  self->quit();
}

recovery_actor::behavior_type RecoveryBehavior(
    Self self, const storage::TaskStore* store,
    const storage::StartLog* start_log, writer_actor writer) {
  NameThisThread("spool-recovery");
  self->state.store = store;
  self->state.start_log = start_log;
  self->state.writer = std::move(writer);
  return {
      [self](recover_atom, RecoveryJob& job) {
        self->state.job = std::move(job);
        Result<std::vector<TaskId>> running = FindRunning(*self->state.store);
        if (!running.ok()) {
          Finish(self, running.status().WithContext("recovery"));
          return;
        }
        recovery_actor me = self;
        RecoverCommand command;
        command.running = std::move(running).value();
        const storage::StartLog* log = self->state.start_log;
        if (log != nullptr && log->previous_trusted()) {
          command.started = [log](TaskId id, uint32_t attempt) {
            return log->PreviouslyStarted(id, attempt);
          };
        }
        command.done = [me](const Result<Recovered>& recovered) {
          caf::anon_send(me, recovered_atom::value, recovered);
        };
        self->send(self->state.writer, recover_atom::value, std::move(command));
      },
      [self](recovered_atom, const Result<Recovered>& recovered) {
        if (!recovered.ok()) {
          Finish(self, recovered.status().WithContext("recovery"));
          return;
        }
        Result<std::vector<QueueEntry>> queue = LoadQueue(*self->state.store);
        if (!queue.ok()) {
          Finish(self, queue.status().WithContext("recovery"));
          return;
        }
        RecoveryResult result;
        result.interrupted = recovered->interrupted;
        result.unstarted = recovered->unstarted;
        result.queue = std::move(queue).value();
        Status s = LoadSchedulerState(*self->state.store, &result);
        if (!s.ok()) {
          Finish(self, s.WithContext("recovery"));
          return;
        }
        Finish(self, std::move(result));
      },
  };
}

// One stored control into `out`; false for an unknown kind.
bool ApplyControl(ControlKind kind, std::string_view name,
                  std::string_view value, StoredControls* out) {
  bool on = !value.empty() && value[0] != 0;
  switch (kind) {
    case ControlKind::kPaused:
      out->paused = on;
      return true;
    case ControlKind::kPausedType:
      if (on) out->paused_types.emplace(name);
      return true;
    case ControlKind::kClosedGate:
      if (on) out->closed_gates.emplace(name);
      return true;
    case ControlKind::kGroupLimit: {
      uint32_t limit = storage::GetBigEndian32(value.data());
      if (limit != 0) out->group_limits[std::string(name)] = limit;
      return true;
    }
  }
  return false;
}

// Reads the controls the scheduler stored (ControlKey). A damaged entry is
// skipped with a warning: the control it held is lost, the queue opens.
Status LoadControls(const storage::TaskStore& store, StoredControls* out) {
  return store.Scan(
      storage::ColumnFamily::kMeta, kControlPrefix, "",
      [out](std::string_view key, std::string_view value) {
        std::string_view rest = key.substr(kControlPrefix.size());
        std::string_view name;
        auto kind = rest.empty() ? ControlKind{} : ControlKind(rest[0]);
        if (!rest.empty()) rest.remove_prefix(1);
        bool flag = kind != ControlKind::kGroupLimit;
        if (!storage::GetKeyString(&rest, &name) || !rest.empty() ||
            value.size() != (flag ? 1u : 4u) ||
            !ApplyControl(kind, name, value, out)) {
          Logger()->warn(
              "a stored pause, gate or group limit is damaged and ignored");
        }
        return true;
      });
}

// Reads the named rate limits' stored buckets (RateBuckets::StateKey). A
// damaged entry is skipped: its bucket starts afresh.
Status LoadRateBuckets(
    const storage::TaskStore& store,
    std::vector<std::tuple<std::string, std::string, int64_t>>* out) {
  const std::string_view prefix = RateBuckets::kStatePrefix;
  return store.Scan(
      storage::ColumnFamily::kMeta, prefix, "",
      [&](std::string_view key, std::string_view value) {
        std::string_view rest = key.substr(prefix.size());
        std::string_view name, bucket;
        if (value.size() != 8 || !storage::GetKeyString(&rest, &name) ||
            !storage::GetKeyString(&rest, &bucket) || !rest.empty()) {
          Logger()->warn("a stored rate-limit bucket is damaged and ignored");
          return true;
        }
        out->emplace_back(
            std::string(name), std::string(bucket),
            storage::DecodeTime(storage::GetBigEndian64(value.data())));
        return true;
      });
}

}  // namespace

Status LoadSchedulerState(const storage::TaskStore& store,
                          RecoveryResult* result) {
  auto load_times = [&](std::string_view prefix, bool length_prefixed,
                        std::unordered_map<std::string, int64_t>* out) {
    return store.Scan(
        storage::ColumnFamily::kMeta, prefix, "",
        [&](std::string_view key, std::string_view value) {
          if (value.size() != 8) return true;
          std::string_view rest = key.substr(prefix.size());
          std::string_view name = rest;
          if (length_prefixed && !storage::GetKeyString(&rest, &name)) {
            return true;
          }
          (*out)[std::string(name)] =
              storage::DecodeTime(storage::GetBigEndian64(value.data()));
          return true;
        });
  };
  Status s = load_times("rate/", true, &result->rate_state);
  if (s.ok()) s = LoadRateBuckets(store, &result->rate_buckets);
  if (s.ok()) s = load_times("periodic/", false, &result->periodic_slots);
  if (s.ok()) s = LoadControls(store, &result->controls);
  return s;
}

Result<std::vector<QueueEntry>> LoadQueue(const storage::TaskStore& store) {
  std::vector<QueueEntry> queue;
  for (TaskStatus queued :
       {TaskStatus::kPending, TaskStatus::kRetryScheduled}) {
    Status s = store.ForEachEntry(
        storage::ColumnFamily::kIndex, storage::StatusIndexPrefix(queued),
        [&](std::string_view key, std::string_view value) {
          TaskId id = 0;
          TaskStatus status;
          std::string_view type;
          storage::QueueValue entry;
          if (!storage::DecodeStatusIndexKey(key, &status, &type, &id) ||
              !storage::DecodeQueueValue(value, &entry)) {
            return Status::Corruption(
                "the status index holds a malformed queue entry");
          }
          queue.push_back(QueueEntry{id, entry.priority, entry.sequence,
                                     entry.due_us, std::string(type),
                                     std::string(entry.group)});
          return Status::OK();
        });
    if (!s.ok()) return s;
  }
  return queue;
}

recovery_actor SpawnRecovery(caf::actor_system& system,
                             const storage::TaskStore* store,
                             const storage::StartLog* start_log,
                             writer_actor writer) {
  return system.spawn<caf::detached>(RecoveryBehavior, store, start_log,
                                     std::move(writer));
}

}  // namespace spool::actors
