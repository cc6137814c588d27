#include "actors/gateway.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/handler_registry.h"
#include "actors/remote_protocol.h"
#include "storage/queries.h"
#include "storage/record.h"
#include "storage/task_record_generated.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace spool::actors {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// One connected remote worker.
struct Session {
  std::string node;
  caf::actor peer;
  // Carried by every message of the session, both ways.
  std::string key;
  std::unordered_set<std::string> types;
  // The index of its first scheduler slot, once attached (UINT32_MAX
  // before); its slots are [first, first + slots).
  std::shared_ptr<std::atomic<uint32_t>> first;
  uint32_t slots = 0;
  SteadyTime lease_deadline;
  // Leases not yet sent: they go in one message at the next flush.
  std::vector<RemoteLease> outbox;
};

// One attempt handed to a remote worker.
struct Lease {
  uint64_t session = 0;
  uint32_t slot = 0;
  ClaimedTask task;
  bool revoked = false;
};

struct GatewayState {
  static inline const char* name = "spool.gateway";
  GatewayConfig config;
  std::shared_ptr<spdlog::logger> log;
  std::map<uint64_t, Session> sessions;
  std::unordered_map<caf::actor_addr, uint64_t> session_of_peer;
  std::unordered_map<uint64_t, Lease> leases;
  uint64_t next_session = 1;
  uint64_t next_lease = 1;
  // The spec as read; reused from lease to lease.
  std::string spec;
  bool started = false;
  bool stopping = false;
  // A flush_atom is on its way: the leases gathered until it arrives go
  // out together.
  bool flush_pending = false;
  // Leases whose node and deadline are not yet in the task's state: those
  // given since the last tick, and those given in the tick period before.
  // A tick records the older ones still held, so that an attempt that ends
  // within one tick period (most short tasks) costs the writer no state
  // rewrite for its lease; a longer one has its lease on disk one to two
  // tick periods (at most 100 ms) after it was given.
  std::vector<uint64_t> unrecorded_newer;
  std::vector<uint64_t> unrecorded_older;
};

using Self = gateway_actor::stateful_pointer<GatewayState>;

Status StatusOf(uint8_t code, const std::string& message) {
  using Code = Status::Code;
  switch (static_cast<Code>(code)) {
    case Code::kOk:
      return Status::OK();
    case Code::kNotFound:
      return Status::NotFound(message);
    case Code::kCorruption:
      return Status::Corruption(message);
    case Code::kInvalidArgument:
      return Status::InvalidArgument(message);
    case Code::kIOError:
      return Status::IOError(message);
    case Code::kBusy:
      return Status::Busy(message);
    case Code::kClosed:
      return Status::Closed(message);
    case Code::kFailedPrecondition:
      return Status::FailedPrecondition(message);
    case Code::kTimedOut:
      return Status::TimedOut(message);
    case Code::kNotSupported:
      return Status::NotSupported(message);
    case Code::kCancelled:
      return Status::Cancelled(message);
    default:
      return Status::Aborted(message);
  }
}

std::string PeerName(Self self) {
  return caf::to_string(self->current_sender());
}

void SendOutcome(Self self, uint32_t slot, Outcome outcome, bool idle) {
  self->send(self->state.config.scheduler, outcome_atom::value, slot,
             std::move(outcome), idle);
}

// The session is gone: its attempts are settled as a crash's would be, its
// slots detached, and the worker told (if it still listens) to start over.
void Lose(Self self, uint64_t id, const std::string& why) {
  auto& st = self->state;
  auto it = st.sessions.find(id);
  if (it == st.sessions.end()) return;
  Session session = std::move(it->second);
  st.sessions.erase(it);
  st.session_of_peer.erase(session.peer.address());
  std::vector<WorkerOutcome> lost;
  for (auto lease = st.leases.begin(); lease != st.leases.end();) {
    if (lease->second.session != id) {
      ++lease;
      continue;
    }
    WorkerOutcome done;
    done.worker = lease->second.slot;
    done.outcome.id = lease->second.task.id;
    done.outcome.attempt = lease->second.task.attempt;
    done.outcome.status = Status::Aborted(kInterruptedAttemptError);
    done.outcome.interrupted = true;
    lost.push_back(std::move(done));
    lease = st.leases.erase(lease);
  }
  st.log->warn(
      "remote worker '{}' (session {}) lost: {}; {} attempt(s) it held "
      "count as interrupted and run again",
      session.node, id, why, lost.size());
  if (!lost.empty()) {
    self->send(st.config.scheduler, outcome_atom::value, std::move(lost));
  }
  // By session, not by slot: the scheduler may not have attached the slots
  // yet (session.first unset), but it takes this after the attach, which
  // was sent before it.
  self->send(st.config.scheduler, detach_atom::value, id);
  self->demonitor(session.peer);
  caf::anon_send(session.peer, revoke_atom::value, id, session.key,
                 uint64_t{0});
}

