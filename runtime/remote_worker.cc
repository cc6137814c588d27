// spool::RemoteWorker (include/spool/remote_worker.h): a CAF actor system
// of its own with the middleman, one "node" actor that talks to the
// gateway, and a thread per unit of concurrency running handlers.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include <spool/remote_worker.h>
#include <spool/secret_file.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

#include "actors/actors.h"
#include "actors/attempt_control.h"
#include "actors/handler_registry.h"
#include "actors/network_facing.h"
#include "actors/remote_protocol.h"
#include "runtime/remote_tls.h"
#include "runtime/runtime_impl.h"
#include "util/logging.h"

// The node actor's local messages: of types never announced to the
// network, so that no peer can send them (actors/network_facing.h).
namespace spool::remote_node {
// (Re)connect and say hello.
struct Connect {};
// Time for the next heartbeat.
struct Tick {
  int64_t period_ms = 0;
};
// A handler thread finished an attempt of `session`.
struct Finished {
  uint64_t session = 0;
  actors::RemoteOutcome outcome;
};
// Send the gathered outcomes.
struct Flush {};
// Close: flush and quit.
struct Stop {};
}  // namespace spool::remote_node

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::remote_node::Connect)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::remote_node::Tick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::remote_node::Finished)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::remote_node::Flush)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spool::remote_node::Stop)

