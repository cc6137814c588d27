#include "actors/scheduler.h"

#include <limits>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/ready_queue.h"
#include "runtime/logging.h"

namespace spool::actors {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct SchedulerState {
  static inline const char* name = "spool.scheduler";

  SchedulerConfig config;
  std::shared_ptr<spdlog::logger> log;

  ReadyQueue queue;

  std::vector<worker_actor> workers;
  std::vector<uint32_t> idle_workers;
  size_t claims_in_flight = 0;
  size_t running = 0;
  std::vector<Outcome> outcomes_to_send;
  size_t outcomes_in_flight = 0;

  bool started = false;
  bool stopping = false;
  bool dispatch_scheduled = false;
  // After a failed write, claims and outcomes wait until then. Real time,
  // not the task clock: it paces retries against a storage outage.
  std::chrono::steady_clock::time_point writes_blocked_until;
  bool unblock_tick_pending = false;
  // The due time of the earliest timer message on its way.
  int64_t timer_armed_for = kNever;

  std::vector<Completion> drains;
  std::vector<Completion> stops;

  int64_t NowMicros() const {
    return config.clock->Now().time_since_epoch().count();
  }

  bool Settling() const {
    return !outcomes_to_send.empty() || outcomes_in_flight != 0;
  }

  bool Quiet() const {
    return claims_in_flight == 0 && running == 0 && !Settling();
  }

