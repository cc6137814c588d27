#include "actors/worker.h"

#include <chrono>

#include <caf/all.hpp>

#include "storage/queries.h"
#include "storage/task_record_generated.h"
#include "util/thread_name.h"

namespace spool::actors {

namespace {

// Handles live in the state, not in the behavior's closures: CAF destroys
// the state when the actor exits, which breaks the reference cycle with the
// scheduler so that both can be destroyed.
struct WorkerState {
  static inline const char* name = "spool.worker";
  WorkerConfig config;
  // The task's spec as read; reused from task to task.
  std::string spec;
  // The metrics slots of the types this worker ran (null without metrics).
  std::unique_ptr<metrics::SlotCache> slots;
  // How the running task's dependencies ended; reused from task to task.
  std::vector<DependencyOutcome> dependencies;
};

// Reads how each of the task's dependencies ended, from their committed
// states: a dependent runs only after its dependencies' outcomes are
// durable. Tasks without dependencies read nothing.
AttemptInputs InputsFor(WorkerState& st, const ClaimedTask& task) {
  AttemptInputs inputs{st.config.max_result_bytes, st.config.max_snoozes,
                       nullptr, st.config.rate_buckets.get()};
  if (task.depends_on.empty()) return inputs;
  st.dependencies.clear();
  for (TaskId id : task.depends_on) {
    DependencyOutcome& dep = st.dependencies.emplace_back();
    dep.id = id;
    storage::StateRecord state;
    if (!st.config.store->ReadState(id, &state).ok()) continue;
    dep.status = state.status;
    dep.result = std::move(state.result);
    dep.last_error = std::move(state.last_error);
  }
  inputs.dependencies = &st.dependencies;
  return inputs;
}

Outcome Unstarted(const ClaimedTask& task) {
  Outcome outcome;
  outcome.id = task.id;
  outcome.attempt = task.attempt;
  outcome.started = false;
  return outcome;
}

// Reads the task's spec, records the start and runs the attempt. A task
// cancelled while it waited in the pool does not start; a spec that cannot
// be read runs nothing, and the writer sets the task aside.
Outcome Run(WorkerState& st, const ClaimedTask& task) {
  internal::AttemptControl* control = task.control.get();
  if (control != nullptr && control->cancelled()) return Unstarted(task);
  const storage::fb::TaskSpec* spec = nullptr;
  Status s = st.config.store->GetSpec(task.id, &st.spec);
  if (s.ok()) s = storage::VerifySpec(task.id, st.spec, &spec);
  if (!s.ok()) {
    Outcome outcome = Unstarted(task);
    outcome.status = s.WithContext("reading the task to run it");
    outcome.unreadable = true;
    return outcome;
  }
  if (st.config.start_log != nullptr &&
      task.start_slot != storage::StartLog::kNoSlot) {
    st.config.start_log->Record(task.start_slot, task.id, task.attempt);
  }
  AttemptInputs inputs = InputsFor(st, task);
  int64_t now_us = st.config.clock->Now().time_since_epoch().count();
  if (control != nullptr) control->MarkStarted(now_us);
  metrics::Metrics* m = st.config.metrics.get();
  if (m == nullptr)
    return RunAttempt(*st.config.registry, task, *spec, control, inputs);
  if (task.attempt == 1) {
    int64_t waited_us = now_us - spec->created_us();
    m->start_latency.Record(waited_us > 0 ? uint64_t(waited_us) * 1000 : 0);
  }
  m->running.fetch_add(1, std::memory_order_relaxed);
  auto started = std::chrono::steady_clock::now();
  Outcome outcome =
      RunAttempt(*st.config.registry, task, *spec, control, inputs);
  auto ran = std::chrono::steady_clock::now() - started;
  m->running.fetch_sub(1, std::memory_order_relaxed);
  st.slots->Get(task.type)->handler_run.Record(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(ran).count()));
  return outcome;
}

worker_actor::behavior_type WorkerBehavior(
    worker_actor::stateful_pointer<WorkerState> self, WorkerConfig config) {
  self->state.config = std::move(config);
  if (self->state.config.metrics) {
    self->state.slots =
        std::make_unique<metrics::SlotCache>(self->state.config.metrics.get());
  }
  NameThisThread("spool-worker-" + std::to_string(self->state.config.index));
  // Per thread, as the readers and the writer do.
  storage::DisablePerfCountersOnThisThread();
  return {
      [self](run_atom, ClaimedTask& first) {
        auto& st = self->state;
        ClaimedTask task = std::move(first);
        for (;;) {
          Outcome outcome = Run(st, task);
          std::optional<ClaimedTask> next = st.config.pool->Pop();
          self->send(st.config.scheduler, outcome_atom::value, st.config.index,
                     std::move(outcome), /*idle=*/!next.has_value());
          if (!next) return;
          task = std::move(*next);
        }
      },
  };
}

}  // namespace

worker_actor SpawnWorker(caf::actor_system& system, WorkerConfig config) {
  return system.spawn<caf::detached>(WorkerBehavior, std::move(config));
}

}  // namespace spool::actors
