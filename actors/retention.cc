#include "actors/retention.h"

#include <chrono>
#include <limits>
#include <string>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "util/logging.h"

namespace spool::actors {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// After each step, retention waits this many times as long as the step
// took (from sent to committed) before it sends the next one, so that the
// queue's own claims and outcomes have the writer most of the time
// (docs/experiments.md, entries 42 and 43).
constexpr int kPauseFactor = 9;

struct RetentionState {
  static inline const char* name = "spool.retention";

  RetentionConfig config;
  std::shared_ptr<spdlog::logger> log;
  bool stopping = false;
  // A step is at the writer.
  bool in_flight = false;
  // The pass under way: its rule, the index key to resume from, the age
  // cut-off of the rule's walk, and what it has done so far.
  bool in_pass = false;
  size_t rule = 0;
  std::string cursor;
  int64_t cutoff_us = 0;
  uint64_t deleted = 0;
  uint64_t steps = 0;
  int64_t pass_started_us = 0;
  int64_t next_pass_us = 0;
  // The due time of the earliest timer message on its way.
  int64_t timer_armed_for = kNever;
  // When the step in flight was sent; when the pass may send the next.
  std::chrono::steady_clock::time_point step_sent;
  std::chrono::steady_clock::time_point resume_at;
  std::vector<Completion> stops;

  int64_t NowMicros() const {
    return config.clock->Now().time_since_epoch().count();
  }
};

using Self = retention_actor::stateful_pointer<RetentionState>;

void ArmTimer(Self self) {
  auto& st = self->state;
  int64_t now = st.NowMicros();
  if (now >= st.next_pass_us) {
    self->send(self, tick_atom::value);
    return;
  }
  if (st.next_pass_us >= st.timer_armed_for) return;
  st.timer_armed_for = st.next_pass_us;
  auto delay =
      std::chrono::microseconds(std::max<int64_t>(st.next_pass_us - now, 0));
  self->delayed_send(self, delay, tick_atom::value);
}

void SendStep(Self self) {
  auto& st = self->state;
  const RetentionRule& rule = st.config.rules[st.rule];
  ControlCommand command;
  command.kind = ControlCommand::Kind::kPurge;
  command.purge_statuses = 1u << static_cast<unsigned>(rule.status);
  command.purge_failed = rule.failed;
  command.purge_updated_before_us = st.cutoff_us;
  command.purge_cursor_key = st.cursor;
  command.purge_step = st.config.batch_size;
  retention_actor me = self;
  command.done = [me](const Result<ControlResult>& result) {
    caf::anon_send(me, purged_atom::value, result);
  };
  st.in_flight = true;
  st.step_sent = std::chrono::steady_clock::now();
  self->send(st.config.writer, control_atom::value, std::move(command));
}

// Makes the pass's rule `index` the one the next step walks.
void BeginRule(RetentionState& st, size_t index) {
  st.rule = index;
  st.cursor.clear();
  st.cutoff_us = st.NowMicros() - st.config.rules[index].age_us;
}

// The next step of the pass goes once the pause after the last has passed
// (a tick on the way then sends it).
void PauseThenStep(Self self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  auto pause = (now - st.step_sent) * kPauseFactor;
  st.resume_at = now + pause;
  self->delayed_send(
      self, std::chrono::duration_cast<std::chrono::microseconds>(pause),
      tick_atom::value);
}

void EndPass(Self self) {
  auto& st = self->state;
  if (st.deleted > 0) {
    st.log->info("retention: deleted {} finished task(s) in {} step(s)",
                 st.deleted, st.steps);
  }
  st.in_pass = false;
  // Due already when the pass took longer than the interval (or the clock
  // jumped meanwhile): then the next one starts at once.
  st.next_pass_us = st.pass_started_us + st.config.interval_us;
  ArmTimer(self);
}

void OnTick(Self self) {
  auto& st = self->state;
  int64_t now = st.NowMicros();
  if (now >= st.timer_armed_for) st.timer_armed_for = kNever;
  if (st.stopping || st.in_flight) return;
  if (st.in_pass) {
    if (std::chrono::steady_clock::now() >= st.resume_at) SendStep(self);
    return;
  }
  if (now < st.next_pass_us) {
    ArmTimer(self);
    return;
  }
  st.in_pass = true;
  st.pass_started_us = now;
  st.deleted = 0;
  st.steps = 0;
  BeginRule(st, 0);
  SendStep(self);
}

void OnPurged(Self self, const Result<ControlResult>& result) {
  auto& st = self->state;
  st.in_flight = false;
  if (st.stopping) {
    for (Completion& done : st.stops) done(Status::OK());
    st.stops.clear();
    return;
  }
  if (!result.ok()) {
    st.log->warn("retention: a purge step failed, next pass in {} s: {}",
                 st.config.interval_us / 1'000'000, result.status().ToString());
    EndPass(self);
    return;
  }
  ++st.steps;
  st.deleted += result->count;
  if (st.config.after_step) st.config.after_step(result->count);
  if (result->more) {
    st.cursor = result->cursor_key;
  } else if (st.rule + 1 < st.config.rules.size()) {
    BeginRule(st, st.rule + 1);
  } else {
    EndPass(self);
    return;
  }
  PauseThenStep(self);
}

retention_actor::behavior_type RetentionBehavior(Self self,
                                                 RetentionConfig config) {
  auto& st = self->state;
  st.config = std::move(config);
  st.log = Logger();
  st.next_pass_us = st.NowMicros();
  self->send(self, tick_atom::value);
  return {
      [self](tick_atom) { OnTick(self); },
      [self](purged_atom, const Result<ControlResult>& result) {
        OnPurged(self, result);
      },
      [self](stop_atom, Completion& done) {
        auto& s = self->state;
        s.stopping = true;
        if (s.in_flight) {
          s.stops.push_back(std::move(done));
        } else {
          done(Status::OK());
        }
      },
  };
}

}  // namespace

retention_actor SpawnRetention(caf::actor_system& system,
                               RetentionConfig config) {
  return system.spawn(RetentionBehavior, std::move(config));
}

}  // namespace spool::actors