  bool Drained() const { return queue.ready_empty() && Quiet(); }
};

using Self = scheduler_actor::stateful_pointer<SchedulerState>;

void ArmTimer(Self self, int64_t due, int64_t now) {
  auto& st = self->state;
  if (due >= st.timer_armed_for) return;
  st.timer_armed_for = due;
  auto delay = std::chrono::microseconds(std::max<int64_t>(due - now, 0));
  self->delayed_send(self, delay, tick_atom::value);
}

void Answer(std::vector<Completion>* waiting, const Status& status) {
  std::vector<Completion> callbacks;
  callbacks.swap(*waiting);
  for (auto& callback : callbacks) callback(status);
}

void CheckWaiters(Self self) {
  auto& st = self->state;
  if (st.stopping && st.Quiet()) Answer(&st.stops, Status::OK());
  if (!st.drains.empty()) {
    if (st.Drained()) {
      Answer(&st.drains, Status::OK());
    } else if (st.stopping) {
      Answer(&st.drains, Status::Closed("the runtime closed before the queue "
                                        "drained"));
    }
  }
}

// Sends the outcomes gathered so far and as many claims as there are idle
// workers, in one go, so that the writer commits them together.
void Dispatch(Self self) {
  auto& st = self->state;
  st.dispatch_scheduled = false;
  int64_t now = st.NowMicros();
  st.queue.PromoteDue(now);

  auto steady_now = std::chrono::steady_clock::now();
  bool writes_blocked = steady_now < st.writes_blocked_until;

  if (!st.outcomes_to_send.empty() && !writes_blocked) {
    st.outcomes_in_flight += st.outcomes_to_send.size();
    self->send(st.config.writer, settle_atom::value,
               std::move(st.outcomes_to_send));
    st.outcomes_to_send.clear();
  }

  if (st.started && !st.stopping && !writes_blocked) {
    size_t free_slots = st.idle_workers.size() - st.claims_in_flight;
    std::vector<QueueEntry> claims;
    while (claims.size() < free_slots) {
      std::optional<QueueEntry> next = st.queue.PopNext();
      if (!next) break;
      claims.push_back(*next);
    }
    if (!claims.empty()) {
      st.claims_in_flight += claims.size();
      self->send(st.config.writer, claim_atom::value, std::move(claims));
    }
  }

  if (writes_blocked && !st.unblock_tick_pending) {
    st.unblock_tick_pending = true;
    self->delayed_send(self, st.writes_blocked_until - steady_now,
                       tick_atom::value);
  }
  if (auto due = st.queue.NextDueTime()) ArmTimer(self, *due, now);
  CheckWaiters(self);
}

void ScheduleDispatch(Self self) {
  auto& st = self->state;
  if (st.dispatch_scheduled) return;
  st.dispatch_scheduled = true;
  self->send(self, dispatch_atom::value);
}

void RunClaimed(Self self, std::vector<ClaimedTask>& claimed) {
  auto& st = self->state;
  for (ClaimedTask& task : claimed) {
    --st.claims_in_flight;
    if (st.idle_workers.empty()) {
      // Cannot happen: claims never exceed idle workers. Leave the task
      // running on disk; recovery reschedules it at the next open.
      st.log->error("task {} was claimed with no idle worker", task.record->id);
      continue;
    }
    uint32_t worker = st.idle_workers.back();
    st.idle_workers.pop_back();
    ++st.running;
    self->send(st.workers[worker], run_atom::value, std::move(task));
  }
}

void ApplyChanges(Self self, QueueChanges& changes) {
  auto& st = self->state;
  for (const QueueEntry& entry : changes.queued) st.queue.Add(entry);
  for (TaskId id : changes.dequeued) st.queue.Remove(id);
  RunClaimed(self, changes.claimed);
  st.claims_in_flight -= changes.refused.size();
  st.outcomes_in_flight -= changes.settled;
  if (!changes.write_status.ok()) {
    st.claims_in_flight -= changes.claim_failed.size();
    for (const QueueEntry& entry : changes.claim_failed) st.queue.Add(entry);
    st.outcomes_in_flight -= changes.unsettled.size();
    for (Outcome& outcome : changes.unsettled) {
      st.outcomes_to_send.push_back(std::move(outcome));
    }
    st.writes_blocked_until =
        std::chrono::steady_clock::now() + st.config.storage_retry_delay;
  }
  ScheduleDispatch(self);
}

scheduler_actor::behavior_type SchedulerBehavior(Self self,
                                                 SchedulerConfig config) {
  auto& st = self->state;
  st.config = std::move(config);
  st.log = Logger();
  for (const QueueEntry& entry : st.config.initial) st.queue.Add(entry);
  st.config.initial.clear();
  st.config.initial.shrink_to_fit();
  return {
      [self](changes_atom, QueueChanges& changes) {
        ApplyChanges(self, changes);
      },
      [self](start_atom, std::vector<worker_actor>& workers) {
        auto& s = self->state;
        s.workers = std::move(workers);
        for (uint32_t i = 0; i < s.workers.size(); ++i) {
          s.idle_workers.push_back(i);
        }
        s.started = true;
        ScheduleDispatch(self);
      },
      [self](outcome_atom, uint32_t worker, Outcome& outcome) {
        auto& s = self->state;
        --s.running;
        s.idle_workers.push_back(worker);
        s.outcomes_to_send.push_back(std::move(outcome));
        ScheduleDispatch(self);
      },
      [self](tick_atom) {
        auto& s = self->state;
        if (s.NowMicros() >= s.timer_armed_for) s.timer_armed_for = kNever;
        if (std::chrono::steady_clock::now() >= s.writes_blocked_until) {
          s.unblock_tick_pending = false;
        }
        ScheduleDispatch(self);
      },
      [self](drain_atom, Completion& done) {
        self->state.drains.push_back(std::move(done));
        ScheduleDispatch(self);
      },
      [self](stop_atom, Completion& done) {
        self->state.stopping = true;
        self->state.stops.push_back(std::move(done));
        ScheduleDispatch(self);
      },
      [self](dispatch_atom) { Dispatch(self); },
  };
}

}  // namespace

scheduler_actor SpawnScheduler(caf::actor_system& system,
                               SchedulerConfig config) {
  return system.spawn(SchedulerBehavior, std::move(config));
}

}  // namespace spool::actors
