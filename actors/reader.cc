#include "actors/reader.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "storage/queries.h"
#include "util/logging.h"
#include "util/thread_name.h"

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

void RunJob(const storage::TaskStore& store, ReadJob& job) {
  try {
    auto view = store.NewReadView();
    job.run(*view);
  } catch (const std::exception& e) {
    job.fail(Status::Aborted(std::string("query failed: ") + e.what()));
  } catch (...) {
    job.fail(Status::Aborted("query failed with a non-standard exception"));
  }
}

reader_actor::behavior_type ReaderBehavior(
    reader_actor::stateful_pointer<ReaderState> self, uint32_t index,
    const storage::TaskStore* store, reader_pool_actor pool) {
  NameThisThread("spool-reader-" + std::to_string(index));
  self->state.index = index;
  self->state.store = store;
  self->state.pool = std::move(pool);
  return {
      [self](read_atom, const ReadBatch& batch) {
        auto& st = self->state;
        // Per thread; set here, on the reader's own thread.
        storage::DisablePerfCountersOnThisThread();
        // A read-only store first replays what the directory's holder wrote
        // since, once per batch: every query in it was asked before this.
        // On failure the queries still run, on what was replayed before.
        if (st.store->read_only()) {
          Status s = st.store->CatchUp();
          if (!s.ok()) Logger()->warn("reader: {}", s.ToString());
        }
        for (ReadJob& job : *batch) RunJob(*st.store, job);
        // One report per batch, on the same channel (this reader's messages
        // to the pool) as the down message that would follow its death.
        self->send(st.pool, idle_atom::value, st.index);
      },
  };
}

struct Slot {
  reader_actor reader;
  // The queries the reader holds, kept to queue them again if it dies.
  ReadBatch batch;
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
      if (!slot.batch) continue;
      for (ReadJob& job : *slot.batch) {
        if (job.fail) job.fail(Status::Closed("the runtime closed"));
      }
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
  slot.batch.reset();
  self->state.idle.push_back(index);
  if (self->state.config.on_reader_started) {
    self->state.config.on_reader_started(index, slot.reader);
  }
}

// Hands reader `index` its share of the waiting queries: a 1/N share with N
// readers, so that a burst spreads over the pool instead of queueing behind
// one reader. REQUIRES: the reader is idle and queries wait.
void Dispatch(Self self, uint32_t index) {
  auto& st = self->state;
  size_t share = (st.waiting.size() + st.slots.size() - 1) / st.slots.size();
  share = std::clamp<size_t>(share, 1, kMaxReadBatch);
  auto batch = std::make_shared<std::vector<ReadJob>>();
  batch->reserve(share);
  for (size_t i = 0; i < share; ++i) {
    batch->push_back(std::move(st.waiting.front()));
    st.waiting.pop_front();
    batch->back().dispatches++;
  }
  st.slots[index].batch = batch;
  self->send(st.slots[index].reader, read_atom::value, std::move(batch));
}

// Hands waiting queries to idle readers while both exist.
void DispatchAll(Self self) {
  auto& st = self->state;
  while (!st.waiting.empty() && !st.idle.empty()) {
    uint32_t index = st.idle.back();
    st.idle.pop_back();
    Dispatch(self, index);
  }
  if (st.config.metrics) {
    st.config.metrics->reader_queue.store(st.waiting.size(),
                                          std::memory_order_relaxed);
  }
}

// Reader `index` died holding `batch`: its queries go back to the front of
// the queue, in their order, unless they have been handed out too often.
void Requeue(Self self, const ReadBatch& batch, const caf::error& reason) {
  auto& st = self->state;
  for (auto it = batch->rbegin(); it != batch->rend(); ++it) {
    if (it->dispatches >= kMaxReadDispatches) {
      it->fail(Status::Aborted(
          "the readers running this query stopped " +
          std::to_string(it->dispatches) +
          " times; the last reason: " + caf::to_string(reason)));
      continue;
    }
    st.waiting.push_front(std::move(*it));
  }
  batch->clear();
}

reader_pool_actor::behavior_type PoolBehavior(Self self,
                                              ReaderPoolConfig config) {
  NameThisThread("spool-readers");
  self->state.config = config;
  self->state.slots.resize(config.readers);
  self->state.readers->resize(config.readers);
  for (uint32_t i = 0; i < config.readers; ++i) StartReader(self, i);

  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    for (uint32_t i = 0; i < st.slots.size(); ++i) {
      if (st.slots[i].reader.address() != down.source) continue;
      size_t held = st.slots[i].batch ? st.slots[i].batch->size() : 0;
      Logger()->warn(
          "reader {} stopped ({}) holding {} queries; starting a new one "
          "and queueing them again",
          i, caf::to_string(down.reason), held);
      if (st.slots[i].batch) Requeue(self, st.slots[i].batch, down.reason);
      // A reader that died while idle may still be listed as idle.
      st.idle.erase(std::remove(st.idle.begin(), st.idle.end(), i),
                    st.idle.end());
      StartReader(self, i);
      DispatchAll(self);
      StopIfDone(self);
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
        self->state.waiting.push_back(std::move(job));
        DispatchAll(self);
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
        st.slots[index].batch.reset();
        if (st.waiting.empty()) {
          st.idle.push_back(index);
          StopIfDone(self);
          return;
        }
        Dispatch(self, index);
      },
      [self](stop_atom, Completion& done) {
        self->state.on_stopped = std::move(done);
        StopIfDone(self);
      },
  };
}

// Calls `fail` when the last copy of a job that never ran is destroyed.
class DropGuard {
 public:
  explicit DropGuard(std::function<void(const Status&)> fail)
      : fail_(std::move(fail)) {}
  ~DropGuard() {
    if (!answered_.load(std::memory_order_acquire)) {
      fail_(Status::Closed("the query was dropped: the runtime is closing"));
    }
  }
  void Answered() { answered_.store(true, std::memory_order_release); }
  void Fail(const Status& s) {
    Answered();
    fail_(s);
  }

 private:
  std::atomic<bool> answered_{false};
  std::function<void(const Status&)> fail_;
};

}  // namespace

reader_pool_actor SpawnReaderPool(caf::actor_system& system,
                                  ReaderPoolConfig config) {
  // On a thread of its own, although it never blocks: callers are threads
  // outside the actor system, and a message from one to an actor on the
  // work-stealing scheduler waits for an idle worker to wake from its
  // back-off sleep (76-120 us per query measured here, against 25 us when
  // the pool is woken through its own condition variable).
  return system.spawn<caf::detached>(PoolBehavior, config);
}

ReadJob MakeReadJob(
    std::function<void(const storage::TaskStore::ReadView&)> run,
    std::function<void(const Status&)> fail) {
  auto guard = std::make_shared<DropGuard>(std::move(fail));
  ReadJob job;
  job.run = [guard,
             run = std::move(run)](const storage::TaskStore::ReadView& view) {
    guard->Answered();
    run(view);
  };
  job.fail = [guard](const Status& s) { guard->Fail(s); };
  return job;
}

}  // namespace spool::actors
