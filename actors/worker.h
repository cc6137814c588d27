// The worker: runs handlers, one attempt at a time, on its own thread.

#ifndef SPOOL_ACTORS_WORKER_H_
#define SPOOL_ACTORS_WORKER_H_

#include <cstdint>
#include <memory>

#include "actors/actors.h"
#include "actors/handler_registry.h"

namespace caf {
class actor_system;
}

namespace spool::actors {

// Spawns worker `index` on a thread of its own (detached): a handler may
// block. It reports each outcome to `scheduler`.
worker_actor SpawnWorker(caf::actor_system& system, uint32_t index,
                         scheduler_actor scheduler,
                         std::shared_ptr<const HandlerRegistry> registry);

}  // namespace spool::actors

#endif  // SPOOL_ACTORS_WORKER_H_
