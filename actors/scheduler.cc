#include "actors/scheduler.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/claimed_pool.h"
#include "actors/ready_queue.h"
#include "storage/keys.h"
#include "storage/start_log.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace spool::actors {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// A claimed attempt: in the pool, or run by a worker.
struct Running {
  uint32_t attempt = 0;
  std::string type;
  std::string group;
  std::shared_ptr<internal::AttemptControl> control;
  // Its start-log slot (StartLog::kNoSlot without a start log).
  uint32_t slot = storage::StartLog::kNoSlot;
  int64_t timeout_us = 0;
  // Settled as timed out while the handler still runs: the worker stays busy
  // but the task no longer counts against its limits.
  bool timed_out = false;
};

// How many tasks to keep claimed ahead: as many as the workers finish while
// one claim goes to the writer and back, with some margin, so that a worker
// finishing an attempt finds the next one in the pool. Both figures are
// moving averages of what the scheduler observes.
class AheadEstimate {
 public:
  // A claim batch went out, or came back committed.
  void ClaimSent(std::chrono::steady_clock::time_point at, size_t n) {
    sent_.emplace_back(at, n);
  }
  void ClaimsAnswered(std::chrono::steady_clock::time_point at, size_t n) {
    while (n > 0 && !sent_.empty()) {
      auto& [sent_at, left] = sent_.front();
      size_t taken = std::min(left, n);
      left -= taken;
      n -= taken;
      if (left == 0) {
        double us =
            std::chrono::duration<double, std::micro>(at - sent_at).count();
        round_trip_us_ =
            round_trip_us_ == 0 ? us : 0.8 * round_trip_us_ + 0.2 * us;
        sent_.pop_front();
      }
    }
  }
  // An attempt finished.
  void Finished(std::chrono::steady_clock::time_point at) {
    ++finished_;
    double window_us =
        std::chrono::duration<double, std::micro>(at - window_start_).count();
    if (window_us >= kWindowUs) {
      double rate = finished_ / window_us;
      per_us_ = per_us_ == 0 ? rate : 0.7 * per_us_ + 0.3 * rate;
      finished_ = 0;
      window_start_ = at;
    }
  }
  // The target, at most `cap`; at least one per worker until measured.
  size_t Target(size_t cap, size_t workers) const {
    if (per_us_ == 0 || round_trip_us_ == 0) return std::min(cap, workers);
    double want = 1.5 * per_us_ * round_trip_us_ + 1;
    return static_cast<size_t>(std::min<double>(cap, std::ceil(want)));
  }

 private:
  static constexpr double kWindowUs = 10000;
  std::deque<std::pair<std::chrono::steady_clock::time_point, size_t>> sent_;
  double round_trip_us_ = 0;
  double per_us_ = 0;
  size_t finished_ = 0;
  std::chrono::steady_clock::time_point window_start_ =
      std::chrono::steady_clock::now();
};

// Per type: what limits it, and how much of its limit is used.
struct TypeLoad {
  TypePolicy policy;
  bool paused = false;
  // Claims in flight plus running attempts.
  uint32_t active = 0;
  // Generic cell rate algorithm: the theoretical arrival time of the next
  // attempt, in microseconds on the task clock. Stored, so that a restart
  // does not reset the rate.
  int64_t rate_tat_us = 0;
  int64_t rate_blocked_until = 0;
};

struct GroupLoad {
  uint32_t active = 0;
  // Set by SetGroupConcurrency (or restored from storage); 0: the
  // config's limit applies (SchedulerState::GroupLimit).
  uint32_t limit = 0;
};

struct PeriodicState {
  PeriodicPlan plan;
  int64_t next_slot_us = kNever;
};

struct SchedulerState {
  static inline const char* name = "spool.scheduler";

  SchedulerConfig config;
  std::shared_ptr<spdlog::logger> log;
  ReadyQueue queue;

  std::vector<worker_actor> workers;
  std::vector<uint32_t> idle_workers;
  // Slots of remote workers that went away (by index): never idle until a
  // later worker reuses them. Empty unless remote workers come and go.
  std::unordered_set<uint32_t> retired_workers;
  // The slot range (first index, count) of each attached remote session,
  // and the ranges of detached ones, free for the next session of the same
  // size: a worker that reconnects (with its concurrency) takes its old
  // range back, so that the slot vectors do not grow with every reconnect.
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> remote_ranges;
  std::multimap<uint32_t, uint32_t> free_ranges_by_count;
  // By worker index: the types a remote worker's slot serves; null for a
  // local worker, which serves every type.
  std::vector<std::shared_ptr<const std::unordered_set<std::string>>>
      worker_types;
  uint32_t local_workers = 0;
  // How many attached remote slots serve each type. With no local worker,
  // a type no slot serves is not claimed (RefreshType).
  std::unordered_map<std::string, uint32_t> remote_slots_by_type;
  // Claimed attempts not finished: in the pool, or run by a worker.
  std::unordered_map<TaskId, Running> running;
  size_t claims_in_flight = 0;
  // Start-log slots not in use, and those reserved for claims in flight.
  std::vector<uint32_t> free_slots;
  std::unordered_map<TaskId, uint32_t> claim_slots;
  AheadEstimate ahead;
  std::vector<Outcome> outcomes_to_send;
  size_t outcomes_in_flight = 0;