namespace spool {
namespace {

using actors::RemoteLease;
using actors::RemoteOutcome;
namespace node = remote_node;

// A lease waiting for a thread, or running on one.
struct Work {
  uint64_t session = 0;
  RemoteLease lease;
  std::shared_ptr<internal::AttemptControl> control;
};

class RemoteWorkerImpl;

// What the node actor shares with the worker object.
// The gateways a worker may reach, "HOST:PORT" each: one, or every node of
// a cluster (only its primary listens; the others refuse the connection).
using GatewayList = std::vector<std::pair<std::string, uint16_t>>;

// "HOST:PORT[,HOST:PORT...]" into *gateways: 1 to 16 of them, each with
// a port in [1, 65535].
Status ParseGateways(const std::string& connect, GatewayList* gateways) {
  gateways->clear();
  size_t start = 0;
  while (start <= connect.size()) {
    size_t comma = connect.find(',', start);
    std::string one = connect.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t colon = one.rfind(':');
    std::string port = colon == std::string::npos ? "" : one.substr(colon + 1);
    if (colon == std::string::npos || colon == 0 || port.empty() ||
        port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) == 0 || std::stoi(port) > 65535 ||
        gateways->size() == 16) {
      return Status::InvalidArgument(
          "RemoteWorkerOptions::connect must be \"HOST:PORT\", or up to 16 "
          "of them separated by commas (a cluster's nodes), each with a port "
          "in [1, 65535], got \"" +
          connect.substr(0, 300) + "\"");
    }
    gateways->emplace_back(one.substr(0, colon),
                           static_cast<uint16_t>(std::stoi(port)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::OK();
}

struct NodeState {
  RemoteWorkerImpl* worker = nullptr;
  // Which of the gateways the next connect tries: the next one in turn
  // after each failed try or lost connection.
  size_t next_gateway = 0;
  // The gateway's door.
  caf::actor gateway;
  uint64_t session = 0;
  // The session's key (RemoteWelcome), and the key of the session before,
  // whose outcomes may still be on their way.
  std::string key;
  uint64_t previous_session = 0;
  std::string previous_key;
  std::chrono::milliseconds backoff{0};
  bool refused = false;
  // A connect to the gateway is on its way to the middleman.
  bool connecting = false;
  // Outcomes not yet sent, by session: they go in one message per session
  // at the next flush.
  std::map<uint64_t, std::vector<RemoteOutcome>> outbox;
  bool flush_pending = false;
};

class RemoteWorkerImpl final : public RemoteWorker {
 public:
  RemoteWorkerImpl(RemoteWorkerOptions options, std::string secret)
      : options_(std::move(options)), secret_(std::move(secret)) {
    if (options_.node.empty()) {
      char host[256] = {0};
      ::gethostname(host, sizeof host - 1);
      options_.node = std::string(host) + ":" + std::to_string(::getpid());
    }
  }
  ~RemoteWorkerImpl() override {
    static_cast<void>(Close(std::chrono::seconds(10)));
    Release();
  }

  Status RegisterHandler(const std::string& type, Handler handler,
                         HandlerOptions options) override {
    if (type.empty()) return Status::InvalidArgument("type must not be empty");
    if (!handler) return Status::InvalidArgument("handler must not be null");
    std::lock_guard<std::mutex> lock(mutex_);
    if (connected_once_) {
      return Status::FailedPrecondition(
          "RegisterHandler after Connect: the gateway was told the types");
    }
    handlers_[type] =
        actors::RegisteredHandler{std::move(handler), std::move(options)};
    return Status::OK();
  }

  Status Connect() override;
  Status Close(std::chrono::milliseconds timeout) override;
  uint64_t finished() const override { return finished_.load(); }
  uint64_t reconnects() const override { return reconnects_.load(); }

  // Called by the node actor: the hello answering the door's challenge,
  // with its proof.
  actors::RemoteHello Hello(std::string door_nonce,
                            std::string worker_nonce) const {
    actors::RemoteHello hello;
    hello.door_nonce = std::move(door_nonce);
    hello.worker_nonce = std::move(worker_nonce);
    hello.node = options_.node;
    for (const auto& [type, entry] : handlers_) hello.types.push_back(type);
    hello.concurrency = options_.concurrency;
    hello.proof = actors::WorkerProof(secret_, hello);
    return hello;
  }
  // Whether the door's answer to `worker_nonce` proves it holds the secret.
  bool DoorProves(const std::string& worker_nonce,
                  const std::string& door_nonce,
                  const std::string& proof) const {
    return actors::SecretsMatch(
        proof, actors::DoorProof(secret_, worker_nonce, door_nonce));
  }
  const RemoteWorkerOptions& options() const { return options_; }
  RemoteTlsFiles tls() const {
    return {options_.tls_certificate_file, options_.tls_key_file,
            options_.tls_ca_file};
  }
  void Answered(const Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!first_answer_) first_answer_ = status;
    cv_.notify_all();
  }
  void Enqueue(uint64_t session, std::vector<RemoteLease>& leases) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    for (RemoteLease& lease : leases) {
      Work work;
      work.session = session;
      work.control = std::make_shared<internal::AttemptControl>(
          lease.task, std::shared_ptr<ProgressBoard>());
      work.lease = std::move(lease);
      queue_.push_back(std::move(work));
    }
    if (leases.size() == 1) {
      cv_.notify_one();
    } else {
      cv_.notify_all();
    }
  }
  // The session is gone: its running attempts are asked to stop, its
  // queued ones dropped (the runtime settles them).
  void CancelSession(uint64_t session) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [lease, work] : running_) {
      if (work.session == session) work.control->Cancel();
    }
    std::deque<Work> kept;
    for (Work& work : queue_) {
      if (work.session != session) kept.push_back(std::move(work));
    }
    queue_.swap(kept);
  }
  // Cancels the attempt of `lease`, running or still queued (its handler
  // then starts cancelled).
  void CancelLease(uint64_t lease) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = running_.find(lease);
    if (it != running_.end()) it->second.control->Cancel();
    for (Work& work : queue_) {
      if (work.lease.lease == lease) work.control->Cancel();
    }
  }
  void CountReconnect() { reconnects_.fetch_add(1); }

 private:
  void RunThread();
  RemoteOutcome RunOne(const Work& work);
  // Joins the handler threads (however long their handlers take), then
  // stops the actor system. After Close.
  void Release();

  RemoteWorkerOptions options_;
  const std::string secret_;
  std::map<std::string, actors::RegisteredHandler> handlers_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  std::unordered_map<uint64_t, Work> running_;
  bool connected_once_ = false;
  bool closing_ = false;
  bool closed_ = false;
  // Handler threads that have returned; Close waits on it.
  size_t threads_exited_ = 0;
  std::condition_variable threads_exited_cv_;
  std::optional<Status> first_answer_;
  std::atomic<uint64_t> finished_{0};
  std::atomic<uint64_t> reconnects_{0};
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::actor node_;
  std::vector<std::thread> threads_;
};

