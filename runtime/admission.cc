#include "runtime/admission.h"

#include <string>
#include <utility>

namespace spool {
namespace {

// Adds `amount` to `counter` unless that would pass `bound` (0: no bound).
bool TryAdd(std::atomic<uint64_t>& counter, uint64_t amount, uint64_t bound) {
  if (bound == 0) {
    counter.fetch_add(amount);
    return true;
  }
  uint64_t now = counter.load(std::memory_order_relaxed);
  do {
    if (now + amount > bound) return false;
  } while (!counter.compare_exchange_weak(now, now + amount));
  return true;
}

// InvalidArgument for a call that exceeds a bound by itself: no amount of
// waiting would let it in.
Status TooLarge(std::string_view what, uint64_t amount, const char* unit,
                const char* key, uint64_t bound) {
  return Status::InvalidArgument(
      std::string(what) + ": " + std::to_string(amount) + " " + unit +
      " exceed writer." + key + " (" + std::to_string(bound) +
      ") by themselves, so they could never be accepted; split the call or "
      "raise the bound");
}

}  // namespace

Admission::Admission(const Options& options, Send send)
    : max_tasks_(options.writer_max_pending_tasks),
      max_bytes_(options.writer_max_pending_bytes),
      when_full_(options.on_writer_full),
      counting_(max_tasks_ != 0 || max_bytes_ != 0),
      send_(std::move(send)) {}

Status Admission::Admit(const Cost& cost, std::string_view what,
                        actors::EnqueueCommand&& command) {
  if (!counting_) {
    send_(std::move(command));
    return Status::OK();
  }
  if (max_tasks_ != 0 && cost.tasks > max_tasks_) {
    return TooLarge(what, cost.tasks, "tasks", "max_pending_tasks", max_tasks_);
  }
  if (max_bytes_ != 0 && cost.bytes > max_bytes_) {
    return TooLarge(what, cost.bytes, "payload and type bytes",
                    "max_pending_bytes", max_bytes_);
  }
  // With calls waiting, this one waits behind them.
  if (waiting_tasks_.load() == 0) {
    Full full = TryReserve(cost);
    if (full == Full::kNo) {
      send_(std::move(command));
      return Status::OK();
    }
    if (full == Full::kBytes) HandOnWaiting();  // see TryReserve
    if (when_full_ == WriterFull::kFailBusy) {
      busy_refusals_.fetch_add(1, std::memory_order_relaxed);
      return BusyError(full, cost, /*line_full=*/false);
    }
  }
  return Wait(cost, std::move(command));
}

Admission::Full Admission::TryReserve(const Cost& cost) {
  if (!TryAdd(pending_tasks_, cost.tasks, max_tasks_)) return Full::kTasks;
  if (!TryAdd(pending_bytes_, cost.bytes, max_bytes_)) {
    // The tasks' room was taken for a moment, and a hand-on of the waiting
    // calls may have found it taken: a caller without the mutex hands on
    // after this, as a release does. (With the mutex held no hand-on ran
    // meanwhile; a call this made fail on the fast path tries again in
    // Wait, behind the mutex.)
    pending_tasks_.fetch_sub(cost.tasks);
    return Full::kBytes;
  }
  return Full::kNo;
}

Status Admission::Wait(const Cost& cost, actors::EnqueueCommand&& command) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::Closed("the runtime is closed");
  uint64_t tasks_before = waiting_tasks_.load();
  uint64_t bytes_before = waiting_bytes_.load();
  // Counted before the last try, so that a release either made room the try
  // sees, or sees this call waiting (the header's "no wake-up is lost").
  AddWaiting(cost, +1);
  if (line_.empty() && TryReserve(cost) == Full::kNo) {
    AddWaiting(cost, -1);
    send_(std::move(command));
    return Status::OK();
  }
  Full line_full = Full::kNo;
  if (max_tasks_ != 0 && tasks_before + cost.tasks > max_tasks_) {
    line_full = Full::kTasks;
  } else if (max_bytes_ != 0 && bytes_before + cost.bytes > max_bytes_) {
    line_full = Full::kBytes;
  }
  if (line_full == Full::kNo) {
    line_.push_back(Waiting{cost, std::move(command)});
    return Status::OK();
  }
  AddWaiting(cost, -1);
  busy_refusals_.fetch_add(1, std::memory_order_relaxed);
  return BusyError(line_full, cost, /*line_full=*/true);
}

void Admission::Release(const Cost& cost) {
  if (!counting_) return;
  pending_tasks_.fetch_sub(cost.tasks);
  pending_bytes_.fetch_sub(cost.bytes);
  HandOnWaiting();
}

void Admission::HandOnWaiting() {
  if (waiting_tasks_.load() == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  while (!closed_ && !line_.empty()) {
    Waiting& front = line_.front();
    if (TryReserve(front.cost) != Full::kNo) break;
    AddWaiting(front.cost, -1);
    send_(std::move(front.command));
    line_.pop_front();
  }
}

void Admission::Close(const Status& status) {
  std::deque<Waiting> line;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    line.swap(line_);
    for (const Waiting& waiting : line) AddWaiting(waiting.cost, -1);
  }
  for (Waiting& waiting : line) {
    pending_tasks_.fetch_add(waiting.cost.tasks);
    pending_bytes_.fetch_add(waiting.cost.bytes);
    waiting.command.done(status);
  }
}

void Admission::Fill(Statistics* stats) const {
  stats->pending_tasks = pending_tasks_.load(std::memory_order_relaxed);
  stats->pending_bytes = pending_bytes_.load(std::memory_order_relaxed);
  stats->waiting_tasks = waiting_tasks_.load(std::memory_order_relaxed);
  stats->waiting_bytes = waiting_bytes_.load(std::memory_order_relaxed);
  stats->busy_refusals = busy_refusals_.load(std::memory_order_relaxed);
}

void Admission::AddWaiting(const Cost& cost, int64_t sign) {
  if (sign > 0) {
    waiting_tasks_.fetch_add(cost.tasks);
    waiting_bytes_.fetch_add(cost.bytes);
  } else {
    waiting_tasks_.fetch_sub(cost.tasks);
    waiting_bytes_.fetch_sub(cost.bytes);
  }
}

Status Admission::BusyError(Full full, const Cost& cost, bool line_full) const {
  bool tasks = full == Full::kTasks;
  uint64_t bound = tasks ? max_tasks_ : max_bytes_;
  uint64_t held = tasks ? pending_tasks_.load() : pending_bytes_.load();
  std::string message =
      std::string("writer.") +
      (tasks ? "max_pending_tasks" : "max_pending_bytes") + " (" +
      std::to_string(bound) + ") reached: " + std::to_string(held) +
      (tasks ? " enqueued tasks" : " bytes of enqueued payloads and types") +
      " are not yet stored, and this call brings " +
      std::to_string(tasks ? cost.tasks : cost.bytes) + " more";
  if (line_full) {
    message +=
        "; as many again already wait for room (writer.on_full = \"wait\")";
  }
  return Status::Busy(message + "; nothing of the call was kept");
}

}  // namespace spool