  std::unordered_map<std::string, TypeLoad> types;
  std::unordered_map<std::string, GroupLoad> groups;
  std::unordered_set<std::string> paused_types;
  bool paused = false;
  // Closed gates; every gate not listed is open.
  std::unordered_set<std::string> closed_gates;
  // Types whose rate state changed since it was last sent for storage.
  std::unordered_set<std::string> rate_dirty;
  // Controls changed since they were last sent for storage (ControlKey).
  std::vector<std::pair<std::string, std::string>> control_updates;
  std::vector<PeriodicState> periodic;
  // Attempt deadlines, on the task clock: (due, task, attempt).
  std::set<std::tuple<int64_t, TaskId, uint32_t>> deadlines;

  bool started = false;
  bool stopping = false;
  // The stop is Close's: the scheduler never dispatches again. Without it a
  // finished stop (Runtime::Stop) leaves the scheduler idle until
  // start_atom.
  bool closing = false;
  bool dispatch_scheduled = false;
  // After a failed write, claims and outcomes wait until then. Real time,
  // not the task clock: it paces retries against a storage outage.
  std::chrono::steady_clock::time_point writes_blocked_until;
  bool unblock_tick_pending = false;
  // The due time of the earliest timer message on its way.
  int64_t timer_armed_for = kNever;

  // Drain requests by id; ids also name their timeout messages.
  std::map<uint64_t, DrainRequest> drains;
  uint64_t next_drain_id = 0;
  std::vector<Completion> stops;

  int64_t NowMicros() const {
    return config.clock->Now().time_since_epoch().count();
  }

  TypeLoad& TypeOf(const std::string& type) {
    auto [it, added] = types.try_emplace(type);
    if (added) {
      it->second.paused = paused_types.count(type) != 0;
      auto stored = config.recovered.rate_state.find(type);
      if (stored != config.recovered.rate_state.end()) {
        it->second.rate_tat_us = stored->second;
      }
    }
    return it->second;
  }

  // The limit of `group`, whose SetGroupConcurrency limit is `set_limit`
  // (0: none): that one, else the config's for the group, else the default.
  uint32_t GroupLimit(const std::string& group, uint32_t set_limit) const {
    if (set_limit != 0) return set_limit;
    auto named = config.group_limits.find(group);
    return named != config.group_limits.end() ? named->second
                                              : config.group_concurrency;
  }

  bool Serves(uint32_t worker, const std::string& type) const {
    const auto& served = worker_types[worker];
    return served == nullptr || served->count(type) != 0;
  }

  // Some worker, busy or idle, serves `type`.
  bool Served(const std::string& type) const {
    return local_workers != 0 || remote_slots_by_type.count(type) != 0;
  }

  void RefreshType(const std::string& type, int64_t now) {
    TypeLoad& load = TypeOf(type);
    bool at_limit = load.policy.max_concurrent != 0 &&
                    load.active >= load.policy.max_concurrent;
    bool rate_limited = load.rate_blocked_until > now;
    bool gated = false;
    for (const std::string& gate : load.policy.requires_gates) {
      gated |= closed_gates.count(gate) != 0;
    }
    queue.SetTypeBlocked(type, load.paused || at_limit || rate_limited ||
                                   gated || !Served(type));
  }

  // A pause, gate or group limit changed: stored with the next commit.
  void StoreControl(ControlKind kind, std::string_view name,
                    std::string value) {
    control_updates.emplace_back(ControlKey(kind, name), std::move(value));
  }
  static std::string Flag(bool on) { return std::string(1, on ? 1 : 0); }

  void SetGate(const std::string& gate, bool open, int64_t now) {
    bool changed =
        open ? closed_gates.erase(gate) != 0 : closed_gates.insert(gate).second;
    if (!changed) return;
    StoreControl(ControlKind::kClosedGate, gate, Flag(!open));
    for (auto& [type, load] : types) {
      const auto& gates = load.policy.requires_gates;
      if (std::find(gates.begin(), gates.end(), gate) != gates.end()) {
        RefreshType(type, now);
      }
    }
  }

  void RefreshGroup(const std::string& group) {
    if (group.empty()) return;  // ungrouped tasks have no group limit
    GroupLoad& load = groups[group];
    uint32_t limit = GroupLimit(group, load.limit);
    queue.SetGroupBlocked(group, limit != 0 && load.active >= limit);
    if (load.active == 0 && load.limit == 0) groups.erase(group);
  }

  // Counts a claim (+1) or the end of one (-1) against the limits.
  void Count(const std::string& type, const std::string& group, int delta,
             int64_t now) {
    TypeLoad& load = TypeOf(type);
    load.active += delta;
    RefreshType(type, now);
    if (!group.empty()) {
      groups[group].active += delta;
      RefreshGroup(group);
    }
  }

  // The rate as GCRA sees it: one attempt per `interval`, with bursts of up
  // to the whole count (`burst` of slack).
  static void RateShape(const RateLimit& rate, int64_t* interval,
                        int64_t* burst) {
    int64_t period = std::max<int64_t>(rate.period.count(), 1);
    *interval = std::max<int64_t>(period / rate.count, 1);
    *burst = period - *interval;
  }

  // Blocks a rate-limited type until its next attempt is allowed.
  void BlockForRate(const std::string& type, int64_t now) {
    TypeLoad& load = TypeOf(type);
    if (load.policy.rate_limit.count == 0) return;
    int64_t interval, burst;
    RateShape(load.policy.rate_limit, &interval, &burst);
    load.rate_blocked_until = load.rate_tat_us - burst;
    RefreshType(type, now);
  }