class NodeActor;
caf::behavior NodeBehavior(NodeActor* self, RemoteWorkerImpl* worker,
                           GatewayList gateways);

// The actor that talks to the gateway. Whoever the gateway's node routes
// for can send it messages, so it takes only its protocol's
// (network_facing.h) and each lease or revoke only with its session's key.
//
// It runs on CAF's shared threads and never blocks: it connects through
// the middleman actor's asynchronous `connect`, not the blocking
// remote_actor(). Not detached on purpose: CAF 0.17.6's actor_system
// destructor waits until every detached actor is *destroyed*, so one
// reference left anywhere in the system (a timeout, a message in flight)
// held RemoteWorker::Close forever (remote_test, about 1 run in 30).
class NodeActor final : public actors::NetworkFacing<caf::event_based_actor> {
 public:
  NodeActor(caf::actor_config& config, RemoteWorkerImpl* worker,
            GatewayList gateways)
      : NetworkFacing(config),
        worker_(worker),
        gateways_(std::move(gateways)),
        middleman_address_(Middleman().address()) {}

  // The middleman actor that connects (the TLS one when TLS is on). Looked
  // up, not kept: a strong handle here would keep that detached actor, and
  // with it the actor system's destructor, waiting on this one.
  caf::io::middleman_actor Middleman() {
    return worker_->tls().enabled() ? system().openssl_manager().actor_handle()
                                    : system().middleman().actor_handle();
  }

  const char* name() const override { return "spool.remote_node"; }
  caf::behavior make_behavior() override {
    return NodeBehavior(this, worker_, gateways_);
  }

  // Drops the gateway's proxy and the outbox when the actor quits, as a
  // stateful_actor drops its state: whatever still holds this actor does
  // not hold them.
  void on_exit() override { state = NodeState{}; }

  NodeState state;

 protected:
  bool Admit(const caf::mailbox_element& element) const override {
    const caf::type_erased_tuple& content = element.content();
    if (element.mid.is_response()) {
      // The middleman's answer to `connect` only from the middleman.
      if (content.match_elements<caf::node_id, caf::strong_actor_ptr,
                                 std::set<std::string>>()) {
        return element.sender != nullptr &&
               element.sender->address() == middleman_address_;
      }
      // The door's answer to the challenge, the gateway's to the hello,
      // or an error (a request's timeout among them).
      return content.match_elements<std::string, std::string>() ||
             content.match_elements<actors::RemoteWelcome>() ||
             content.match_elements<caf::error>();
    }
    if (element.mid.is_request()) return false;
    return actors::IsMessage<actors::lease_atom, uint64_t, std::string,
                             std::vector<RemoteLease>>(content) ||
           actors::IsMessage<actors::revoke_atom, uint64_t, std::string,
                             uint64_t>(content) ||
           content.match_elements<caf::down_msg>() ||
           content.match_elements<node::Connect>() ||
           content.match_elements<node::Tick>() ||
           content.match_elements<node::Finished>() ||
           content.match_elements<node::Flush>() ||
           content.match_elements<node::Stop>();
  }

 private:
  RemoteWorkerImpl* worker_;
  GatewayList gateways_;
  // Set once, before any message: Admit reads it on senders' threads.
  const caf::actor_addr middleman_address_;
};

using NodeSelf = NodeActor*;

// The key of `session`, if this worker still knows it.
std::string KeyOf(const NodeState& st, uint64_t session) {
  if (session == st.session) return st.key;
  if (session == st.previous_session) return st.previous_key;
  return std::string();
}

// Sends the gathered outcomes, one message per session. Sent even for a
// session since dropped: the gateway refuses them, and logs that it did.
void FlushOutcomes(NodeSelf self) {
  auto& st = self->state;
  st.flush_pending = false;
  if (st.gateway) {
    for (auto& [session, outcomes] : st.outbox) {
      self->send(st.gateway, actors::outcome_atom::value, session,
                 KeyOf(st, session), std::move(outcomes));
    }
  }
  st.outbox.clear();
}

