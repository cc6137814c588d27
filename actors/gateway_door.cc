#include "actors/gateway_door.h"

#include <deque>
#include <unordered_map>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/network_facing.h"
#include "actors/remote_protocol.h"
#include "util/logging.h"

namespace spool::actors {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

class GatewayDoor final : public NetworkFacing<caf::event_based_actor> {
 public:
  GatewayDoor(caf::actor_config& config, gateway_actor gateway,
              std::string secret)
      : NetworkFacing(config),
        gateway_(std::move(gateway)),
        secret_(std::move(secret)),
        log_(Logger()) {}

  const char* name() const override { return "spool.gateway_door"; }

  // Drops the gateway's handle when the door quits, not when its object
  // is destroyed: whatever still holds the door (the middleman, a message
  // in flight) must not hold the detached gateway too, whose destruction
  // CAF's actor_system destructor waits for.
  void on_exit() override { gateway_ = nullptr; }

  caf::behavior make_behavior() override {
    return {
        [this](challenge_atom, std::string& worker_nonce)
            -> caf::result<std::string, std::string> {
          return OnChallenge(worker_nonce);
        },
        [this](hello_atom, RemoteHello& hello) -> caf::result<RemoteWelcome> {
          return OnHello(hello);
        },
        // Passed on with their sender, which the gateway checks beside
        // the session's key.
        [this](heartbeat_atom, uint64_t session, std::string& key) {
          delegate(gateway_, heartbeat_atom::value, session, std::move(key));
        },
        [this](outcome_atom, uint64_t session, std::string& key,
               std::vector<RemoteOutcome>& outcomes) {
          delegate(gateway_, outcome_atom::value, session, std::move(key),
                   std::move(outcomes));
        },
        [this](DoorStop) { quit(); },
    };
  }

 protected:
  bool Admit(const caf::mailbox_element& element) const override {
    const caf::type_erased_tuple& content = element.content();
    // The door asks nothing (the gateway answers hellos itself), so no
    // response is its.
    if (element.mid.is_response()) return false;
    if (element.mid.is_request()) {
      return IsMessage<challenge_atom, std::string>(content) ||
             IsMessage<hello_atom, RemoteHello>(content);
    }
    return IsMessage<heartbeat_atom, uint64_t, std::string>(content) ||
           IsMessage<outcome_atom, uint64_t, std::string,
                     std::vector<RemoteOutcome>>(content) ||
           content.match_elements<DoorStop>();
  }

 private:
  caf::result<std::string, std::string> OnChallenge(
      const std::string& worker_nonce) {
    if (worker_nonce.size() != kNonceHexBytes) {
      Refused("a challenge whose nonce is not 64 hex digits");
      return caf::make_error(caf::sec::invalid_argument,
                             "refused: the nonce must be 64 hex digits");
    }
    std::string door_nonce = NewNonce();
    if (door_nonce.empty()) {
      return caf::make_error(caf::sec::runtime_error,
                             "refused for now: no random bytes");
    }
    ExpireChallenges();
    if (order_.size() >= kMaxPendingChallenges) {
      // Oldest first: a flood of challenges only delays honest workers,
      // who retry.
      pending_.erase(order_.front());
      order_.pop_front();
    }
    pending_.emplace(door_nonce,
                     std::chrono::steady_clock::now() + kChallengeLifetime);
    order_.push_back(door_nonce);
    std::string proof = DoorProof(secret_, worker_nonce, door_nonce);
    return {std::move(door_nonce), std::move(proof)};
  }

  caf::result<RemoteWelcome> OnHello(RemoteHello& hello) {
    if (Status shape = CheckHelloShape(hello); !shape.ok()) {
      Refused(shape.message());
      return caf::make_error(caf::sec::invalid_argument, shape.message());
    }
    // The nonce is used up whatever the proof says: a hello is never
    // checked twice against one nonce.
    auto it = pending_.find(hello.door_nonce);
    bool fresh =
        it != pending_.end() && it->second > std::chrono::steady_clock::now();
    if (it != pending_.end()) pending_.erase(it);
    if (!fresh) {
      Refused("worker '" + hello.node +
              "': its hello answers no open challenge (replayed or expired)");
      return caf::make_error(caf::sec::invalid_argument,
                             "refused: the hello answers no open challenge; "
                             "ask for a new one");
    }
    if (!SecretsMatch(hello.proof, WorkerProof(secret_, hello))) {
      Refused("worker '" + hello.node + "': wrong secret");
      return caf::make_error(caf::sec::invalid_argument,
                             "refused: the secret does not match");
    }
    auto peer = caf::actor_cast<caf::actor>(current_sender());
    if (!peer) {
      return caf::make_error(caf::sec::invalid_argument,
                             "refused: a hello needs a sender");
    }
    // Delegated, not requested: the gateway answers the worker itself, so
    // the welcome leaves the gateway before the first lease it sends the
    // new session (one sender, one connection, in order). Answered through
    // this door, the welcome could arrive after that lease, which the
    // worker then drops as not its session's (it was lost until the lease
    // ran out).
    return delegate(gateway_, hello_atom::value, std::move(hello),
                    std::move(peer));
  }

  void ExpireChallenges() {
    auto now = std::chrono::steady_clock::now();
    while (!order_.empty()) {
      auto it = pending_.find(order_.front());
      if (it != pending_.end() && it->second > now) break;
      if (it != pending_.end()) pending_.erase(it);
      order_.pop_front();
    }
  }

  // Logs a refused handshake, within the burst allowance.
  void Refused(const std::string& why) {
    auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= kFailedHelloLogPeriod) {
      if (left_out_ > 0) {
        log_->warn("{} more refused hello(s) were not logged", left_out_);
      }
      window_start_ = now;
      logged_ = 0;
      left_out_ = 0;
    }
    if (logged_ >= kFailedHelloLogBurst) {
      ++left_out_;
      return;
    }
    ++logged_;
    log_->warn("remote worker refused ({}): {}",
               caf::to_string(current_sender()), why);
  }

  gateway_actor gateway_;
  const std::string secret_;
  std::shared_ptr<spdlog::logger> log_;
  // Open challenges: door nonce -> until when it may be answered; order_
  // holds them oldest first (an entry whose nonce was used stays until it
  // reaches the front).
  std::unordered_map<std::string, SteadyTime> pending_;
  std::deque<std::string> order_;
  SteadyTime window_start_{};
  int logged_ = 0;
  uint64_t left_out_ = 0;
};

}  // namespace

caf::actor SpawnGatewayDoor(caf::actor_system& system, gateway_actor gateway,
                            std::string secret) {
  return system.spawn<GatewayDoor>(std::move(gateway), std::move(secret));
}

}  // namespace spool::actors
