// gateway_attacker: a real CAF peer that attacks a runtime's remote-worker
// gateway over TCP (docs/security.md, "The remote gateway"). Driven by
// gateway_attack_test.py, which runs spoold with a gateway and a real
// spool-worker, and checks afterwards that the worker still runs tasks.
//
//   gateway_attacker HOST PORT
//
// Each step prints one line; the exit status is 0 only if every attack
// failed and the door still answers a challenge at the end. It never holds
// the secret.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/messages.h"
#include "actors/remote_protocol.h"

namespace {

using namespace spool::actors;
constexpr auto kWait = std::chrono::seconds(5);

int failures = 0;

void Expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

// The door's answer to a challenge: (door nonce, door proof), or empty.
std::pair<std::string, std::string> Challenge(caf::scoped_actor& self,
                                              const caf::actor& door) {
  std::pair<std::string, std::string> answer;
  self->request(door, kWait, challenge_atom::value, NewNonce())
      .receive(
          [&](std::string& nonce, std::string& proof) {
            answer = {std::move(nonce), std::move(proof)};
          },
          [&](caf::error&) {});
  return answer;
}

// Whether the door welcomed `hello` (it must not: no proof holds).
bool Welcomed(caf::scoped_actor& self, const caf::actor& door,
              const RemoteHello& hello) {
  bool welcomed = false;
  self->request(door, kWait, hello_atom::value, hello)
      .receive([&](RemoteWelcome&) { welcomed = true; }, [&](caf::error&) {});
  return welcomed;
}

RemoteHello Forged(const std::string& door_nonce) {
  RemoteHello hello;
  hello.door_nonce = door_nonce;
  hello.worker_nonce = NewNonce();
  hello.proof = std::string(kProofHexBytes, 'a');
  hello.node = "attacker";
  hello.types = {"noop"};
  hello.concurrency = 4;
  return hello;
}

void AttackInternalMessages(caf::scoped_actor& self, const caf::actor& door) {
  // CAF acts on exit messages before any behaviour; the door drops them.
  caf::anon_send_exit(door, caf::exit_reason::kill);
  caf::anon_send_exit(door, caf::exit_reason::user_shutdown);
  // The gateway's own messages, which the published actor once obeyed.
  caf::anon_send(door, stop_atom::value);
  caf::anon_send(door, tick_atom::value);
  caf::anon_send(door, start_atom::value);
  self->send(door, stop_atom::value);
  // Link to the door, then die: a linked actor's exit would end it.
  self->send(door, caf::link_atom::value, self->address());
  Expect(!Challenge(self, door).first.empty(),
         "the door answers after exit, stop, tick, start and link");
}

void AttackHello(caf::scoped_actor& self, const caf::actor& door) {
  auto [nonce, proof] = Challenge(self, door);
  Expect(nonce.size() == kNonceHexBytes && proof.size() == kProofHexBytes,
         "a challenge is answered with a nonce and a proof");
  Expect(!Welcomed(self, door, Forged(nonce)), "a forged proof is refused");
  Expect(!Welcomed(self, door, Forged(nonce)),
         "the spent door nonce is refused (no replay)");
  Expect(!Welcomed(self, door, Forged(std::string(kNonceHexBytes, '0'))),
         "a door nonce the door never gave is refused");
  RemoteHello huge = Forged(Challenge(self, door).first);
  huge.types.assign(5000, std::string(200, 't'));
  Expect(!Welcomed(self, door, huge), "5000 declared types are refused");
  RemoteHello long_name = Forged(Challenge(self, door).first);
  long_name.node.assign(10000, 'n');
  Expect(!Welcomed(self, door, long_name), "a 10 kB node name is refused");
  RemoteHello greedy = Forged(Challenge(self, door).first);
  greedy.concurrency = 1u << 30;
  Expect(!Welcomed(self, door, greedy), "a concurrency of 2^30 is refused");
  // Many challenges: the door keeps a bounded number pending.
  for (int i = 0; i < 5000; ++i) {
    caf::anon_send(door, challenge_atom::value, NewNonce());
  }
}

void AttackSessions(caf::scoped_actor& self, const caf::actor& door) {
  // Guessed sessions with a wrong key: heartbeats that would keep a dead
  // session alive, outcomes that would settle another worker's leases.
  for (uint64_t session = 1; session <= 8; ++session) {
    self->send(door, heartbeat_atom::value, session,
               std::string(kNonceHexBytes, 'k'));
    std::vector<RemoteOutcome> outcomes;
    for (uint64_t lease = 1; lease <= 16; ++lease) {
      RemoteOutcome outcome;
      outcome.lease = lease;
      outcome.task = lease;
      outcome.attempt = 1;
      outcome.code = 1;  // a failure, were it believed
      outcome.message = "forged";
      outcome.permanent = true;
      outcomes.push_back(outcome);
    }
    self->send(door, outcome_atom::value, session,
               std::string(kNonceHexBytes, 'k'), outcomes);
  }
  Expect(!Challenge(self, door).first.empty(),
         "the door answers after forged heartbeats and outcomes");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gateway_attacker HOST PORT\n");
    return 2;
  }
  caf::actor_system_config config;
  config.load<caf::io::middleman>();
  RegisterRemoteTypes(&config);
  caf::actor_system system(config);
  auto door = system.middleman().remote_actor(
      argv[1], static_cast<uint16_t>(std::stoi(argv[2])));
  if (!door) {
    std::fprintf(stderr, "gateway_attacker: cannot reach the door: %s\n",
                 system.render(door.error()).c_str());
    return 2;
  }
  {
    caf::scoped_actor self{system};
    AttackInternalMessages(self, *door);
    AttackHello(self, *door);
    AttackSessions(self, *door);
    Expect(!Challenge(self, *door).first.empty(),
           "the door still answers at the end");
  }
  std::printf("%s\n",
              failures == 0 ? "ALL ATTACKS FAILED" : "SOME ATTACK WORKED");
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}
