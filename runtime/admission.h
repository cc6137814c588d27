// Admission: the bound on enqueues accepted but not yet durable (issue 15).
//
// Enqueue never blocks, and without a bound it would also accept without
// end: under a disk stall the writer's mailbox, which holds every task
// handed to it until its commit, grows until the process dies. Admission
// counts what the runtime's Enqueue, EnqueueBatch and EnqueueChain calls
// have handed to the writer and not yet seen resolved, in tasks and in bytes
// (payload and type name: the part of a task the caller sizes), and refuses
// or parks a call that does not fit (Options::writer_max_pending_tasks,
// writer_max_pending_bytes, on_writer_full).
//
// The hot path takes no lock: a compare-and-swap per bound at the call, a
// subtraction per bound when the writer resolves the call, and one load to
// see whether a call waits. Only a call that does not fit takes the mutex.
//
// Waiting (WriterFull::kWait). A call that does not fit waits in a
// first-in first-out line and is handed to the writer by whoever frees room
// (the writer's thread, as it resolves calls). The line holds the calls'
// tasks, so it is bounded too, by the same two values: a call that fits
// neither the writer nor the line is refused with Busy, as in kFailBusy. A
// stalled disk thus costs at most twice the bounds, and a caller that
// outruns the disk for good is still told. The alternatives were worse: an
// unbounded line is the very growth this exists to stop, and handing the
// wait back to the caller (a future of "room", the task kept by the caller)
// moves the same memory to the caller and loses the order of the calls.
// Once a call waits, later calls wait behind it even if they would fit, so
// that calls reach the writer in the order they were made.
//
// No wake-up is lost: a call about to wait counts itself in waiting_tasks_
// before its last try to fit, and a release subtracts before it reads
// waiting_tasks_ (both sequentially consistent), so either that try sees the
// room or the release sees the waiting call and hands it on. A try that
// fails on bytes after it took room for its tasks gives the tasks back and
// hands on like a release, so a transient reservation never strands a
// waiting call.
//
// Thread safety: every method may be called from any thread.

#ifndef SPOOL_RUNTIME_ADMISSION_H_
#define SPOOL_RUNTIME_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>

#include <spool/options.h>
#include <spool/statistics.h>
#include <spool/status.h>

#include "actors/messages.h"

namespace spool {

class Admission {
 public:
  // What one call holds while it is pending: its tasks, and the bytes of
  // their payloads and type names.
  struct Cost {
    uint64_t tasks = 0;
    uint64_t bytes = 0;
  };

  // Hands a command to the writer. Called on the thread of Admit, or of the
  // Release that made room, with the line's mutex held; must not call back.
  using Send = std::function<void(actors::EnqueueCommand)>;

  // The bounds and the policy are options.writer_max_pending_tasks,
  // writer_max_pending_bytes and on_writer_full.
  Admission(const Options& options, Send send);

  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Admits a call of `cost`: hands `command` to the writer now, or (kWait)
  // puts it in the line. On OK the command was taken, and its `done` must
  // call Release(cost) once, before or as it resolves the call's future. On
  // an error nothing was taken or counted: InvalidArgument, naming the
  // argument `what`, when the call alone exceeds a bound; Busy naming the
  // bound and its value when it does not fit now (and, with kWait, the line
  // is full too); Closed after Close.
  Status Admit(const Cost& cost, std::string_view what,
               actors::EnqueueCommand&& command);

  // The call of `cost` resolved (stored or failed): frees its room and hands
  // the waiting calls that now fit to the writer, in order.
  void Release(const Cost& cost);

  // From now on hands nothing more to the writer, and resolves every waiting
  // call's `done` with `status` (counted as admitted just before, so that
  // its Release balances). For Runtime::Close, once no call is in flight.
  void Close(const Status& status);

  // Adds the pending and waiting figures and the Busy refusals to `stats`.
  void Fill(Statistics* stats) const;

 private:
  // Which bound a try to fit hit.
  enum class Full : uint8_t { kNo, kTasks, kBytes };

  struct Waiting {
    Cost cost;
    actors::EnqueueCommand command;
  };

  // Takes room for `cost` in the pending counters, both or neither.
  Full TryReserve(const Cost& cost);
  // Puts the call in the line, or refuses it (kWait only).
  Status Wait(const Cost& cost, actors::EnqueueCommand&& command);
  // Hands the calls at the front of the line that fit to the writer.
  void HandOnWaiting();
  Status BusyError(Full full, const Cost& cost, bool line_full) const;
  void AddWaiting(const Cost& cost, int64_t sign);

  const uint64_t max_tasks_;
  const uint64_t max_bytes_;
  const WriterFull when_full_;
  // False when both bounds are 0: nothing is counted at all.
  const bool counting_;
  const Send send_;

  std::atomic<uint64_t> pending_tasks_{0};
  std::atomic<uint64_t> pending_bytes_{0};
  // Changed under mutex_; read without it.
  std::atomic<uint64_t> waiting_tasks_{0};
  std::atomic<uint64_t> waiting_bytes_{0};
  std::atomic<uint64_t> busy_refusals_{0};

  std::mutex mutex_;
  std::deque<Waiting> line_;
  bool closed_ = false;
};

}  // namespace spool

#endif  // SPOOL_RUNTIME_ADMISSION_H_