// Forwards a slot's `run` to the gateway. Runs on CAF's shared threads:
// it only passes the message on.
worker_actor::behavior_type SlotBehavior(
    worker_actor::pointer, gateway_actor gateway, uint64_t session,
    std::shared_ptr<std::atomic<uint32_t>> first, uint32_t offset) {
  return {
      [gateway, session, first, offset](run_atom, ClaimedTask& task) {
        caf::anon_send(gateway, lease_atom::value, session,
                       first->load() + offset, std::move(task));
      },
  };
}

// A hello whose proof the door checked (gateway_door.h).
caf::result<RemoteWelcome> OnHello(Self self, RemoteHello& hello,
                                   caf::actor peer) {
  auto& st = self->state;
  if (st.stopping || !st.started) {
    return caf::make_error(caf::sec::invalid_argument,
                           st.stopping
                               ? "refused for now: the runtime is closing"
                               : "refused for now: not started yet");
  }
  std::string key = NewNonce();
  if (key.empty() || !peer) {
    return caf::make_error(caf::sec::runtime_error,
                           "refused for now: no random bytes for a key");
  }
  uint64_t id = st.next_session++;
  Session session;
  session.node = hello.node;
  session.peer = std::move(peer);
  session.key = key;
  session.types.insert(hello.types.begin(), hello.types.end());
  session.first = std::make_shared<std::atomic<uint32_t>>(UINT32_MAX);
  session.slots = hello.concurrency + st.config.claim_ahead;
  session.lease_deadline = std::chrono::steady_clock::now() + st.config.lease;
  self->monitor(session.peer);
  RemoteSlots slots;
  slots.session = id;
  slots.types.assign(session.types.begin(), session.types.end());
  gateway_actor gateway = self;
  for (uint32_t i = 0; i < session.slots; ++i) {
    slots.slots.push_back(
        self->system().spawn(SlotBehavior, gateway, id, session.first, i));
  }
  auto first = session.first;
  slots.attached = [first](uint32_t index) { first->store(index); };
  self->send(st.config.scheduler, attach_atom::value, std::move(slots));
  st.session_of_peer[session.peer.address()] = id;
  st.log->info("remote worker '{}' (session {}) connected: {} slot(s)",
               session.node, id, session.slots);
  st.sessions.emplace(id, std::move(session));
  return RemoteWelcome{id, std::move(key), st.config.heartbeat.count(),
                       st.config.lease.count()};
}

// Writes the lease into the task's state: who runs the attempt, until
// when (durable with the next commit; heartbeats extend it in memory only).
// Called from the tick, for leases held a tick period (unrecorded_older).
void RecordLease(Self self, const ClaimedTask& task, const std::string& node) {
  auto& st = self->state;
  if (!st.config.writer) return;
  ControlCommand command;
  command.kind = ControlCommand::Kind::kLease;
  command.id = task.id;
  command.text = node;
  command.lease_attempt = task.attempt;
  auto lease_us =
      std::chrono::duration_cast<std::chrono::microseconds>(st.config.lease);
  command.lease_deadline_us =
      st.config.clock->Now().time_since_epoch().count() + lease_us.count();
  auto log = st.log;
  TaskId id = task.id;
  command.done = [log, id](const Result<ControlResult>& result) {
    if (!result.ok()) {
      log->warn("recording the lease of task {} failed: {}", id,
                result.status().ToString());
    }
  };
  self->send(st.config.writer, control_atom::value, std::move(command));
}

