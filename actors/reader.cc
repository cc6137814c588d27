#include "actors/reader.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <optional>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "runtime/logging.h"

namespace spool::actors {
namespace {

// The pool handle lives in the state, which CAF destroys at exit, so that
// the pool and its readers do not keep each other alive.
struct ReaderState {
  static inline const char* name = "spool.reader";
  uint32_t index = 0;
  const storage::TaskStore* store = nullptr;
  reader_pool_actor pool;
};

reader_actor::behavior_type ReaderBehavior(
    reader_actor::stateful_pointer<ReaderState> self, uint32_t index,
    const storage::TaskStore* store, reader_pool_actor pool) {
  self->state.index = index;
  self->state.store = store;
  self->state.pool = std::move(pool);
  return {
      [self](read_atom, ReadJob& job) {
        auto& st = self->state;
        try {
          auto view = st.store->NewReadView();
          job.run(*view);
        } catch (const std::exception& e) {
          job.fail(Status::Aborted(std::string("query failed: ") + e.what()));
        } catch (...) {
          job.fail(
              Status::Aborted("query failed with a non-standard exception"));
        }
        self->send(st.pool, idle_atom::value, st.index);
      },
  };
}

struct Slot {
  reader_actor reader;
  // The query the reader is running, kept to fail it if the reader dies.
  std::optional<ReadJob> job;
};

struct PoolState {
  static inline const char* name = "spool.reader_pool";

  ReaderPoolConfig config;
  std::vector<Slot> slots;
  // The current readers, shared with the exit hook, which runs after this
  // state is gone.
  std::shared_ptr<std::vector<reader_actor>> readers =
      std::make_shared<std::vector<reader_actor>>();
  std::vector<uint32_t> idle;
  std::deque<ReadJob> waiting;
  // Set by stop: called once every query is answered.
  std::optional<Completion> on_stopped;

  ~PoolState() {
    // Whatever is left when the pool stops can no longer be answered.
    for (ReadJob& job : waiting) job.fail(Status::Closed("the runtime closed"));
    for (Slot& slot : slots) {
      if (slot.job) slot.job->fail(Status::Closed("the runtime closed"));
    }
  }
};

using Self = reader_pool_actor::stateful_pointer<PoolState>;

void StopIfDone(Self self) {
  auto& st = self->state;
  if (!st.on_stopped || !st.waiting.empty() ||
      st.idle.size() != st.slots.size()) {
    return;
  }
  (*st.on_stopped)(Status::OK());
  st.on_stopped.reset();
  self->quit();
}

void StartReader(Self self, uint32_t index) {
  auto& slot = self->state.slots[index];
  slot.reader = self->spawn<caf::detached + caf::monitored>(
      ReaderBehavior, index, self->state.config.store, reader_pool_actor{self});
  (*self->state.readers)[index] = slot.reader;
  slot.job.reset();
  self->state.idle.push_back(index);
}

void Assign(Self self, uint32_t index, ReadJob job) {
  auto& slot = self->state.slots[index];
  slot.job = job;
  self->send(slot.reader, read_atom::value, std::move(job));
}

reader_pool_actor::behavior_type PoolBehavior(Self self,
                                              ReaderPoolConfig config) {
  self->state.config = config;
  self->state.slots.resize(config.readers);
  self->state.readers->resize(config.readers);
  for (uint32_t i = 0; i < config.readers; ++i) StartReader(self, i);

  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    for (uint32_t i = 0; i < st.slots.size(); ++i) {
      if (st.slots[i].reader.address() != down.source) continue;
      if (st.slots[i].job) {
        st.slots[i].job->fail(
            Status::Aborted("the reader running this query stopped: " +
                            caf::to_string(down.reason)));
      }
      Logger()->warn("reader {} stopped ({}); starting a new one", i,
                     caf::to_string(down.reason));
      // A reader that died while idle may still be listed as idle.
      st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), i),
                    st.idle.end());
      StartReader(self, i);
      if (!st.waiting.empty()) {
        st.idle.pop_back();
        Assign(self, i, std::move(st.waiting.front()));
        st.waiting.pop_front();
      }
      return;
    }
  });
  self->attach_functor([readers = self->state.readers] {
    for (const reader_actor& reader : *readers) {
      if (reader) caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
    }
  });

  return {
      [self](read_atom, ReadJob& job) {
        auto& st = self->state;
        if (st.idle.empty()) {
          st.waiting.push_back(std::move(job));
          return;
        }
        uint32_t index = st.idle.back();
        st.idle.pop_back();
        Assign(self, index, std::move(job));
      },
      [self](idle_atom, uint32_t index) {
        auto& st = self->state;
        // An idle report from a reader's earlier life (it died after sending
        // it, and was replaced) must not hand work to the new reader twice.
        if (index >= st.slots.size() ||
            caf::actor_cast<caf::actor_addr>(self->current_sender()) !=
                st.slots[index].reader.address()) {
          return;
        }
        st.slots[index].job.reset();
        if (st.waiting.empty()) {
          st.idle.push_back(index);
          StopIfDone(self);
          return;
        }
        Assign(self, index, std::move(st.waiting.front()));
        st.waiting.pop_front();
      },
      [self](stop_atom, Completion& done) {
        self->state.on_stopped = std::move(done);
        StopIfDone(self);
      },
  };
}

}  // namespace

reader_pool_actor SpawnReaderPool(caf::actor_system& system,
                                  ReaderPoolConfig config) {
  return system.spawn(PoolBehavior, config);
}

}  // namespace spool::actors