void Retry(NodeSelf self) {
  auto& st = self->state;
  const RemoteWorkerOptions& o = st.worker->options();
  st.backoff = st.backoff.count() == 0
                   ? o.reconnect_initial
                   : std::min(st.backoff * 2, o.reconnect_max);
  self->delayed_send(self, st.backoff, node::Connect{});
}

// The gateway refused this worker for good, or could not prove it is the
// gateway: retrying cannot help.
void GiveUp(NodeSelf self, const std::string& why) {
  auto& st = self->state;
  st.refused = true;
  Logger()->error("{}", why);
  st.worker->Answered(Status::InvalidArgument(why));
}

// The hello, once the door answered the challenge with `door_nonce`.
void SendHello(NodeSelf self, std::string door_nonce,
               std::string worker_nonce) {
  auto& st = self->state;
  self->request(
          st.gateway, std::chrono::seconds(10), actors::hello_atom::value,
          st.worker->Hello(std::move(door_nonce), std::move(worker_nonce)))
      .then(
          [self](actors::RemoteWelcome& welcome) {
            auto& s = self->state;
            s.previous_session = s.session;
            s.previous_key = std::move(s.key);
            s.session = welcome.session;
            s.key = std::move(welcome.key);
            s.backoff = std::chrono::milliseconds(0);
            s.worker->Answered(Status::OK());
            self->send(self, node::Tick{welcome.heartbeat_ms});
          },
          [self](caf::error& error) {
            std::string why = self->system().render(error);
            if (why.find("refused: the secret") != std::string::npos) {
              GiveUp(self, "the gateway refused this worker: " + why);
              return;
            }
            Logger()->warn("hello to the gateway failed: {}; retrying", why);
            Retry(self);
          });
}

// The handshake (actors/remote_protocol.h): a challenge, then the hello.
void SayHello(NodeSelf self) {
  auto& st = self->state;
  std::string worker_nonce = actors::NewNonce();
  self->request(st.gateway, std::chrono::seconds(10),
                actors::challenge_atom::value, worker_nonce)
      .then(
          [self, worker_nonce](std::string& door_nonce, std::string& proof) {
            if (!self->state.worker->DoorProves(worker_nonce, door_nonce,
                                                proof)) {
              GiveUp(self,
                     "the gateway could not prove it holds the secret: it "
                     "is not spool's gateway, or its secret differs");
              return;
            }
            SendHello(self, std::move(door_nonce), worker_nonce);
          },
          [self](caf::error& error) {
            Logger()->warn("challenge to the gateway failed: {}; retrying",
                           self->system().render(error));
            Retry(self);
          });
}

// Connects to the next gateway without blocking, then says hello.
void ConnectToGateway(NodeSelf self, const GatewayList& gateways) {
  auto& st = self->state;
  if (st.connecting) return;  // the answer of the last try is on its way
  st.connecting = true;
  const auto& [host, port] = gateways[st.next_gateway % gateways.size()];
  caf::io::middleman_actor middleman = self->Middleman();
  self->request(middleman, std::chrono::seconds(30), caf::connect_atom::value,
                host, port)
      .then(
          [self](const caf::node_id&, caf::strong_actor_ptr& gateway,
                 const std::set<std::string>&) {
            auto& s = self->state;
            s.connecting = false;
            if (!gateway) {
              Logger()->info("the gateway's port published no actor");
              ++s.next_gateway;
              Retry(self);
              return;
            }
            s.gateway = caf::actor_cast<caf::actor>(std::move(gateway));
            self->monitor(s.gateway);
            SayHello(self);
          },
          [self, host = host, port = port](caf::error& error) {
            self->state.connecting = false;
            ++self->state.next_gateway;
            Logger()->info("cannot reach the gateway at {}:{}: {}", host, port,
                           self->system().render(error));
            Retry(self);
          });
}

