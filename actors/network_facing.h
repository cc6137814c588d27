// The mailbox filter of every actor a network peer can reach (the gateway's
// door, a remote worker's node actor).
//
// CAF's middleman hands whatever a connected peer sends to the actor it
// names, and CAF acts on some messages before any behaviour sees them: an
// exit_msg with reason kill ends any actor, a link request ties the actor's
// life to the peer's connection, down and error messages reach the
// handlers, and a forwarding stack redirects the reply. A peer may also
// claim any sender it likes (BASP routed messages name their source). So
// the actor's enqueue admits only the messages of its protocol, by their
// types, before CAF's own dispatch runs; local control messages use types
// never announced to the network (a peer cannot build them: the middleman
// drops a message it cannot deserialize).

#ifndef SPOOL_ACTORS_NETWORK_FACING_H_
#define SPOOL_ACTORS_NETWORK_FACING_H_

#include <atomic>
#include <cstdint>

#include <caf/all.hpp>

namespace spool::actors {

// Whether `content` is (Atom, Ts...), the atom's value included.
template <class Atom, class... Ts>
bool IsMessage(const caf::type_erased_tuple& content) {
  return content.match_elements<caf::atom_value, Ts...>() &&
         content.get_as<caf::atom_value>(0) == Atom::value;
}

// `Base` (an event_based_actor) whose mailbox takes only what Admit(element)
// accepts; Admit must be cheap and not touch the actor's state (it runs on
// the sender's thread).
template <class Base>
class NetworkFacing : public Base {
 public:
  using Base::Base;

  void enqueue(caf::mailbox_element_ptr element,
               caf::execution_unit* unit) override {
    if (element == nullptr || !element->stages.empty() || !Admit(*element)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Base::enqueue(std::move(element), unit);
  }
  using Base::enqueue;

  // Messages refused so far.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 protected:
  virtual bool Admit(const caf::mailbox_element& element) const = 0;

 private:
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_NETWORK_FACING_H_