// Whether the named rate limits let `task` be leased now, as a local
// worker asks them before it runs an attempt; else `outcome` says why not.
bool AdmittedByRate(GatewayState& st, const ClaimedTask& task,
                    const storage::fb::TaskSpec& spec, Outcome* outcome) {
  RateBuckets* buckets = st.config.rate_buckets.get();
  if (buckets == nullptr || buckets->empty() ||
      !buckets->LimitsType(task.type)) {
    return true;
  }
  TaskContext context = TaskContextBuilder::For(
      task, spec, storage::SpecPayload(spec), nullptr, {});
  std::optional<AdmittedBuckets> admitted;
  return AdmitByRate(buckets, task, context, &admitted, outcome);
}

// A claimed task for slot `slot` of `session`: read its spec and lease it.
void OnLease(Self self, uint64_t session_id, uint32_t slot, ClaimedTask& task) {
  auto& st = self->state;
  auto session = st.sessions.find(session_id);
  Outcome outcome;
  outcome.id = task.id;
  outcome.attempt = task.attempt;
  if (session == st.sessions.end() ||
      session->second.types.count(task.type) == 0) {
    // Gone meanwhile, or (which the scheduler's routing rules out) not a
    // type it serves: back unstarted.
    outcome.started = false;
    SendOutcome(self, slot, std::move(outcome), session != st.sessions.end());
    return;
  }
  const storage::fb::TaskSpec* spec = nullptr;
  Status s = st.config.store->GetSpec(task.id, &st.spec);
  if (s.ok()) s = storage::VerifySpec(task.id, st.spec, &spec);
  if (!s.ok()) {
    outcome.started = false;
    outcome.unreadable = true;
    outcome.status = s.WithContext("reading the task to lease it");
    SendOutcome(self, slot, std::move(outcome), true);
    return;
  }
  if (!AdmittedByRate(st, task, *spec, &outcome)) {
    SendOutcome(self, slot, std::move(outcome), true);
    return;
  }
  if (st.config.start_log != nullptr &&
      task.start_slot != storage::StartLog::kNoSlot) {
    st.config.start_log->Record(task.start_slot, task.id, task.attempt);
  }
  if (task.control) {
    task.control->MarkStarted(
        st.config.clock->Now().time_since_epoch().count());
  }
  auto text = [](const flatbuffers::String* v) {
    return v == nullptr ? std::string() : v->str();
  };
  RemoteLease lease;
  lease.lease = st.next_lease++;
  lease.task = task.id;
  lease.attempt = task.attempt;
  lease.max_attempts = task.max_attempts;
  lease.priority = task.priority;
  lease.previous_attempt_interrupted = task.previous_attempt_interrupted;
  lease.type = task.type;
  lease.payload.assign(storage::SpecPayload(*spec));
  lease.group = text(spec->group());
  lease.idempotency_key = text(spec->idempotency_key());
  st.unrecorded_newer.push_back(lease.lease);
  st.leases.emplace(lease.lease, Lease{session_id, slot, std::move(task)});
  session->second.outbox.push_back(std::move(lease));
  if (!st.flush_pending) {
    // Behind the lease messages already in the mailbox: those join this
    // one's message.
    st.flush_pending = true;
    self->send(self, flush_atom::value);
  }
}

void OnFlush(Self self) {
  auto& st = self->state;
  st.flush_pending = false;
  for (auto& [id, session] : st.sessions) {
    if (session.outbox.empty()) continue;
    caf::anon_send(session.peer, lease_atom::value, id, session.key,
                   std::exchange(session.outbox, {}));
  }
}

// Whether the message being handled comes from the worker that said hello
// for `session`: a session id alone proves nothing, anyone who reaches
// the port can guess one, and a sender can be claimed (BASP routed
// messages name their source), so the session's key decides.
bool FromItsWorker(Self self, const Session& session, const std::string& key) {
  return SecretsMatch(key, session.key) &&
         self->current_sender() == session.peer.address();
}