  // Takes one attempt from a rate-limited type's budget.
  void SpendRate(const std::string& type, int64_t now) {
    TypeLoad& load = TypeOf(type);
    if (load.policy.rate_limit.count == 0) return;
    int64_t interval, burst;
    RateShape(load.policy.rate_limit, &interval, &burst);
    load.rate_tat_us = std::max(load.rate_tat_us, now) + interval;
    rate_dirty.insert(type);
    BlockForRate(type, now);
  }

  bool Settling() const {
    return !outcomes_to_send.empty() || outcomes_in_flight != 0;
  }

  bool Quiet() const {
    return claims_in_flight == 0 && running.empty() && !Settling();
  }

  // Nothing can run: no ready task except ones held back until someone acts
  // (paused, or behind a closed gate). Tasks held only by a rate limit will
  // run on their own, so they keep a drain waiting.
  bool Drained() const {
    if (!Quiet()) return false;
    if (queue.ready_empty() || paused) return true;
    for (const std::string& type : queue.ReadyTypes()) {
      auto it = types.find(type);
      if (it == types.end()) return false;
      bool gated = false;
      for (const std::string& gate : it->second.policy.requires_gates) {
        gated |= closed_gates.count(gate) != 0;
      }
      if (!it->second.paused && !gated) return false;
    }
    return true;
  }

  // Drained, and no task waits for a later time that could run then. While
  // the whole queue is paused nothing runs on its own; a timed task of a
  // paused type or behind a closed gate keeps this false only until it is
  // due (it then waits in its lane, which Drained accepts).
  bool Settled() const {
    return Drained() && (paused || !queue.NextDueTime().has_value());
  }

  // The earliest time something is due: a timed task, a rate-limited type,
  // or a periodic slot.
  int64_t NextWakeUp(int64_t now) const {
    int64_t next = queue.NextDueTime().value_or(kNever);
    for (const auto& [type, load] : types) {
      if (load.rate_blocked_until > now) {
        next = std::min(next, load.rate_blocked_until);
      }
    }
    for (const PeriodicState& p : periodic)
      next = std::min(next, p.next_slot_us);
    if (!deadlines.empty())
      next = std::min(next, std::get<0>(*deadlines.begin()));
    return next;
  }
};

using Self = scheduler_actor::stateful_pointer<SchedulerState>;

void ArmTimer(Self self, int64_t due, int64_t now) {
  auto& st = self->state;
  if (due == kNever || due >= st.timer_armed_for) return;
  st.timer_armed_for = due;
  auto delay = std::chrono::microseconds(std::max<int64_t>(due - now, 0));
  self->delayed_send(self, delay, tick_atom::value);
}

void Answer(std::vector<Completion>* waiting, const Status& status) {
  std::vector<Completion> callbacks;
  callbacks.swap(*waiting);
  for (auto& callback : callbacks) callback(status);
}

