#include "actors/recovery.h"

#include <caf/all.hpp>

namespace spool::actors {
namespace {

struct RecoveryState {
  static inline const char* name = "spool.recovery";
  const storage::TaskStore* store = nullptr;
  writer_actor writer;
  std::optional<RecoveryJob> job;
};

using Self = recovery_actor::stateful_pointer<RecoveryState>;

Result<std::vector<TaskId>> FindRunning(const storage::TaskStore& store) {
  std::vector<TaskId> running;
  Status s = store.ForEachIndexEntry(
      storage::ColumnFamily::kRunning,
      [&](std::string_view key, std::string_view) {
        TaskId id = 0;
        if (!storage::DecodeTaskKey(key, &id)) {
          return Status::Corruption("running index holds a malformed key");
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

recovery_actor::behavior_type RecoveryBehavior(Self self,
                                               const storage::TaskStore* store,
                                               writer_actor writer) {
  self->state.store = store;
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
        command.done = [me](const Result<size_t>& recovered) {
          caf::anon_send(me, commit_atom::value, recovered);
        };
        self->send(self->state.writer, recover_atom::value, std::move(command));
      },
      [self](commit_atom, const Result<size_t>& recovered) {
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
        result.interrupted = *recovered;
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
  if (s.ok()) s = load_times("periodic/", false, &result->periodic_slots);
  return s;
}

Result<std::vector<QueueEntry>> LoadQueue(const storage::TaskStore& store) {
  std::vector<QueueEntry> queue;
  Status s = store.ForEachIndexEntry(
      storage::ColumnFamily::kReady,
      [&](std::string_view key, std::string_view value) {
        storage::ReadyKey ready;
        storage::QueueValue queued;
        if (!storage::DecodeReadyKey(key, &ready) ||
            !storage::DecodeQueueValue(value, &queued)) {
          return Status::Corruption("ready index holds a malformed entry");
        }
        queue.push_back(QueueEntry{queued.id, ready.priority, ready.sequence, 0,
                                   std::string(queued.type),
                                   std::string(queued.group)});
        return Status::OK();
      });
  if (!s.ok()) return s;
  s = store.ForEachIndexEntry(
      storage::ColumnFamily::kScheduled,
      [&](std::string_view key, std::string_view value) {
        storage::ScheduledKey scheduled;
        storage::QueueValue queued;
        if (!storage::DecodeScheduledKey(key, &scheduled) ||
            !storage::DecodeQueueValue(value, &queued)) {
          return Status::Corruption("scheduled index holds a malformed entry");
        }
        queue.push_back(QueueEntry{
            queued.id, queued.priority, scheduled.sequence, scheduled.due_us,
            std::string(queued.type), std::string(queued.group)});
        return Status::OK();
      });
  if (!s.ok()) return s;
  return queue;
}

recovery_actor SpawnRecovery(caf::actor_system& system,
                             const storage::TaskStore* store,
                             writer_actor writer) {
  return system.spawn<caf::detached>(RecoveryBehavior, store,
                                     std::move(writer));
}

}  // namespace spool::actors
