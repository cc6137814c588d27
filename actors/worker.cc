#include "actors/worker.h"

#include <chrono>
#include <optional>

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

// Records an attempt's start as its handler begins (RunAttempt calls it
// once the attempt is admitted): in the start log, on its control (its
// timeout runs from then), and in the metrics. An attempt that never
// begins (a rate limit's wait, no handler, a failed migration) records
// none of it.
class StartRecorder final : public AttemptStartListener {
 public:
  StartRecorder(WorkerState& st, const ClaimedTask& task, int64_t created_us)
      : st_(st), task_(task), created_us_(created_us) {}

  void Starting() override {
    if (st_.config.start_log != nullptr &&
        task_.start_slot != storage::StartLog::kNoSlot) {
      st_.config.start_log->Record(task_.start_slot, task_.id, task_.attempt);
    }
    int64_t now_us = st_.config.clock->Now().time_since_epoch().count();
    if (task_.control) task_.control->MarkStarted(now_us);
    metrics::Metrics* m = st_.config.metrics.get();
    if (m == nullptr) return;
    if (task_.attempt == 1) {
      int64_t waited_us = now_us - created_us_;
      m->start_latency.Record(waited_us > 0 ? uint64_t(waited_us) * 1000 : 0);
    }
    m->running.fetch_add(1, std::memory_order_relaxed);
    started_ = std::chrono::steady_clock::now();
  }

  // After the attempt: its handler's time, if it ran.
  void Finished() {
    if (!started_) return;
    auto ran = std::chrono::steady_clock::now() - *started_;
    st_.config.metrics->running.fetch_sub(1, std::memory_order_relaxed);
    st_.slots->Get(task_.type)
        ->handler_run.Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(ran).count()));
  }

 private:
  WorkerState& st_;
  const ClaimedTask& task_;
  const int64_t created_us_;
  std::optional<std::chrono::steady_clock::time_point> started_;
};

// Reads the task's spec and runs the attempt. A task cancelled while it
// waited in the pool does not start; a spec that cannot be read runs
// nothing, and the writer sets the task aside.
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
  StartRecorder recorder(st, task, spec->created_us());
  AttemptInputs inputs = InputsFor(st, task);
  inputs.on_start = &recorder;
  Outcome outcome =
      RunAttempt(*st.config.registry, task, *spec, control, inputs);
  recorder.Finished();
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
