#include "actors/worker.h"

#include <caf/all.hpp>

namespace spool::actors {

namespace {

// Handles live in the state, not in the behavior's closures: CAF destroys
// the state when the actor exits, which breaks the reference cycle with the
// scheduler so that both can be destroyed.
struct WorkerState {
  static inline const char* name = "spool.worker";
  uint32_t index = 0;
  scheduler_actor scheduler;
  std::shared_ptr<const HandlerRegistry> registry;
};

worker_actor::behavior_type WorkerBehavior(
    worker_actor::stateful_pointer<WorkerState> self, uint32_t index,
    scheduler_actor scheduler,
    std::shared_ptr<const HandlerRegistry> registry) {
  self->state.index = index;
  self->state.scheduler = std::move(scheduler);
  self->state.registry = std::move(registry);
  return {
      [self](run_atom, const ClaimedTask& task) {
        auto& st = self->state;
        Outcome outcome =
            RunAttempt(*st.registry, *task.record, task.control.get());
        self->send(st.scheduler, outcome_atom::value, st.index,
                   std::move(outcome));
      },
  };
}

}  // namespace

worker_actor SpawnWorker(caf::actor_system& system, uint32_t index,
                         scheduler_actor scheduler,
                         std::shared_ptr<const HandlerRegistry> registry) {
  return system.spawn<caf::detached>(WorkerBehavior, index,
                                     std::move(scheduler), std::move(registry));
}

}  // namespace spool::actors