// What the worker reports, cut to what a local attempt could store: the
// result to max_result_bytes (beyond, the attempt fails as a local one
// whose result is too large would), the message to kMaxErrorBytes.
void BoundOutcome(const GatewayState& st, Outcome* outcome) {
  if (outcome->result && outcome->result->size() > st.config.max_result_bytes) {
    outcome->status = Status::InvalidArgument(
        "the remote worker's result of " +
        std::to_string(outcome->result->size()) +
        " bytes exceeds storage.max_result_bytes (" +
        std::to_string(st.config.max_result_bytes) + ")");
    outcome->result.reset();
    outcome->permanent = false;
  }
}

// The outcome of one leased attempt, as the scheduler takes it; nothing
// if its lease is no longer held.
std::optional<WorkerOutcome> TakeOutcome(Self self, uint64_t session_id,
                                         RemoteOutcome& remote) {
  auto& st = self->state;
  auto lease = st.leases.find(remote.lease);
  if (lease == st.leases.end() || lease->second.session != session_id ||
      lease->second.task.id != remote.task ||
      lease->second.task.attempt != remote.attempt) {
    st.log->warn(
        "refused the outcome of task {} attempt {} (lease {}, session {}): "
        "that lease was given away, the attempt's task runs elsewhere",
        remote.task, remote.attempt, remote.lease, session_id);
    return std::nullopt;
  }
  Outcome outcome;
  outcome.id = remote.task;
  outcome.attempt = remote.attempt;
  if (remote.message.size() > storage::kMaxErrorBytes) {
    remote.message = storage::CutError(std::move(remote.message));
  }
  outcome.status = StatusOf(remote.code, remote.message);
  outcome.permanent = remote.permanent;
  outcome.cancelled = remote.cancelled;
  outcome.stopped = remote.stopped;
  if (remote.delay_us >= 0) outcome.delay_us = remote.delay_us;
  if (remote.has_result) outcome.result = std::move(remote.result);
  BoundOutcome(st, &outcome);
  uint32_t slot = lease->second.slot;
  st.leases.erase(lease);
  return WorkerOutcome{slot, std::move(outcome), true};
}

void OnOutcomes(Self self, uint64_t session_id, const std::string& key,
                std::vector<RemoteOutcome>& remote) {
  auto& st = self->state;
  auto session = st.sessions.find(session_id);
  if (session == st.sessions.end() ||
      !FromItsWorker(self, session->second, key)) {
    if (remote.empty()) return;
    st.log->warn(
        "refused the outcome of task {} attempt {} (lease {}, session {}) "
        "and of {} more from {}: the session was dropped (its leases were "
        "given away) or that peer is not its worker",
        remote[0].task, remote[0].attempt, remote[0].lease, session_id,
        remote.size() - 1, PeerName(self));
    return;
  }
  if (remote.size() > session->second.slots) {
    // More than it can hold leases for: not a worker keeping to the
    // protocol. Its leases stay, and run out if it is gone.
    st.log->warn(
        "refused {} outcomes at once from remote worker '{}': it "
        "holds at most {} leases",
        remote.size(), session->second.node, session->second.slots);
    return;
  }
  session->second.lease_deadline =
      std::chrono::steady_clock::now() + st.config.lease;
  std::vector<WorkerOutcome> outcomes;
  outcomes.reserve(remote.size());
  for (RemoteOutcome& one : remote) {
    if (auto done = TakeOutcome(self, session_id, one)) {
      outcomes.push_back(std::move(*done));
    }
  }
  if (!outcomes.empty()) {
    self->send(st.config.scheduler, outcome_atom::value, std::move(outcomes));
  }
}

// Records the leases given in the tick period before the last tick that
// are still held; those given since wait for the next tick.
void RecordHeldLeases(Self self) {
  auto& st = self->state;
  for (uint64_t id : st.unrecorded_older) {
    auto lease = st.leases.find(id);
    if (lease == st.leases.end()) continue;  // ended, or its session lost
    auto session = st.sessions.find(lease->second.session);
    if (session == st.sessions.end()) continue;
    RecordLease(self, lease->second.task, session->second.node);
  }
  st.unrecorded_older = std::exchange(st.unrecorded_newer, {});
  st.unrecorded_newer.reserve(st.unrecorded_older.size());
}