caf::behavior NodeBehavior(NodeActor* self, RemoteWorkerImpl* worker,
                           GatewayList gateways) {
  self->state.worker = worker;
  self->set_down_handler([self](caf::down_msg& down) {
    auto& st = self->state;
    if (down.source != st.gateway.address()) return;
    Logger()->warn("lost the connection to the gateway; reconnecting");
    // A cluster's primary that died: its successor is another node.
    ++st.next_gateway;
    st.worker->CancelSession(st.session);
    st.session = 0;
    st.gateway = nullptr;
    st.worker->CountReconnect();
    Retry(self);
  });
  return {
      [self, gateways](node::Connect) {
        auto& st = self->state;
        if (st.refused) return;
        if (!st.gateway) {
          ConnectToGateway(self, gateways);
          return;
        }
        SayHello(self);
      },
      [self](node::Tick tick) {
        auto& st = self->state;
        if (st.session == 0 || !st.gateway) return;  // a newer loop runs
        self->send(st.gateway, actors::heartbeat_atom::value, st.session,
                   st.key);
        self->delayed_send(self, std::chrono::milliseconds(tick.period_ms),
                           tick);
      },
      [self](actors::lease_atom, uint64_t session, const std::string& key,
             std::vector<RemoteLease>& leases) {
        auto& st = self->state;
        if (session != st.session || !actors::SecretsMatch(key, st.key)) {
          return;  // not from this session's gateway
        }
        st.worker->Enqueue(session, leases);
      },
      [self](actors::revoke_atom, uint64_t session, const std::string& key,
             uint64_t lease) {
        auto& st = self->state;
        if (session != st.session || !actors::SecretsMatch(key, st.key)) {
          return;  // not from this session's gateway
        }
        if (lease != 0) {
          st.worker->CancelLease(lease);
          return;
        }
        // The gateway dropped the session (its lease ran out): start over.
        Logger()->warn("the gateway dropped session {}; saying hello again",
                       session);
        st.worker->CancelSession(session);
        st.session = 0;
        st.worker->CountReconnect();
        self->send(self, node::Connect{});
      },
      [self](node::Finished& finished) {
        auto& st = self->state;
        st.outbox[finished.session].push_back(std::move(finished.outcome));
        if (!st.flush_pending) {
          // Behind the outcomes already in the mailbox: those join this
          // one's message.
          st.flush_pending = true;
          self->send(self, node::Flush{});
        }
      },
      [self](node::Flush) { FlushOutcomes(self); },
      [self](node::Stop) {
        FlushOutcomes(self);  // the flush_atom may be behind the stop
        self->quit();
      },
  };
}

RemoteOutcome RemoteWorkerImpl::RunOne(const Work& work) {
  const RemoteLease& lease = work.lease;
  RemoteOutcome remote;
  remote.lease = lease.lease;
  remote.task = lease.task;
  remote.attempt = lease.attempt;
  auto entry = handlers_.find(lease.type);
  if (entry == handlers_.end()) {
    remote.code = static_cast<uint8_t>(Status::Code::kNotFound);
    remote.message = "no handler for task type '" + lease.type +
                     "' on remote worker " + options_.node;
    return remote;
  }
  actors::ClaimedTask task;
  task.id = lease.task;
  task.attempt = lease.attempt;
  task.max_attempts = lease.max_attempts;
  task.priority = lease.priority;
  task.type = lease.type;
  task.previous_attempt_interrupted = lease.previous_attempt_interrupted;
  actors::AttemptInputs inputs{options_.max_result_bytes, 0, nullptr};
  actors::Outcome outcome = actors::RunLeasedAttempt(
      entry->second, task, lease.payload, lease.group, lease.idempotency_key,
      work.control.get(), inputs);
  remote.code = static_cast<uint8_t>(outcome.status.code());
  remote.message = outcome.status.message();
  remote.permanent = outcome.permanent;
  remote.cancelled = outcome.cancelled;
  remote.stopped = outcome.stopped;
  if (outcome.delay_us) remote.delay_us = *outcome.delay_us;
  if (outcome.result) {
    remote.has_result = true;
    remote.result = std::move(*outcome.result);
  }
  return remote;
}

void RemoteWorkerImpl::RunThread() {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) {
        ++threads_exited_;
        threads_exited_cv_.notify_all();
        return;
      }
      work = std::move(queue_.front());
      queue_.pop_front();
      running_[work.lease.lease] = work;
    }
    RemoteOutcome outcome = RunOne(work);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.erase(work.lease.lease);
    }
    caf::anon_send(node_, node::Finished{work.session, std::move(outcome)});
    finished_.fetch_add(1);
  }
}

