// fuzz_remote_hello: what the gateway's door does with a peer's bytes
// before it trusts the peer (actors/gateway_door.cc): CAF's binary
// deserializer turns them into a RemoteHello, as BASP does for every
// message, then the door checks its shape and its proof
// (actors/remote_protocol.h). The same bytes are also read as the
// unauthenticated outcome message the door passes on, which carries a
// worker's batch and its session key.
//
// Invariants checked on every input:
//   - deserializing never throws and never allocates beyond the input's
//     size (a claimed length is checked against the bytes left);
//   - a decoded hello serializes back to bytes that decode to the same
//     hello;
//   - CheckHelloShape accepts only fields within the limits;
//   - WorkerProof is 64 hex digits, a function of every field: changing
//     the node, a type or the concurrency changes it, and so does the
//     secret;
//   - SecretsMatch accepts the proof only when it is the expected one.

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actors/messages.h"
#include "actors/remote_protocol.h"
#include "fuzz/fuzz_support.h"

namespace spool::fuzz {
namespace {

using actors::RemoteHello;
using actors::RemoteOutcome;

const std::string kSecret = "fuzz-secret-of-32-bytes-or-so!!!";

bool SameHello(const RemoteHello& a, const RemoteHello& b) {
  return a.door_nonce == b.door_nonce && a.worker_nonce == b.worker_nonce &&
         a.proof == b.proof && a.node == b.node && a.types == b.types &&
         a.concurrency == b.concurrency;
}

bool IsHex(const std::string& text) {
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

void CheckRoundTrip(const RemoteHello& hello) {
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  RemoteHello copy = hello;
  FUZZ_CHECK(!sink(copy), "a decoded hello does not serialize");
  caf::binary_deserializer source{nullptr, bytes.data(), bytes.size()};
  RemoteHello again;
  FUZZ_CHECK(!source(again), "a hello's own bytes do not decode");
  FUZZ_CHECK(SameHello(hello, again), "a hello changed in a round trip");
}

void CheckShape(const RemoteHello& hello) {
  if (!actors::CheckHelloShape(hello).ok()) return;
  FUZZ_CHECK(hello.door_nonce.size() == actors::kNonceHexBytes &&
                 hello.worker_nonce.size() == actors::kNonceHexBytes,
             "a hello with nonces of the wrong size was accepted");
  FUZZ_CHECK(hello.proof.size() == actors::kProofHexBytes,
             "a hello with a proof of the wrong size was accepted");
  FUZZ_CHECK(hello.node.size() <= actors::kMaxNodeNameBytes,
             "a node name over the limit was accepted");
  FUZZ_CHECK(hello.types.size() <= actors::kMaxHelloTypes,
             "more types than the limit were accepted");
  for (const std::string& type : hello.types) {
    FUZZ_CHECK(type.size() <= actors::kMaxHelloTypeBytes,
               "a type name over the limit was accepted");
  }
}

void CheckProof(const RemoteHello& hello) {
  const std::string proof = actors::WorkerProof(kSecret, hello);
  FUZZ_CHECK(proof.size() == actors::kProofHexBytes && IsHex(proof),
             "WorkerProof is not 64 hex digits: " + Printable(proof));
  FUZZ_CHECK(actors::SecretsMatch(hello.proof, proof) == (hello.proof == proof),
             "SecretsMatch disagrees with equality");
  FUZZ_CHECK(actors::WorkerProof(kSecret + "x", hello) != proof,
             "the proof does not depend on the secret");
  RemoteHello changed = hello;
  changed.node += "x";
  FUZZ_CHECK(actors::WorkerProof(kSecret, changed) != proof,
             "the proof does not depend on the node");
  changed = hello;
  changed.concurrency ^= 1;
  FUZZ_CHECK(actors::WorkerProof(kSecret, changed) != proof,
             "the proof does not depend on the concurrency");
  if (!hello.types.empty()) {
    // Moving a byte from one field to the next must not keep the proof:
    // the fields are length-prefixed.
    changed = hello;
    changed.node += changed.types.front().substr(0, 1);
    if (!changed.types.front().empty()) changed.types.front().erase(0, 1);
    FUZZ_CHECK(changed.node == hello.node ||
                   actors::WorkerProof(kSecret, changed) != proof,
               "a byte moved between fields keeps the proof");
  }
}

}  // namespace
}  // namespace spool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spool::fuzz;
  const char* bytes = reinterpret_cast<const char*>(data);
  {
    caf::binary_deserializer source{nullptr, bytes, size};
    RemoteHello hello;
    if (!source(hello)) {
      CheckRoundTrip(hello);
      CheckShape(hello);
      CheckProof(hello);
    }
  }
  {
    // outcome: session, key, batch (the door's Admit shape).
    caf::binary_deserializer source{nullptr, bytes, size};
    uint64_t session = 0;
    std::string key;
    std::vector<RemoteOutcome> outcomes;
    if (!source(session, key, outcomes)) {
      size_t held = key.size();
      for (const RemoteOutcome& outcome : outcomes) {
        held += outcome.message.size() + outcome.result.size();
      }
      FUZZ_CHECK(held <= size, "decoded more bytes than the input held");
    }
  }
  return 0;
}