// Answers the drains whose condition holds, or all of them once stopping.
void AnswerDrains(SchedulerState& st) {
  const bool drained = st.Drained();
  const bool settled = drained && st.Settled();
  const Status stopped =
      st.closing ? Status::Closed("the runtime closed before the queue drained")
                 : Status::Aborted(
                       "Runtime::Stop was called before the queue drained");
  std::vector<std::pair<Completion, Status>> answers;
  for (auto it = st.drains.begin(); it != st.drains.end();) {
    bool done = it->second.wait_for_scheduled ? settled : drained;
    if (done || st.stopping) {
      answers.emplace_back(std::move(it->second.done),
                           done ? Status::OK() : stopped);
      it = st.drains.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [callback, status] : answers) callback(status);
}

void CheckWaiters(Self self) {
  auto& st = self->state;
  // Drains are answered first, while `stopping` still tells why.
  if (!st.drains.empty()) AnswerDrains(st);
  if (st.stopping && st.Quiet()) {
    if (!st.closing) {
      // Runtime::Stop: idle until started again.
      st.stopping = false;
      st.started = false;
    }
    Answer(&st.stops, Status::OK());
  }
}

// Settles an attempt that ran past its deadline as timed out, cancelling its
// token; the handler's thread stays busy until it returns.
void OnTimeout(Self self, TaskId id, uint32_t attempt) {
  auto& st = self->state;
  auto it = st.running.find(id);
  if (it == st.running.end() || it->second.attempt != attempt ||
      it->second.timed_out) {
    return;
  }
  Running& run = it->second;
  // The timeout runs from the handler's start: a claim may wait in the
  // pool first.
  int64_t now = st.NowMicros();
  int64_t started = run.control->started_us();
  int64_t due = started == 0 ? now + run.timeout_us : started + run.timeout_us;
  if (due > now) {
    st.deadlines.emplace(due, id, attempt);
    return;
  }
  run.timed_out = true;
  run.control->Cancel();
  st.Count(run.type, run.group, -1, now);
  Outcome outcome;
  outcome.id = id;
  outcome.attempt = attempt;
  outcome.status = Status::TimedOut("the attempt ran past its timeout");
  outcome.timed_out = true;
  outcome.start_slot = run.slot;
  st.outcomes_to_send.push_back(std::move(outcome));
}

// Enqueues the slots of periodic tasks that have come due.
void EnqueueDueSlots(Self self, int64_t now) {
  auto& st = self->state;
  for (PeriodicState& p : st.periodic) {
    if (p.next_slot_us > now) continue;
    // Only the latest slot that has come: after a pause (or a slow tick),
    // slots in between are not run several times over.
    int64_t slot = p.next_slot_us;
    for (;;) {
      auto next = p.plan.schedule.NextAfter(Timestamp(Duration(slot)));
      if (!next || next->time_since_epoch().count() > now) {
        p.next_slot_us = next ? next->time_since_epoch().count() : kNever;
        break;
      }
      slot = next->time_since_epoch().count();
    }
    EnqueueCommand command;
    NewTask task = p.plan.task;
    task.id = st.config.allocate_id();
    // 0: the id source's id was refused (and logged); the slot is skipped.
    if (task.id == 0) continue;
    task.periodic_name = p.plan.name;
    task.periodic_slot_us = slot;
    task.run_at_us = 0;
    command.tasks.push_back(std::move(task));
    std::string name = p.plan.name;
    auto log = st.log;
    command.done = [log, name, slot](const Result<std::vector<TaskId>>& r) {
      if (!r.ok()) {
        log->error(
            "periodic task '{}': enqueueing the slot at {} us failed: {}", name,
            slot, r.status().ToString());
      }
    };
    self->send(st.config.writer, enqueue_atom::value, std::move(command));
  }
}

// Sends the outcomes gathered so far and as many claims as idle workers and
// limits allow, in one go, so that the writer commits them together.
// Whether a task of this type and group may be claimed ahead of the
// workers. A task under a concurrency limit is not: claimed, it would hold
// a place of its limit while it waits in the pool.
bool MayClaimAhead(SchedulerState& st, const QueueEntry& entry) {
  if (st.TypeOf(entry.type).policy.max_concurrent != 0) return false;
  if (entry.group.empty()) return true;
  auto it = st.groups.find(entry.group);
  uint32_t set_limit = it != st.groups.end() ? it->second.limit : 0;
  return st.GroupLimit(entry.group, set_limit) == 0;
}

// Claims as many tasks as the idle workers take at once, and as many more
// as the pool should hold ahead of the busy ones, within the limits and
// the start log's free slots; sends them to the writer in one message.
void ClaimNext(Self self, int64_t now) {
  auto& st = self->state;
  size_t unstarted = st.config.pool->size() + st.claims_in_flight;
  size_t direct = st.idle_workers.size() > st.claims_in_flight
                      ? st.idle_workers.size() - st.claims_in_flight
                      : 0;
  size_t target =
      st.idle_workers.size() +
      st.ahead.Target(st.config.claim_ahead,
                      st.workers.size() - st.retired_workers.size());
  size_t want = target > unstarted ? target - unstarted : 0;
  if (st.config.start_log != nullptr) {
    want = std::min(want, st.free_slots.size());
  }
  std::vector<QueueEntry> claims;
  while (claims.size() < want) {
    std::optional<QueueEntry> next = st.queue.PopNext();
    if (!next) break;
    if (claims.size() >= direct && !MayClaimAhead(st, *next)) {
      // Its turn comes when a worker is idle; nothing behind it is taken
      // ahead of it meanwhile.
      st.queue.Add(*next);
      break;
    }
    st.Count(next->type, next->group, +1, now);
    st.SpendRate(next->type, now);
    if (st.config.start_log != nullptr) {
      st.claim_slots[next->id] = st.free_slots.back();
      st.free_slots.pop_back();
    }
    claims.push_back(std::move(*next));
  }
  if (!st.rate_dirty.empty()) {
    MetaUpdate update;
    for (const std::string& type : st.rate_dirty) {
      std::string value;
      storage::PutBigEndian64(&value,
                              storage::EncodeTime(st.TypeOf(type).rate_tat_us));
      update.values.emplace_back(RateStateKey(type), std::move(value));
    }
    st.rate_dirty.clear();
    self->send(st.config.writer, meta_atom::value, std::move(update));
  }
  if (!claims.empty()) {
    st.claims_in_flight += claims.size();
    st.ahead.ClaimSent(std::chrono::steady_clock::now(), claims.size());
    self->send(st.config.writer, claim_atom::value, std::move(claims));
  }
}

// A reserved start-log slot back to the free list, emptied.
void ReleaseSlot(SchedulerState& st, uint32_t slot) {
  if (slot == storage::StartLog::kNoSlot || st.config.start_log == nullptr) {
    return;
  }
  st.config.start_log->Clear(slot);
  st.free_slots.push_back(slot);
}

// The end of a claimed attempt, as far as the scheduler's limits go: the
// outcome goes to the writer with the next batch.
void Finish(SchedulerState& st, Running done, Outcome outcome, int64_t now) {
  done.control->ClearProgress();
  if (done.timed_out) return;  // its timeout outcome went already
  if (outcome.deferred_until_gate) {
    st.SetGate(*outcome.deferred_until_gate, /*open=*/false, now);
    if (st.config.on_deferred_gate) {
      st.config.on_deferred_gate(*outcome.deferred_until_gate);
    }
  }
  st.Count(done.type, done.group, -1, now);
  outcome.start_slot = done.slot;
  st.outcomes_to_send.push_back(std::move(outcome));
}

// Gives a committed claim back to the writer unstarted, for `reason` (and
// `gate`, for kGateClosed): its attempt does not count.
// REQUIRES: the task is in st.running.
void GiveBack(SchedulerState& st, const ClaimedTask& task, DeferReason reason,
              const std::string& gate = {}) {
  auto it = st.running.find(task.id);
  Running done = std::move(it->second);
  st.running.erase(it);
  Outcome outcome;
  outcome.id = task.id;
  outcome.attempt = task.attempt;
  outcome.started = false;
  outcome.given_back = reason;
  outcome.given_back_gate = gate;
  Finish(st, std::move(done), std::move(outcome), st.NowMicros());
}

// Takes the tasks `match` selects out of the pool and gives them back.
void Recall(Self self, const std::function<bool(const ClaimedTask&)>& match,
            DeferReason reason, const std::string& gate = {}) {
  auto& st = self->state;
  for (ClaimedTask& task : st.config.pool->Recall(match)) {
    if (st.running.count(task.id) != 0) GiveBack(st, task, reason, gate);
  }
}

// Hands tasks in the pool to idle workers: one a busy worker has not taken
// yet, or one that reached the pool after its worker went idle. A remote
// worker's slot takes only a type it serves.
void Rebalance(Self self) {
  auto& st = self->state;
  for (size_t i = st.idle_workers.size(); i > 0; --i) {
    uint32_t worker = st.idle_workers[i - 1];
    bool serves_all = st.worker_types[worker] == nullptr;
    std::optional<ClaimedTask> task =
        serves_all ? st.config.pool->Pop()
                   : st.config.pool->PopIf([&](const ClaimedTask& t) {
                       return st.Serves(worker, t.type);
                     });
    if (!task) {
      if (serves_all) return;  // the pool is empty
      continue;
    }
    st.idle_workers.erase(st.idle_workers.begin() + (i - 1));
    self->send(st.workers[worker], run_atom::value, std::move(*task));
  }
}

// Takes the idle worker that serves `type` and went idle last, if any.
std::optional<uint32_t> TakeIdleWorker(SchedulerState& st,
                                       const std::string& type) {
  for (size_t i = st.idle_workers.size(); i > 0; --i) {
    uint32_t worker = st.idle_workers[i - 1];
    if (!st.Serves(worker, type)) continue;
    st.idle_workers.erase(st.idle_workers.begin() + (i - 1));
    return worker;
  }
  return std::nullopt;
}

// Sends the outcomes waiting for the writer in one message, unless writes
// are held back after a failed commit.
void SendOutcomes(SchedulerState& st, Self self) {
  if (st.outcomes_to_send.empty() ||
      std::chrono::steady_clock::now() < st.writes_blocked_until) {
    return;
  }
  st.outcomes_in_flight += st.outcomes_to_send.size();
  self->send(st.config.writer, settle_atom::value,
             std::move(st.outcomes_to_send));
  st.outcomes_to_send.clear();
}

void Dispatch(Self self) {
  auto& st = self->state;
  st.dispatch_scheduled = false;
  int64_t now = st.NowMicros();
  Rebalance(self);
  st.queue.PromoteDue(now);
  for (auto& [type, load] : st.types) {
    if (load.rate_blocked_until != 0 && load.rate_blocked_until <= now) {
      load.rate_blocked_until = 0;
      st.RefreshType(type, now);
    }
  }
  if (st.started) EnqueueDueSlots(self, now);
  while (!st.deadlines.empty() && std::get<0>(*st.deadlines.begin()) <= now) {
    auto [due, id, attempt] = *st.deadlines.begin();
    st.deadlines.erase(st.deadlines.begin());
    OnTimeout(self, id, attempt);
  }

  SendOutcomes(st, self);
  std::vector<std::pair<std::string, std::string>> meta =
      std::exchange(st.control_updates, {});
  // Workers and the gateway changed the buckets before the outcomes this
  // dispatch follows.
  if (st.config.rate_buckets && !st.config.rate_buckets->empty()) {
    st.config.rate_buckets->TakeChanges(&meta);
  }
  if (!meta.empty()) {
    self->send(st.config.writer, meta_atom::value, MetaUpdate{std::move(meta)});
  }
  auto steady_now = std::chrono::steady_clock::now();
  bool writes_blocked = steady_now < st.writes_blocked_until;

  if (st.started && !st.stopping && !st.paused && !writes_blocked) {
    ClaimNext(self, now);
  }

  if (writes_blocked && !st.unblock_tick_pending) {
    st.unblock_tick_pending = true;
    self->delayed_send(self, st.writes_blocked_until - steady_now,
                       tick_atom::value);
  }
  ArmTimer(self, st.NextWakeUp(now), now);
  CheckWaiters(self);
  if (st.config.metrics) {
    st.config.metrics->ready.store(st.queue.ready_size(),
                                   std::memory_order_relaxed);
  }
}

void ScheduleDispatch(Self self) {
  auto& st = self->state;
  if (st.dispatch_scheduled) return;
  st.dispatch_scheduled = true;
  self->send(self, dispatch_atom::value);
}

// Why a committed claim of `type` must not start now: the runtime stops,
// or it or the type is paused; kNone when it may.
DeferReason HeldBack(SchedulerState& st, const std::string& type) {
  if (st.stopping || !st.started) return DeferReason::kStopping;
  if (st.paused || st.TypeOf(type).paused) return DeferReason::kPaused;
  return DeferReason::kNone;
}

// Committed claims: to idle workers first, the rest into the pool, where
// the next worker to finish an attempt takes them.
void RunClaimed(Self self, std::vector<ClaimedTask>& claimed) {
  auto& st = self->state;
  for (ClaimedTask& task : claimed) {
    --st.claims_in_flight;
    task.control =
        std::make_shared<internal::AttemptControl>(task.id, st.config.progress);
    if (auto slot = st.claim_slots.find(task.id);
        slot != st.claim_slots.end()) {
      task.start_slot = slot->second;
      st.claim_slots.erase(slot);
    }
    st.running[task.id] =
        Running{task.attempt,    task.type,       task.group, task.control,
                task.start_slot, task.timeout_us, false};
    if (DeferReason held = HeldBack(st, task.type);
        held != DeferReason::kNone) {
      // Claimed before a stop or pause that came meanwhile: it must not
      // start.
      GiveBack(st, task, held);
      continue;
    }
    if (task.timeout_us > 0) {
      st.deadlines.emplace(st.NowMicros() + task.timeout_us, task.id,
                           task.attempt);
    }
    std::optional<uint32_t> worker = TakeIdleWorker(st, task.type);
    if (!worker) {
      st.config.pool->Push(std::move(task));
      continue;
    }
    self->send(st.workers[*worker], run_atom::value, std::move(task));
  }
}

// A claim that did not commit: its reserved slot is free again.
void DropClaimSlot(SchedulerState& st, TaskId id) {
  auto slot = st.claim_slots.find(id);
  if (slot == st.claim_slots.end()) return;
  ReleaseSlot(st, slot->second);
  st.claim_slots.erase(slot);
}

void ApplyChanges(Self self, QueueChanges& changes) {
  auto& st = self->state;
  int64_t now = st.NowMicros();
  for (const QueueEntry& entry : changes.queued) st.queue.Add(entry);
  for (TaskId id : changes.dequeued) st.queue.Remove(id);
  st.ahead.ClaimsAnswered(std::chrono::steady_clock::now(),
                          changes.claimed.size() + changes.refused.size());
  RunClaimed(self, changes.claimed);
  if (!changes.cancel_requested.empty()) {
    std::unordered_set<TaskId> cancelled(changes.cancel_requested.begin(),
                                         changes.cancel_requested.end());
    for (TaskId id : changes.cancel_requested) {
      auto it = st.running.find(id);
      if (it != st.running.end()) it->second.control->Cancel();
    }
    // Not started yet: they end cancelled without running.
    Recall(
        self,
        [&](const ClaimedTask& task) { return cancelled.count(task.id) != 0; },
        DeferReason::kRecalled);
  }
  st.claims_in_flight -= changes.refused.size();
  for (const QueueEntry& entry : changes.refused) {
    st.Count(entry.type, entry.group, -1, now);
    DropClaimSlot(st, entry.id);
  }
  st.outcomes_in_flight -= changes.settled;
  for (uint32_t slot : changes.released_slots) ReleaseSlot(st, slot);
  if (!changes.write_status.ok()) {
    st.claims_in_flight -= changes.claim_failed.size();
    for (const QueueEntry& entry : changes.claim_failed) {
      st.Count(entry.type, entry.group, -1, now);
      DropClaimSlot(st, entry.id);
      st.queue.Add(entry);
    }
    st.outcomes_in_flight -= changes.unsettled.size();
    for (Outcome& outcome : changes.unsettled) {
      st.outcomes_to_send.push_back(std::move(outcome));
    }
    st.writes_blocked_until =
        std::chrono::steady_clock::now() + st.config.storage_retry_delay;
  }
  ScheduleDispatch(self);
}

void Start(Self self, DispatchConfig& config) {
  auto& st = self->state;
  int64_t now = st.NowMicros();
  st.workers = std::move(config.workers);
  st.local_workers = static_cast<uint32_t>(st.workers.size());
  st.worker_types.assign(st.workers.size(), nullptr);
  for (uint32_t i = 0; i < st.workers.size(); ++i) st.idle_workers.push_back(i);
  if (st.config.start_log != nullptr) {
    for (uint32_t slot = st.config.start_log->slots(); slot > 0; --slot) {
      st.free_slots.push_back(slot - 1);
    }
  }
  for (auto& [type, policy] : config.types) {
    st.TypeOf(type).policy = policy;
    // A stored rate state may still hold the type back after a restart.
    st.BlockForRate(type, now);
    st.RefreshType(type, now);
  }
  for (PeriodicPlan& plan : config.periodic) {
    int64_t first = plan.first_slot_us;
    st.periodic.push_back(PeriodicState{std::move(plan), first});
  }
  st.started = true;
  ScheduleDispatch(self);
}

void OnOutcome(Self self, uint32_t worker, Outcome& outcome, bool idle) {
  auto& st = self->state;
  if (idle &&
      (st.retired_workers.empty() || st.retired_workers.count(worker) == 0)) {
    st.idle_workers.push_back(worker);
  }
  st.ahead.Finished(std::chrono::steady_clock::now());
  auto it = st.running.find(outcome.id);
  if (it != st.running.end() && it->second.attempt == outcome.attempt) {
    Running done = std::move(it->second);
    st.running.erase(it);
    Finish(st, std::move(done), std::move(outcome), st.NowMicros());
  }
  // Otherwise the attempt timed out and was settled, and its task may even
  // run again elsewhere; the worker's state is all that changed.
  ScheduleDispatch(self);
}

// A remote worker's slots join the workers, idle, each serving the types
// the worker declared; those types may be claimed now. They take a free
// range of the same size if a detached session left one.
void AttachRemote(Self self, RemoteSlots& remote) {
  auto& st = self->state;
  auto count = static_cast<uint32_t>(remote.slots.size());
  auto served = std::make_shared<const std::unordered_set<std::string>>(
      remote.types.begin(), remote.types.end());
  auto free = st.free_ranges_by_count.find(count);
  const bool reused = free != st.free_ranges_by_count.end();
  uint32_t first =
      reused ? free->second : static_cast<uint32_t>(st.workers.size());
  if (reused) {
    st.free_ranges_by_count.erase(free);
  } else {
    st.workers.resize(st.workers.size() + count);
    st.worker_types.resize(st.workers.size());
  }
  for (uint32_t i = 0; i < count; ++i) {
    st.retired_workers.erase(first + i);
    st.workers[first + i] = std::move(remote.slots[i]);
    st.worker_types[first + i] = served;
    st.idle_workers.push_back(first + i);
  }
  st.remote_ranges[remote.session] = {first, count};
  st.log->info("remote session {}: slots {} to {} ({})", remote.session, first,
               first + count - 1, reused ? "reused" : "new");
  int64_t now = st.NowMicros();
  for (const std::string& type : *served) {
    st.remote_slots_by_type[type] += count;
    st.RefreshType(type, now);
  }
  if (remote.attached) remote.attached(first);
  ScheduleDispatch(self);
}

// A remote worker left: its slots take nothing more, and their range is
// free for the next worker. Their attempts in flight are settled by the
// gateway, as interrupted.
void DetachRemote(Self self, uint64_t session) {
  auto& st = self->state;
  auto range = st.remote_ranges.find(session);
  if (range == st.remote_ranges.end()) return;
  auto [first, count] = range->second;
  st.remote_ranges.erase(range);
  std::unordered_set<std::string> types;
  for (uint32_t slot = first; slot < first + count; ++slot) {
    st.retired_workers.insert(slot);
    st.workers[slot] = nullptr;
    for (const std::string& type : *st.worker_types[slot]) {
      auto served = st.remote_slots_by_type.find(type);
      if (--served->second == 0) st.remote_slots_by_type.erase(served);
      types.insert(type);
    }
  }
  st.free_ranges_by_count.emplace(count, first);
  auto retired = [&st](uint32_t slot) {
    return st.retired_workers.count(slot) != 0;
  };
  st.idle_workers.erase(
      std::remove_if(st.idle_workers.begin(), st.idle_workers.end(), retired),
      st.idle_workers.end());
  int64_t now = st.NowMicros();
  for (const std::string& type : types) st.RefreshType(type, now);
  // Claimed ahead for this worker, of a type no one serves now: back to the
  // queue, where it waits for the next worker that serves it.
  Recall(
      self, [&st](const ClaimedTask& task) { return !st.Served(task.type); },
      DeferReason::kNoWorker);
  ScheduleDispatch(self);
}

// Gives back the pooled tasks a control command names, then forwards the
// command to the writer: the given-back outcomes go first, so that the
// command finds those tasks queued again (a cancel cancels them at once, a
// hold holds them). A task a worker has taken meanwhile is running, and
// the command treats it so.
void ForwardControl(Self self, ControlCommand& command) {
  auto& st = self->state;
  using Kind = ControlCommand::Kind;
  if (command.kind == Kind::kCancel || command.kind == Kind::kHold) {
    TaskId id = command.id;
    Recall(
        self, [id](const ClaimedTask& task) { return task.id == id; },
        DeferReason::kRecalled);
  } else if (command.kind == Kind::kCancelGroup) {
    const std::string& group = command.stored_group;
    Recall(
        self, [&group](const ClaimedTask& task) { return task.group == group; },
        DeferReason::kRecalled);
  }
  SendOutcomes(st, self);
  self->send(st.config.writer, control_atom::value, std::move(command));
  ScheduleDispatch(self);
}

// The pauses, closed gates and group limits a previous run stored. Types
// pick their pause up when first seen (TypeOf), gates at Start
// (RefreshType).
void RestoreControls(SchedulerState& st) {
  StoredControls& stored = st.config.recovered.controls;
  st.paused = stored.paused;
  st.paused_types = std::move(stored.paused_types);
  st.closed_gates = std::move(stored.closed_gates);
  for (auto& [group, limit] : stored.group_limits) {
    st.groups[group].limit = limit;
    st.RefreshGroup(group);
  }
  stored = StoredControls{};
}

scheduler_actor::behavior_type SchedulerBehavior(Self self,
                                                 SchedulerConfig config) {
  NameThisThread("spool-scheduler");
  auto& st = self->state;
  st.config = std::move(config);
  st.log = Logger();
  for (const QueueEntry& entry : st.config.recovered.queue) {
    st.queue.Add(entry);
  }
  st.config.recovered.queue.clear();
  st.config.recovered.queue.shrink_to_fit();
  RestoreControls(st);
  return {
      [self](changes_atom, QueueChanges& changes) {
        ApplyChanges(self, changes);
      },
      [self](start_atom, DispatchConfig& dispatch) { Start(self, dispatch); },
      [self](start_atom) {
        auto& s = self->state;
        if (s.closing) return;
        // A Start that overtook the end of a Stop: the runtime refuses
        // that, but the scheduler keeps to its own state either way.
        s.stopping = false;
        s.started = true;
        ScheduleDispatch(self);
      },
      [self](outcome_atom, uint32_t worker, Outcome& outcome, bool idle) {
        OnOutcome(self, worker, outcome, idle);
      },
      [self](outcome_atom, std::vector<WorkerOutcome>& outcomes) {
        for (WorkerOutcome& done : outcomes) {
          OnOutcome(self, done.worker, done.outcome, done.idle);
        }
      },
      [self](tick_atom) {
        auto& s = self->state;
        if (s.NowMicros() >= s.timer_armed_for) s.timer_armed_for = kNever;
        if (std::chrono::steady_clock::now() >= s.writes_blocked_until) {
          s.unblock_tick_pending = false;
        }
        ScheduleDispatch(self);
      },
      [self](drain_atom, DrainRequest& request) {
        auto& s = self->state;
        uint64_t id = s.next_drain_id++;
        if (request.timeout.count() > 0) {
          self->delayed_send(self, request.timeout, drain_atom::value, id);
        }
        s.drains.emplace(id, std::move(request));
        ScheduleDispatch(self);
      },
      [self](drain_atom, uint64_t id) {
        auto& s = self->state;
        auto it = s.drains.find(id);
        if (it == s.drains.end()) return;
        Completion done = std::move(it->second.done);
        s.drains.erase(it);
        done(Status::TimedOut("the queue did not drain within the timeout"));
      },
      [self](stop_atom, Completion& done, bool closing) {
        auto& s = self->state;
        s.stopping = true;
        s.closing |= closing;
        s.stops.push_back(std::move(done));
        Recall(
            self, [](const ClaimedTask&) { return true; },
            DeferReason::kStopping);
        // What is still running has started: its handler hears of the
        // stop through TaskContext::stopping.
        for (auto& [id, run] : s.running) run.control->RequestStop();
        ScheduleDispatch(self);
      },
      [self](pause_atom, const std::string& type, bool paused) {
        auto& s = self->state;
        if (paused) {
          // A pause stops tasks from starting, claimed ones too.
          Recall(
              self,
              [&type](const ClaimedTask& task) {
                return type.empty() || task.type == type;
              },
              DeferReason::kPaused);
        }
        s.StoreControl(
            type.empty() ? ControlKind::kPaused : ControlKind::kPausedType,
            type, SchedulerState::Flag(paused));
        if (type.empty()) {
          s.paused = paused;
        } else {
          if (paused) {
            s.paused_types.insert(type);
          } else {
            s.paused_types.erase(type);
          }
          s.TypeOf(type).paused = paused;
          s.RefreshType(type, s.NowMicros());
        }
        ScheduleDispatch(self);
      },
      [self](limit_atom, const std::string& group, uint32_t limit) {
        auto& s = self->state;
        s.groups[group].limit = limit;
        std::string value;
        storage::PutBigEndian32(&value, limit);
        s.StoreControl(ControlKind::kGroupLimit, group, std::move(value));
        s.RefreshGroup(group);
        ScheduleDispatch(self);
      },
      [self](gate_atom, const std::string& gate, bool open) {
        auto& s = self->state;
        s.SetGate(gate, open, s.NowMicros());
        if (!open) {
          Recall(
              self,
              [&](const ClaimedTask& task) {
                const auto& gates = s.TypeOf(task.type).policy.requires_gates;
                return std::find(gates.begin(), gates.end(), gate) !=
                       gates.end();
              },
              DeferReason::kGateClosed, gate);
        }
        ScheduleDispatch(self);
      },
      [self](control_atom, ControlCommand& command) {
        ForwardControl(self, command);
      },
      [self](dispatch_atom) { Dispatch(self); },
      [self](attach_atom, RemoteSlots& remote) { AttachRemote(self, remote); },
      [self](detach_atom, uint64_t session) { DetachRemote(self, session); },
  };
}

}  // namespace