// Expires sessions past their lease, and passes cancels (Runtime::Cancel,
// a timeout) on to the workers running those attempts.
void OnTick(Self self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  std::vector<uint64_t> expired;
  for (auto& [id, session] : st.sessions) {
    if (session.lease_deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Lose(self, id,
         "no heartbeat within " + std::to_string(st.config.lease.count()) +
             " ms (remote.lease_ms)");
  }
  // A revoke must not overtake the lease it names.
  if (st.flush_pending) OnFlush(self);
  RecordHeldLeases(self);
  for (auto& [id, lease] : st.leases) {
    if (lease.revoked || !lease.task.control ||
        !lease.task.control->cancelled()) {
      continue;
    }
    lease.revoked = true;
    auto session = st.sessions.find(lease.session);
    if (session != st.sessions.end()) {
      caf::anon_send(session->second.peer, revoke_atom::value, lease.session,
                     session->second.key, id);
    }
  }
  if (!st.stopping) {
    // Fine enough that a lease expires at most 50 ms late (the goal is
    // re-dispatch within lease + 100 ms), and cheap: one pass over the
    // sessions and leases.
    auto period = std::min({st.config.heartbeat, st.config.lease / 10,
                            std::chrono::milliseconds(50)});
    self->delayed_send(self, std::max(period, std::chrono::milliseconds(5)),
                       tick_atom::value);
  }
}

gateway_actor::behavior_type GatewayBehavior(Self self, GatewayConfig config) {
  NameThisThread("spool-gateway");
  storage::DisablePerfCountersOnThisThread();
  self->state.config = std::move(config);
  self->state.log = Logger();
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    auto it = st.session_of_peer.find(down.source);
    if (it == st.session_of_peer.end()) return;
    Lose(self, it->second, "its connection went down");
  });
  self->send(self, tick_atom::value);
  return {
      [self](hello_atom, RemoteHello& hello, caf::actor peer) {
        return OnHello(self, hello, std::move(peer));
      },
      [self](heartbeat_atom, uint64_t session_id, std::string& key) {
        auto& st = self->state;
        auto it = st.sessions.find(session_id);
        if (it != st.sessions.end() && !FromItsWorker(self, it->second, key)) {
          return;  // a guessed session id: not its worker's heartbeat
        }
        if (it == st.sessions.end()) {
          // Dropped (e.g. it stalled past its lease): it must say hello
          // again, and its leases are gone. The key it sent comes back, so
          // that only the worker holding it takes the revoke.
          caf::anon_send(caf::actor_cast<caf::actor>(self->current_sender()),
                         revoke_atom::value, session_id, std::move(key),
                         uint64_t{0});
          return;
        }
        it->second.lease_deadline =
            std::chrono::steady_clock::now() + st.config.lease;
      },
      [self](outcome_atom, uint64_t session_id, std::string& key,
             std::vector<RemoteOutcome>& outcomes) {
        OnOutcomes(self, session_id, key, outcomes);
      },
      [self](lease_atom, uint64_t session_id, uint32_t slot,
             ClaimedTask& task) { OnLease(self, session_id, slot, task); },
      [self](tick_atom) { OnTick(self); },
      [self](flush_atom) { OnFlush(self); },
      [self](start_atom) { self->state.started = true; },
      [self](stop_atom) {
        auto& st = self->state;
        st.stopping = true;
        std::vector<uint64_t> ids;
        for (auto& [id, session] : st.sessions) ids.push_back(id);
        for (uint64_t id : ids) Lose(self, id, "the runtime is closing");
        self->quit();
      },
  };
}

}  // namespace

void RegisterRemoteTypes(caf::actor_system_config* config) {
  config->add_message_type<RemoteHello>("spool.RemoteHello");
  config->add_message_type<RemoteWelcome>("spool.RemoteWelcome");
  config->add_message_type<RemoteLease>("spool.RemoteLease");
  config->add_message_type<RemoteOutcome>("spool.RemoteOutcome");
  config->add_message_type<std::vector<RemoteLease>>(
      "std::vector<spool.RemoteLease>");
  config->add_message_type<std::vector<RemoteOutcome>>(
      "std::vector<spool.RemoteOutcome>");
}

gateway_actor SpawnGateway(caf::actor_system& system, GatewayConfig config) {
  return system.spawn<caf::detached>(GatewayBehavior, std::move(config));
}

}  // namespace spool::actors