Status RemoteWorkerImpl::Connect() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (connected_once_) return Status::FailedPrecondition("already connected");
    if (handlers_.empty()) {
      return Status::FailedPrecondition(
          "Connect: register at least one handler first");
    }
    connected_once_ = true;
  }
  const std::string& connect = options_.connect;
  GatewayList gateways;
  static_cast<void>(ParseGateways(connect, &gateways));  // checked by Create
  config_ = std::make_unique<caf::actor_system_config>();
  config_->set("scheduler.max-threads", size_t{2});
  LoadMiddleman(config_.get());
  if (tls().enabled()) LoadRemoteTls(config_.get(), tls());
  system_ = std::make_unique<caf::actor_system>(*config_);
  CloseNamedActors(*system_);
  for (uint32_t i = 0; i < options_.concurrency; ++i) {
    threads_.emplace_back([this] { RunThread(); });
  }
  node_ = system_->spawn<NodeActor>(this, std::move(gateways));
  caf::anon_send(node_, node::Connect{});
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, options_.connect_timeout,
                    [this] { return first_answer_.has_value(); })) {
    return Status::IOError(
        "no answer from the gateway at " + connect + " within " +
        std::to_string(options_.connect_timeout.count()) + " ms; still trying");
  }
  return *first_answer_;
}

Status RemoteWorkerImpl::Close(std::chrono::milliseconds timeout) {
  size_t still_running = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closed_) return Status::OK();
    closed_ = true;
    closing_ = true;
    queue_.clear();
    for (auto& [lease, work] : running_) work.control->RequestStop();
    cv_.notify_all();
    // Cooperative: handlers see TaskContext::stopping.
    threads_exited_cv_.wait_for(
        lock, timeout, [this] { return threads_exited_ == threads_.size(); });
    still_running = threads_.size() - threads_exited_;
  }
  if (node_) {
    // After the outcomes the threads sent (one mailbox, in order). The
    // handle stays: a late handler's outcome goes to the stopped actor,
    // and is dropped.
    caf::anon_send(node_, node::Stop{});
  }
  if (still_running > 0) {
    // The gateway sees the session end and settles those attempts as
    // interrupted; their threads are joined by the destructor.
    return Status::TimedOut(
        std::to_string(still_running) +
        " handler(s) still running after the close timeout of " +
        std::to_string(timeout.count()) +
        " ms; disconnected without them (the runtime runs those tasks again)");
  }
  Release();
  return Status::OK();
}

void RemoteWorkerImpl::Release() {
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  node_ = nullptr;
  system_.reset();
  config_.reset();
}

}  // namespace

Status RemoteWorker::Create(RemoteWorkerOptions options,
                            std::unique_ptr<RemoteWorker>* worker) {
  if (worker == nullptr) return Status::InvalidArgument("worker is null");
  GatewayList gateways;
  if (Status s = ParseGateways(options.connect, &gateways); !s.ok()) return s;
  if (options.concurrency < 1 || options.concurrency > 4096) {
    return Status::InvalidArgument(
        "RemoteWorkerOptions::concurrency must be in [1, 4096], got " +
        std::to_string(options.concurrency));
  }
  if (Status s = CheckRemoteTls("RemoteWorkerOptions::tls_",
                                {options.tls_certificate_file,
                                 options.tls_key_file, options.tls_ca_file});
      !s.ok()) {
    return s;
  }
  std::string secret = options.secret;
  if (secret.empty()) {
    if (options.secret_file.empty()) {
      return Status::InvalidArgument(
          "RemoteWorkerOptions: set secret or secret_file (the gateway "
          "refuses a worker without the secret)");
    }
    Status s = LoadSecretFile("secret file", options.secret_file, &secret);
    if (!s.ok()) return s;
  }
  *worker =
      std::make_unique<RemoteWorkerImpl>(std::move(options), std::move(secret));
  return Status::OK();
}

}  // namespace spool