int64_t FirstPeriodicSlot(const Schedule& schedule, bool catch_up,
                          std::optional<int64_t> last_stored_slot_us,
                          int64_t now_us) {
  auto micros = [](std::optional<Timestamp> t) {
    return t ? t->time_since_epoch().count() : kNever;
  };
  if (catch_up && last_stored_slot_us) {
    int64_t missed =
        micros(schedule.NextAfter(Timestamp(Duration(*last_stored_slot_us))));
    // Due at once; EnqueueDueSlots moves on to the latest slot that came.
    if (missed <= now_us) return missed;
  }
  int64_t from =
      last_stored_slot_us ? std::max(*last_stored_slot_us, now_us) : now_us;
  return micros(schedule.NextAfter(Timestamp(Duration(from))));
}

std::string ControlKey(ControlKind kind, std::string_view name) {
  std::string key(kControlPrefix);
  key.push_back(static_cast<char>(kind));
  storage::PutKeyString(&key, name);
  return key;
}

std::string RateStateKey(std::string_view type) {
  std::string key = "rate/";
  storage::PutKeyString(&key, type);
  return key;
}

scheduler_actor SpawnScheduler(caf::actor_system& system,
                               SchedulerConfig config) {
  return system.spawn<caf::detached>(SchedulerBehavior, std::move(config));
}

}  // namespace spool::actors
